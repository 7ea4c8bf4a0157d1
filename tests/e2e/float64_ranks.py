"""A float64 model trains in float64 on 2 ranks: its bundle's runtime computes in double (rt::real, CLEAVE_RT_F64), so
partitioned runs equal `cleave eval` to float64 rounding, where float32 runs of a chaotic net part by 1e-5 and more.

The net (batch 4, torch.manual_seed(0) weights, 3x12x12 inputs, 10 classes) has the kernels of the torchvision zoo's
nets: conv (strided, grouped) + BatchNorm (+ InstanceNorm with running statistics) + ReLU, max and average pooling, LayerNorm, GELU (erf), a softmax attention
(batched MatMul), Linear, cross-entropy. It is exported with `model.double()` by torch 1.13 in training mode.
  - one `cleave eval` step at lr 1: w0 - w1 (exact to an ulp of w) against torch float64's gradients, within 1e-9 of
    each parameter's largest gradient (at least 1e-6 of the model's; norm epsilons rounded to float32 on the torch
    side, as ONNX stores them), and every running statistic within 1e-9 of torch's after its forward;
  - 2 ranks with the data, tofu and a random plan, 3 SGD steps: the losses (printed to 9 digits) within 1e-9 and every
    trained weight and running statistic within 1e-12 of `cleave eval`'s. A float32 runtime misses this by ~1e-7.
Usage (CTest): /usr/bin/python3 tests/e2e/float64_ranks.py <cleave-binary> <source-dir>
"""
import json
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SRC = sys.argv[2] if len(sys.argv) > 2 else "."
sys.path.insert(0, os.path.join(SRC, "tests", "codegen"))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
import torch_compare as tc  # noqa: E402
from bundle_check import check_output as sh, compare_run, losses, run_partitioned, weights  # noqa: E402

BATCH, CLASSES, SIDE, STEPS, LR = 4, 10, 12, 3, 0.1
GRAD_RTOL = 1e-9
LOSS_RTOL = 1e-9      # the loss lines print 9 significant digits
WEIGHT_RTOL = 1e-12   # float64 rounding of differently ordered sums, over 3 steps


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.b2 = nn.BatchNorm2d(16)
        self.i2 = nn.InstanceNorm2d(16, affine=True, track_running_stats=True)
        self.ln = nn.LayerNorm(16)
        self.q = nn.Linear(16, 16)
        self.fc = nn.Linear(16, CLASSES)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)                  # 12 -> 6
        h = F.relu(self.i2(self.b2(self.c2(h))))                          # 6 -> 3
        t = self.ln(h.flatten(2).transpose(1, 2))                         # [B, 9, 16]
        a = torch.softmax(self.q(t) @ t.transpose(1, 2) / 4.0, dim=-1)    # [B, 9, 9]
        t = F.gelu(a @ t) + t
        logits = self.fc(F.avg_pool1d(t.transpose(1, 2), 9).squeeze(-1))
        return F.cross_entropy(logits, y)


def main():
    cleave = sys.argv[1]
    torch.manual_seed(0)
    net = Net().double()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS * BATCH, 3, SIDE, SIDE))
    y = rng.integers(0, CLASSES, STEPS * BATCH).astype(np.int64)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "net64.onnx")
        tc.export(net, (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])), path)
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        data = f"x={tmp}/x.npy,y={tmp}/y.npy"

        # One step against torch float64, from the weights the export saw (it ran a training-mode forward).
        torch.manual_seed(0)
        ref = Net().double()
        for m in ref.modules():
            if isinstance(getattr(m, "eps", None), float):
                m.eps = float(np.float32(m.eps))
            if isinstance(getattr(m, "momentum", None), float):  # ONNX stores 1 - momentum as a float32
                m.momentum = 1 - float(np.float32(1 - m.momentum))
        # The running statistics from those the export saved (its tracing forward updated them).
        w0 = weights(path)
        with torch.no_grad():
            for n, b in ref.named_buffers():
                if n in w0:
                    b.copy_(torch.from_numpy(w0[n]))
        ref(torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])).backward()
        step1 = os.path.join(tmp, "eval1.onnx")
        sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--optimizer", "sgd",
            "--lr", "1", "--save-model", step1])
        # BatchNorm's and the tracking InstanceNorm's running statistics after the step (torch's instance_norm
        # updates a tiled copy per sample and keeps their mean).
        w1 = weights(step1)
        for n, b in ref.named_buffers():
            if "running" not in n:
                continue
            err = float(np.abs(w1[n] - b.numpy()).max()) / max(1.0, float(b.abs().max()))
            print(f"eval running statistic {n} vs torch float64: {err:.3g}")
            if err > GRAD_RTOL:
                problems.append(f"eval running statistic {n} off torch float64's by {err:.3g} (bound {GRAD_RTOL})")
        got = tc.recovered_gradients(path, step1, 1.0)
        want = {n: p.grad.numpy() for n, p in ref.named_parameters()}
        # The biases of the convs that feed a BatchNorm have a zero gradient in exact arithmetic: their error is
        # measured against 1e-6 of the model's largest gradient.
        worst, name = tc.worst_error(got, want, 1e-6 * max(float(np.abs(g).max()) for g in want.values()))
        print(f"eval float64 gradients vs torch float64: worst {worst:.3g} ({name})")
        if worst > GRAD_RTOL:
            problems.append(f"eval gradient of {name} off torch float64's by {worst:.3g} (bound {GRAD_RTOL})")

        evaln = os.path.join(tmp, "eval3.onnx")
        out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS),
                  "--optimizer", "sgd", "--lr", repr(LR), "--save-model", evaln])
        ref_losses, ref_w = losses(out), weights(evaln)
        plans = [("data", ["--planner", "data"]), ("tofu", ["--planner", "tofu"]),
                 ("random", ["--planner", "random", "--seed", "2"])]
        for where, plan in plans:
            bundle = os.path.join(tmp, where)
            got_losses, saved = run_partitioned(
                cleave, path, bundle, plan + ["--devices", "2", "--batch", str(BATCH), "--optimizer", "sgd",
                                              "--lr", repr(LR)], data, STEPS)
            with open(os.path.join(bundle, "manifest.json")) as f:
                precision = json.load(f)["precision"]
            if precision != "fp64":
                problems.append(f"{where}: manifest precision {precision}, want fp64")
            p, worst = compare_run(where, got_losses, ref_losses, saved, ref_w, STEPS, LOSS_RTOL)
            got_w = weights(saved)
            wworst = max(float(np.abs(got_w[k] - w).max()) / max(1.0, float(np.abs(w).max()))
                         for k, w in ref_w.items() if np.issubdtype(w.dtype, np.floating))
            print(f"{where}: 2 ranks vs eval over {STEPS} steps: losses {worst:.3g}, weights {wworst:.3g}")
            problems += p
            if wworst > WEIGHT_RTOL:
                problems.append(f"{where}: trained weights {wworst:.3g} from eval's (bound {WEIGHT_RTOL})")
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
