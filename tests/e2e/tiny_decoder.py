#!/usr/bin/env python3
"""models/zoo's GPT-2-style decoder (generate.py --family decoder --variant tiny: 2 pre-norm causal layers, width 16,
8 tokens, vocabulary 32; tests/gpu/bench_vs_torch.sh times its gpt2-small variant) trains in Cleave as in torch.

Next-token data (y is x shifted by one), batch 4, SGD lr 0.1, STEPS steps: `cleave eval`'s losses within 1e-4 of
torch.optim.SGD's on the same module (generate.py seeds torch before building it; its state is checked to equal the
exported initializers first), and 2-rank bundles with the data and tofu plans print eval's losses within 1e-5.

Usage: tiny_decoder.py CLEAVE_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models", "zoo"))
import generate  # noqa: E402

STEPS, BATCH, LR, SEQ, VOCAB = 5, 4, 0.1, 8, 32


def losses(args):
    r = subprocess.run([cleave, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: cleave {' '.join(args)}: {r.stderr.strip().splitlines()[-1:]}")
    return [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]


def rel(a, b):
    return max(abs(p - q) / max(1.0, abs(q)) for p, q in zip(a, b))


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "decoder.onnx")
        subprocess.run(["/usr/bin/python3", os.path.join(src, "models", "zoo", "generate.py"), "--family", "decoder",
                        "--variant", "tiny", "-o", path], check=True, capture_output=True)
        rng = np.random.default_rng(0)
        x = rng.integers(0, VOCAB, (STEPS * BATCH, SEQ + 1)).astype(np.int64)
        xs, ys = x[:, :-1].copy(), x[:, 1:].copy()
        np.save(os.path.join(work, "x.npy"), xs)
        np.save(os.path.join(work, "y.npy"), ys)
        make, _, _ = generate.resolve("decoder", "tiny")
        torch.manual_seed(0)
        model = make()
        inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
        state = model.state_dict()
        if sorted(state) != sorted(k for k in inits if k in state) or any(
                not np.array_equal(v.numpy(), inits[k]) for k, v in state.items()):
            raise SystemExit("FAIL: the torch module's state is not the exported initializers")
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        want = []
        for s in range(STEPS):
            opt.zero_grad()
            b = slice(s * BATCH, (s + 1) * BATCH)
            loss = model(torch.from_numpy(xs[b]), torch.from_numpy(ys[b]))
            loss.backward()
            opt.step()
            want.append(float(loss))
        data = f"x={work}/x.npy,y={work}/y.npy"
        train = ["--batch", str(BATCH), "--optimizer", "sgd", "--lr", str(LR)]
        ev = losses(["eval", path, *train, "--data", data, "--steps", str(STEPS)])
        ok = len(ev) == STEPS and rel(ev, want) <= 1e-4
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'} decoder: cleave eval vs torch over {STEPS} steps: {rel(ev, want):.1e} "
              f"(tolerance 1e-4); losses {[round(v, 6) for v in ev]}")
        for plan in ("data", "tofu"):
            bundle = os.path.join(work, plan)
            subprocess.run([cleave, "compile", path, "--devices", "2", "--planner", plan, *train, "-o", bundle],
                           check=True, capture_output=True)
            ran = losses(["run", bundle, "--data", data, "--steps", str(STEPS)])
            ok = len(ran) == STEPS and rel(ran, ev) <= 1e-5
            failures += not ok
            print(f"{'ok' if ok else 'FAIL'} decoder: 2 ranks, {plan} plan: {rel(ran, ev) if ran else 'no losses'} "
                  f"from cleave eval (tolerance 1e-5)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
