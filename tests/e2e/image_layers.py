"""A tiny encoder-decoder with the image layers of torch.nn (InstanceNorm2d, ConvTranspose2d with groups and
output_padding, Upsample nearest and bilinear with and without align_corners) imports and trains one step like torch,
on 1 rank (`cleave eval`) and on 2 (`cleave compile --planner data --devices 2` + `cleave run`).

The net (batch 2, torch.manual_seed(0) weights, 3x16x16 inputs, 10 classes) is wrapped in a cross-entropy loss and
exported by torch 1.13 in training mode without constant folding, at opsets 13 and 17. Then, as
torchvision_mobilenet.py does:
  - the loss of the step is within relative 1e-5 of torch float64's;
  - each parameter's gradient, recovered from the saved model as (w0 - w1) / lr, is compared with torch float64's:
    the worst error relative to that parameter's largest gradient must be no worse than torch float32's own (at least
    1e-5 is allowed), both over the parameters with a gradient and over all of them (the biases of the convs that
    feed an InstanceNorm have a zero gradient in exact arithmetic: their error is measured against 1e-6 of the
    model's largest gradient);
  - at opset 13, random plans (seeds 1-3), which split the new ops by channel, group and space, run two steps on 2 ranks with
    cleave eval's losses (relative 1e-5).
Usage (CTest): /usr/bin/python3 tests/e2e/image_layers.py <cleave-binary> <source-dir>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.join(sys.argv[2] if len(sys.argv) > 2 else ".", "tests", "codegen"))
from bundle_check import losses, runtime_flags  # noqa: E402

BATCH, CLASSES, SIDE = 2, 10, 16
LR = 1e4  # w1 = w0 - LR * g carries g to float32 precision
LOSS_RTOL = 1e-5
RANKS_RTOL = 1e-5
RANDOM_SEEDS = (1, 2, 3)


class EncoderDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)           # 16 -> 8
        self.n1 = nn.InstanceNorm2d(8, affine=True)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)           # 16 -> 8 (after the bilinear upsample)
        self.c3 = nn.Conv2d(8, 8, 3, stride=2, padding=1)           # 8 -> 4
        self.n2 = nn.InstanceNorm2d(8, affine=True)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")       # 4 -> 8
        self.dc = nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1, groups=2)  # 8 -> 16
        self.head = nn.Conv2d(6, CLASSES, 1)

    def forward(self, x):
        h = F.relu(self.n1(self.c1(x)))
        h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
        h = F.relu(self.c3(F.relu(self.c2(h))))
        h = F.relu(self.n2(self.up(h)))
        h = F.relu(self.dc(h))
        h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=True)  # 16 -> 32
        return self.head(h).mean(dim=(2, 3))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = EncoderDecoder()

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def step_loss(out):
    return float([l for l in out.splitlines() if "loss" in l][0].split()[-1])


def worst_errors(grads, m64):
    """The worst |g - torch f64| relative to each parameter's largest torch f64 gradient, over all parameters and over
    those whose gradient is not zero in exact arithmetic: a conv bias feeding an InstanceNorm has none (the norm
    removes per-channel constants), so torch leaves rounding noise there, measured against a floor of 1e-6 of the
    model's largest gradient."""
    floor = 1e-6 * max(p.grad.abs().max().item() for p in m64.parameters())
    worst = {"all": (0.0, ""), "nonzero": (0.0, "")}
    for pname, p in m64.named_parameters():
        want = p.grad.numpy()
        top = np.abs(want).max()
        err = np.abs(grads[pname] - want).max() / max(top, floor)
        for key in ("all",) + (("nonzero",) if top > 1e3 * floor else ()):
            if err > worst[key][0]:
                worst[key] = (err, pname)
    return worst


def compare(name, loss, saved, path, m64, worst32):
    problems = []
    ref = m64.loss
    loss_err = abs(loss - ref) / abs(ref)
    w0 = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(path).graph.initializer}
    w1 = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(saved).graph.initializer}
    missing = [n for n, _ in m64.named_parameters() if n not in w0 or n not in w1]
    if missing:
        return [f"{name}: parameters {missing} are not initializers of the export and the saved model"]
    worst = worst_errors({n: (w0[n] - w1[n]) / LR for n in w0}, m64)
    print(f"{name}: loss {loss:.8g} vs torch f64 {ref:.8g} (rel {loss_err:.2g}); worst gradient error relative to the "
          f"parameter's largest: {worst['nonzero'][0]:.3g} ({worst['nonzero'][1]}), {worst['all'][0]:.3g} with the "
          f"zero-gradient biases ({worst['all'][1]}); torch float32's {worst32['nonzero'][0]:.3g} and "
          f"{worst32['all'][0]:.3g}", flush=True)
    if loss_err > LOSS_RTOL:
        problems.append(f"{name}: loss rel diff {loss_err:.3g} > {LOSS_RTOL:g}")
    for key in ("nonzero", "all"):
        if worst[key][0] > max(1e-5, worst32[key][0]):
            problems.append(f"{name}: gradient of {worst[key][1]} off by {worst[key][0]:.3g} of its largest value, "
                            f"worse than torch float32 ({worst32[key][0]:.3g})")
    return problems


