"""The tiny variants of models/zoo's image families train like torch (and, with --ranks, like themselves on 2 ranks).

For tiny ResNet and tiny WResNet (generate.py --variant tiny: the real families' structure at 32x32, inline initial
weights from torch.manual_seed(0)), on random images and labels (the first numpy seed whose torch run keeps every
ReLU input 2e-6 from 0, bundle_check.pick_data: one nearer flips sign on float rounding), 5 steps of SGD (lr 0.01),
batch 16:
  - the reference is well-conditioned: torch.optim.SGD on the same module (nets_cnn.py, the same seed: its initial
    state is checked to equal the exported initializers first) gives losses in float32 within relative 1e-5 of
    float64. At 32x32 stage 4 runs on 1x1 maps, so with batch 4-8 or lr 0.1 float rounding is amplified until
    float32 and float64 torch disagree by 1e-4..1e-1 within 5 steps (generate.py `resolve`): no run could then be
    held to the tolerances below, whatever its correctness;
  - `cleave eval` prints losses within relative 1e-4 of torch's float32 ones;
  - with --ranks (tests/e2e/zoo_tiny_ranks.py; compiling the rank programs takes minutes on a busy machine):
    `cleave compile --planner data --devices 2` + `cleave run` (2 MPI ranks) prints losses within relative 1e-5 of
    the 1-rank `cleave eval`.
Usage (CTest): /usr/bin/python3 tests/e2e/zoo_tiny.py <cleave-binary> <source-dir> [--ranks FAMILY,...]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

SRC_ARG = sys.argv[2] if len(sys.argv) > 2 else "."
sys.path.insert(0, os.path.join(SRC_ARG, "models", "zoo"))
sys.path.insert(0, os.path.join(SRC_ARG, "tests", "codegen"))
import generate  # noqa: E402
from bundle_check import losses, pick_data, runtime_flags  # noqa: E402

FAMILIES = ["resnet", "wresnet"]
STEPS, BATCH, LR, CLASSES = 5, 16, 0.01, 10
TORCH_RTOL, RANKS_RTOL, CONDITION_RTOL = 1e-4, 1e-5, 1e-5


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {r.returncode}: {r.stderr.strip()[-600:]}")
    return r.stdout


def torch_losses(family, onnx_path, x, y, dtype=torch.float32):
    make, inputs, _ = generate.resolve(family, "tiny")
    torch.manual_seed(0)
    model = make()
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(onnx_path).graph.initializer}
    for name, value in model.state_dict().items():
        if name in inits and not np.array_equal(inits[name], value.numpy()):
            raise RuntimeError(f"{family}: initializer {name} differs from the torch module's initial state")
    model.to(dtype).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    out = []
    for k in range(STEPS):
        xb = torch.from_numpy(x[k * BATCH:(k + 1) * BATCH]).to(dtype)
        yb = torch.from_numpy(y[k * BATCH:(k + 1) * BATCH])
        opt.zero_grad()
        loss = model(xb, yb)
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


def worst_rel(got, want):
    return max(abs(a - b) / abs(b) for a, b in zip(got, want))


def run_family(cleave, family, tmp, ranks):
    onnx_path = os.path.join(tmp, f"{family}.onnx")
    generate.generate(family, "tiny", onnx_path)
    _, inputs, _ = generate.resolve(family, "tiny")

    def make_data(seed):
        rng = np.random.default_rng(seed)
        return (rng.standard_normal((STEPS * BATCH,) + inputs[0][1]).astype(np.float32),
                rng.integers(0, CLASSES, STEPS * BATCH).astype(np.int64))

    seed, (x, y), ref, margin = pick_data(make_data, lambda d: torch_losses(family, onnx_path, *d))
    print(f"{family}: data seed {seed} (smallest |ReLU input| in torch's run {margin:.2g})", file=sys.stderr)
    xp, yp = os.path.join(tmp, f"{family}_x.npy"), os.path.join(tmp, f"{family}_y.npy")
    np.save(xp, x)
    np.save(yp, y)
    data = f"x={xp},y={yp}"
    sgd = ["--optimizer", "sgd", "--lr", repr(LR)]

    problems = []
    cond = worst_rel(ref, torch_losses(family, onnx_path, x, y, torch.float64))
    print(f"{family}: torch float32 vs float64 worst loss rel diff {cond:.3g}", file=sys.stderr)
    if not cond <= CONDITION_RTOL:
        problems.append(f"{family}: torch float32 losses {ref} are not within {CONDITION_RTOL:g} of float64 ones "
                        f"(relative {cond:.3g}): this training run is too ill-conditioned to compare")
    ev = losses(sh([cleave, "eval", onnx_path, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS)] + sgd))
    if len(ev) != STEPS:
        return [f"{family}: cleave eval printed {len(ev)} losses, want {STEPS}"]
    w = worst_rel(ev, ref)
    print(f"{family}: eval vs torch worst loss rel diff {w:.3g} (losses {ev})", file=sys.stderr)
    if not w <= TORCH_RTOL:
        problems.append(f"{family}: eval losses {ev} vs torch {ref}: relative difference {w:.3g} > {TORCH_RTOL:g}")
    if not ranks:
        return problems

    bundle = os.path.join(tmp, f"{family}_data2")
    sh([cleave, "compile", onnx_path, "--planner", "data", "--devices", "2", "--batch", str(BATCH), "-o", bundle] + sgd)
    got = losses(sh([cleave, "run", bundle, "--data", data, "--steps", str(STEPS)] + runtime_flags(cleave)))
    if len(got) != STEPS:
        return problems + [f"{family}: cleave run on 2 ranks printed {len(got)} losses, want {STEPS}"]
    w = worst_rel(got, ev)
    print(f"{family}: 2 ranks (data) vs 1 rank worst loss rel diff {w:.3g}", file=sys.stderr)
    if not w <= RANKS_RTOL:
        problems.append(f"{family}: 2-rank losses {got} vs 1-rank {ev}: relative difference {w:.3g} > {RANKS_RTOL:g}")
    return problems


def main():
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--ranks"):
        sys.exit("usage: zoo_tiny.py <cleave-binary> <source-dir> [--ranks FAMILY,...]")
    ranks = sys.argv[4].split(",") if len(sys.argv) == 5 else []
    torch.set_num_threads(1)
    cleave = os.path.abspath(sys.argv[1])
    problems = []
    with tempfile.TemporaryDirectory(prefix="cleave_zoo_") as tmp:
        for family in FAMILIES:
            try:
                problems += run_family(cleave, family, tmp, family in ranks)
            except RuntimeError as e:
                problems.append(f"{family}: {e}")
    for p in problems:
        print(f"error: {p}")
    if problems:
        return 1
    print(f"zoo_tiny: {', '.join(FAMILIES)} match torch (1e-4)" +
          (f"; {', '.join(ranks)} on 2 ranks match 1 rank (1e-5)" if ranks else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
