#!/usr/bin/env python3
"""`--precision bf16` (ir/autocast.h) against torch.autocast("cpu", dtype=torch.bfloat16) in torch 1.13.

For the MLP and the CNN of models/ (batch 16, the samples of models/make_reference.py) and the zoo's tiny Transformer
(models/zoo/generate.py, batch 8, random tokens), STEPS SGD steps are run four ways from the same initializers:
torch with autocast, torch in fp32, `cleave eval --precision bf16` and `cleave eval` (fp32). Checks, per model:
  - the first step's loss (the forward pass, where both round the same values once) of Cleave bf16 is closer to
    torch autocast's than Cleave fp32's is, by a factor of 4: the check tells bf16 from fp32;
  - every loss of Cleave bf16 is within TOL of torch autocast's (relative to max(1, |torch|)): torch's bfloat16
    GEMM backward does not round like a float32-accumulated product (its Linear weight gradient is ~1 bf16 ulp
    off round(exact)), so later steps agree to bfloat16's precision, not exactly.
Then a 2-rank data-parallel bundle compiled with --precision bf16 must print `cleave eval --precision bf16`'s losses
(1e-5): the rounding ops partition like any elementwise op.

Usage: bf16_vs_autocast.py CLEAVE_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models"))
sys.path.insert(0, os.path.join(src, "models", "zoo"))
import generate  # noqa: E402
import make_models  # noqa: E402
import make_reference  # noqa: E402

STEPS, TOL = 4, 2e-3


def torch_losses(make, data, lr, bf16):
    model = make()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(*data(step))
        loss.float().backward()
        opt.step()
        out.append(float(loss))
    return out


def cleave_losses(args):
    r = subprocess.run([cleave, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: cleave {' '.join(args)}: {r.stderr.strip().splitlines()[-1:]}")
    return [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]


def models(work):
    """(name, onnx path, torch module factory, data(step) for torch, --data for cleave, batch, lr)."""
    out = []
    for name in ("mlp", "cnn"):
        path = os.path.join(src, "models", f"{name}.onnx")
        xf, yf = make_reference.DATA[name]
        xs = np.load(os.path.join(src, "models", "data", xf))
        ys = np.load(os.path.join(src, "models", "data", yf))

        def make(name=name, path=path):
            m = make_models.make_model(name)
            make_reference.load_from_onnx(m, path)
            return m

        def data(step, xs=xs, ys=ys):
            idx = make_reference.batch_indices(step, len(xs))
            return torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])

        out.append((name, path, make, data, f"x={src}/models/data/{xf},y={src}/models/data/{yf}",
                    make_reference.BATCH, 0.1))
    # The zoo's tiny Transformer: generate.py seeds torch before making the module whose values it exports.
    path = os.path.join(work, "transformer.onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(src, "models", "zoo", "generate.py"), "--family", "transformer",
                    "--variant", "tiny", "-o", path], check=True, capture_output=True)
    make_tf, _, _ = generate.resolve("transformer", "tiny")
    rng = np.random.default_rng(0)
    tokens = {k: rng.integers(0, 32, (STEPS * 8, 8)).astype(np.int64) for k in ("x", "y")}
    for k, v in tokens.items():
        np.save(os.path.join(work, f"tf_{k}.npy"), v)

    def make_transformer():
        torch.manual_seed(0)
        return make_tf()

    def tf_data(step):
        s = slice((step - 1) * 8, step * 8)
        return torch.from_numpy(tokens["x"][s]), torch.from_numpy(tokens["y"][s])

    out.append(("transformer", path, make_transformer, tf_data, f"x={work}/tf_x.npy,y={work}/tf_y.npy", 8, 0.1))
    return out


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for name, path, make, data, cdata, batch, lr in models(work):
            flags = ["--batch", str(batch), "--steps", str(STEPS), "--optimizer", "sgd", "--lr", str(lr), "--data",
                     cdata]
            t16, t32 = torch_losses(make, data, lr, True), torch_losses(make, data, lr, False)
            c16 = cleave_losses(["eval", path, *flags, "--precision", "bf16"])
            c32 = cleave_losses(["eval", path, *flags])
            rel = lambda a, b: max(abs(p - q) / max(1.0, abs(q)) for p, q in zip(a, b))  # noqa: E731
            follow, first16, first32 = rel(c16, t16), rel(c16[:1], t16[:1]), rel(c32[:1], t16[:1])
            ok = len(c16) == STEPS and follow <= TOL and 4 * first16 < first32
            failures += not ok
            print(f"{'ok' if ok else 'FAIL'} {name}: step 1 loss vs torch autocast: cleave bf16 {first16:.1e}, cleave "
                  f"fp32 {first32:.1e}; all steps: cleave bf16 {follow:.1e} (tolerance {TOL}), torch fp32 "
                  f"{rel(t32, t16):.1e}; losses {[round(v, 6) for v in c16]} vs {[round(v, 6) for v in t16]}")
            if name == "mlp":
                bundle = os.path.join(work, "mlp_bf16")
                subprocess.run([cleave, "compile", path, "--devices", "2", "--batch", str(batch), "--optimizer", "sgd",
                                "--lr", str(lr), "--precision", "bf16", "-o", bundle], check=True, capture_output=True)
                r = subprocess.run([cleave, "run", bundle, "--data", cdata, "--steps", str(STEPS)],
                                   capture_output=True, text=True)
                ran = [float(l.split()[3]) for l in r.stdout.splitlines() if l.startswith("step ")]
                same = len(ran) == STEPS and rel(ran, c16) <= 1e-5
                failures += not same
                print(f"{'ok' if same else 'FAIL'} mlp bf16 on 2 data ranks equals cleave eval: {ran} vs {c16}"
                      + ("" if r.returncode == 0 else f" ({r.stderr.strip().splitlines()[-1:]})"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
