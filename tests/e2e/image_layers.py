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
from bundle_check import check_output as sh, losses, run_partitioned  # noqa: E402

BATCH, CLASSES, SIDE = 2, 10, 16
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


def check(cleave, opset, tmp, random_plans):
    name = f"image_layers_opset{opset}"
    torch.manual_seed(0)
    model = tc.Classifier(EncoderDecoder()).train()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 3, SIDE, SIDE)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    path = os.path.join(tmp, name + ".onnx")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ops = tc.export(model, (torch.from_numpy(x), torch.from_numpy(y)), path, opset)
    for needed in ("ConvTranspose", "InstanceNormalization", "Resize"):
        if needed not in ops:
            return [f"{name}: the export has no {needed} ({', '.join(ops)})"]
    print(f"{name}: ONNX ops {', '.join(ops)}", flush=True)

    # torch float64 at the same float32 weights, and torch float32's own error against it.
    def fresh():
        m = tc.Classifier(EncoderDecoder())
        m.load_state_dict(state)
        return m.train()
    ref = tc.module_reference(fresh, x, y)

    # The biases of the convs that feed an InstanceNorm have no gradient in exact arithmetic: checked over all
    # parameters and over those with a gradient (`nonzero`).
    data = tc.save_data(tmp, name, {"x": x, "y": y})
    sgd = ["--optimizer", "sgd", "--lr", str(tc.LR)]
    saved = os.path.join(tmp, name + "_eval.onnx")
    out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--save-model", saved] + sgd)
    problems = tc.check_step(name + " eval", tc.step_loss(out), tc.recovered_gradients(path, saved), ref,
                             nonzero=True)[0]
    got, saved2 = run_partitioned(cleave, path, os.path.join(tmp, name + "_data2"),
                                  ["--planner", "data", "--devices", "2", "--batch", str(BATCH)] + sgd, data, 1)
    if len(got) != 1:
        return problems + [f"{name} 2 ranks: {len(got)} loss lines, want 1"]
    problems += tc.check_step(name + " 2 ranks", got[0], tc.recovered_gradients(path, saved2), ref, nonzero=True)[0]

    # Random plans split the new ops by channel (InstanceNorm, Resize, their gradients), by group and spatially
    # (ConvTranspose): two steps on 2 ranks give cleave eval's losses.
    sgd = ["--optimizer", "sgd", "--lr", "0.1"]  # a step that keeps the second loss well conditioned
    want = losses(sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "2"] + sgd))
    for seed in RANDOM_SEEDS if random_plans else ():
        bundle = os.path.join(tmp, f"{name}_random{seed}")
        got, _ = run_partitioned(cleave, path, bundle, ["--planner", "random", "--seed", str(seed), "--devices", "2",
                                                        "--batch", str(BATCH)] + sgd, data, 2)
        splits = sorted({line.split()[-1] for line in open(os.path.join(bundle, "plan.txt"))
                         if line.startswith("op ") and any(k in line for k in ("InstanceNormalization", "Resize", "ConvTranspose"))})
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
