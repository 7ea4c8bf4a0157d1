"""`cleave run` on bundles of a small torch-exported model built from the activation and rounding kinds (ReLU6 =
Clip, HardSigmoid, HardSwish, LeakyRelu, Elu, Selu, Celu, PRelu, Softplus, Softsign, Abs, Sign,
Floor, Round) reproduces `cleave eval` (losses within relative 1e-5, weights within 1e-5 * max|w|) with the `single`
plan on 1 rank and the `data` plan on 2 ranks: the kernels codegen emits for them (CLEAVE_HD functors shared with the
CUDA backend) compute what the interpreter computes. Usage: activation_ops_bundle.py CLEAVE SOURCE_DIR."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import losses, run_and_compare, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
STEPS, BATCH = 4, 8


class ActNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(64, 48)
        self.prelu = nn.PReLU(48, 0.2)
        self.l2 = nn.Linear(48, 48)
        self.l3 = nn.Linear(48, 10)

    def forward(self, x, y):
        h = self.l1(x / 16.0)
        a = F.relu6(3 * h) + F.hardsigmoid(h) + F.hardswish(2 * h) + F.leaky_relu(h, 0.1)   # Clip .. LeakyRelu
        b = F.elu(h, 1.5) + F.selu(h) + F.celu(h, 2.0) + self.prelu(h)                       # Elu .. PRelu
        c = F.softplus(h) + F.softsign(h) + torch.abs(h)                                     # .. Abs
        d = torch.sign(h) * 0.1 + torch.floor(h * 4) * 0.05 + torch.round(h * 4) * 0.05     # Sign, Floor, Round
        h = self.l2(a + b + c + d)
        return F.cross_entropy(self.l3(torch.tanh(h)), y)


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    torch.manual_seed(0)
    xs = np.load(os.path.join(SRC, "models/data/digits_flat_train_x.npy"))[: STEPS * BATCH].astype(np.float32)
    ys = np.load(os.path.join(SRC, "models/data/digits_train_y.npy"))[: STEPS * BATCH].astype(np.int64)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {"x": xs, "y": ys}
        for name, arr in files.items():
            np.save(os.path.join(tmp, name + ".npy"), arr)
        data = ",".join(f"{k}={os.path.join(tmp, k + '.npy')}" for k in files)
        model = os.path.join(tmp, "actnet.onnx")
        args = tuple(torch.from_numpy(a[:BATCH]) for a in (xs, ys))
        torch.onnx.export(ActNet(), args, model, opset_version=17, input_names=["x", "y"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        opt = ["--optimizer", "sgd", "--lr", "0.1"]
        ref_model = os.path.join(tmp, "eval.onnx")
        ref = losses(sh([CLEAVE, "eval", model, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS),
                         "--save-model", ref_model] + opt))
        ref_w = weights(ref_model)
        for planner, n in (("single", 1), ("data", 2)):
            bundle = os.path.join(tmp, f"{planner}{n}")
            sh([CLEAVE, "compile", model, "--devices", str(n), "--planner", planner, "--batch", str(BATCH), "-o",
                bundle] + opt)
            problems += run_and_compare(CLEAVE, bundle, data, STEPS, ref, ref_w, f"{planner} on {n} rank(s)")
    if problems:
        print("\n".join(problems))
        return 1
    print("ok: bundles match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