def check(cleave, opset, tmp, random_plans):
    name = f"image_layers_opset{opset}"
    torch.manual_seed(0)
    model = Classifier().train()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 3, SIDE, SIDE)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    path = os.path.join(tmp, name + ".onnx")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (torch.from_numpy(x), torch.from_numpy(y)), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=["x", "y"])
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    for needed in ("ConvTranspose", "InstanceNormalization", "Resize"):
        if needed not in ops:
            return [f"{name}: the export has no {needed} ({', '.join(ops)})"]
    print(f"{name}: ONNX ops {', '.join(ops)}", flush=True)

    # torch float64 at the same float32 weights, and torch float32's own error against it.
    m64 = Classifier()
    m64.load_state_dict(state)
    m64 = m64.double().train()
    loss64 = m64(torch.from_numpy(x).double(), torch.from_numpy(y))
    loss64.backward()
    m64.loss = loss64.item()
    m32 = Classifier()
    m32.load_state_dict(state)
    m32.train()(torch.from_numpy(x), torch.from_numpy(y)).backward()
    worst32 = worst_errors({n: p.grad.double().numpy() for n, p in m32.named_parameters()}, m64)

    for k, v in (("x", x), ("y", y)):
        np.save(os.path.join(tmp, f"{name}_{k}.npy"), v)
    data = ",".join(f"{k}={os.path.join(tmp, f'{name}_{k}.npy')}" for k in ("x", "y"))
    sgd = ["--optimizer", "sgd", "--lr", str(LR)]
    saved = os.path.join(tmp, name + "_eval.onnx")
    out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--save-model", saved] + sgd)
    problems = compare(name + " eval", step_loss(out), saved, path, m64, worst32)

    bundle = os.path.join(tmp, name + "_data2")
    sh([cleave, "compile", path, "--planner", "data", "--devices", "2", "--batch", str(BATCH), "-o", bundle] + sgd)
    saved2 = os.path.join(tmp, name + "_run2.onnx")
    out = sh([cleave, "run", bundle, "--data", data, "--steps", "1", "--save-model", saved2] + runtime_flags(cleave))
    problems += compare(name + " 2 ranks", step_loss(out), saved2, path, m64, worst32)

    # Random plans split the new ops by channel (InstanceNorm, Resize, their gradients), by group and spatially
    # (ConvTranspose): two steps on 2 ranks give cleave eval's losses.
    sgd = ["--optimizer", "sgd", "--lr", "0.1"]  # a step that keeps the second loss well conditioned
    want = losses(sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "2"] + sgd))
    for seed in RANDOM_SEEDS if random_plans else ():
        bundle = os.path.join(tmp, f"{name}_random{seed}")
        sh([cleave, "compile", path, "--planner", "random", "--seed", str(seed), "--devices", "2", "--batch",
            str(BATCH), "-o", bundle] + sgd)
        splits = sorted({line.split()[-1] for line in open(os.path.join(bundle, "plan.txt"))
                         if line.startswith("op ") and any(k in line for k in ("InstanceNormalization", "Resize", "ConvTranspose"))})
        got = losses(sh([cleave, "run", bundle, "--data", data, "--steps", "2"] + runtime_flags(cleave)))
        w = max(abs(a - b) / abs(b) for a, b in zip(got, want)) if len(got) == len(want) else float("inf")
        print(f"{name} random plan {seed} (splits {' '.join(splits)}): losses {got} vs eval {want} (rel {w:.2g})",
              flush=True)
        if not w <= RANKS_RTOL:
            problems.append(f"{name}: random plan {seed} losses {got} vs eval {want}")
    return problems


def main():
    torch.set_num_threads(1)
    cleave = os.path.abspath(sys.argv[1])
    problems = []
    with tempfile.TemporaryDirectory(prefix="cleave_image_") as tmp:
        for opset in (13, 17):
            try:
                problems += check(cleave, opset, tmp, random_plans=opset == 13)
            except RuntimeError as e:
                problems.append(f"opset {opset}: {e}")
    if problems:
        print("\n".join(problems))
        return 1
    print("ok: InstanceNorm, ConvTranspose and Upsample train a step like torch on 1 and 2 ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
