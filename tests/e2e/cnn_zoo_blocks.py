"""The blocks torch 1.13 exports for AlexNet/VGG/Inception-style CNNs train in Cleave (`cleave eval`) as in
torch.optim.SGD: 5 steps (lr 0.05, batch 4) give torch's losses within relative 1e-4, at opsets 13 and 17.

Usage (CTest): /usr/bin/python3 tests/e2e/cnn_zoo_blocks.py <cleave-binary> <source-dir>

Covered: Conv + BatchNorm2d (training statistics) + ReLU; AvgPool2d with ceil_mode and count_include_pad=False
(AveragePool ceil_mode: 16 -> 9, one window more than floor mode); AvgPool2d with padding and
count_include_pad=True (exported as Pad + AveragePool); MaxPool2d ceil_mode; an Inception-style branch concat
(torch.cat); AdaptiveAvgPool2d to 1x1 (GlobalAveragePool) and to 2x2 (AveragePool); torch.flatten; Dropout (p 0:
torch's RNG is not Cleave's). Exit 0 on success, 1 with one line per problem otherwise.
"""
import copy
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, STEPS, LR, CLASSES = 4, 5, 0.05, 5
LOSS_RTOL = 1e-4
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")


class ZooBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.p1 = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        self.p2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.b1 = nn.Conv2d(8, 4, 1)
        self.b2 = nn.Conv2d(8, 4, 3, padding=1)
        self.p3 = nn.AvgPool2d(3, 1, padding=1)  # count_include_pad=True: Pad + AveragePool
        self.gap = nn.AdaptiveAvgPool2d((1, 1))
        self.ap2 = nn.AdaptiveAvgPool2d((2, 2))
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(8 + 8 * 4, CLASSES)

    def forward(self, x, y):
        h = F.relu(self.bn(self.c1(x)))
        h = self.p2(self.p1(h))
        h = torch.cat([self.b1(h), self.p3(self.b2(h))], 1)
        f = torch.cat([torch.flatten(self.gap(h), 1), torch.flatten(self.ap2(h), 1)], 1)
        return F.cross_entropy(self.fc(self.drop(f)), y)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cnn_zoo_blocks.py <cleave-binary> <source-dir>")
    cleave = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = ZooBlocks()
    model.train()
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((BATCH * STEPS, 3, 16, 16)).astype(np.float32)
    ys = rng.integers(0, CLASSES, size=BATCH * STEPS).astype(np.int64)
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=LR)
    want = []
    for step in range(STEPS):
        sl = slice(step * BATCH, (step + 1) * BATCH)
        opt.zero_grad()
        loss = ref(torch.from_numpy(xs[sl]), torch.from_numpy(ys[sl]))
        loss.backward()
        opt.step()
        want.append(float(loss.detach().numpy().astype(np.float32)))
    problems = []
    with tempfile.TemporaryDirectory(prefix="cleave_cnn_zoo_") as tmp:
        np.save(os.path.join(tmp, "x.npy"), xs)
        np.save(os.path.join(tmp, "y.npy"), ys)
        for opset in (13, 17):
            path = os.path.join(tmp, f"zoo_{opset}.onnx")
            args = (torch.from_numpy(xs[:BATCH]), torch.from_numpy(ys[:BATCH]))
            torch.onnx.export(copy.deepcopy(model), args, path, opset_version=opset, input_names=["x", "y"],
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
            cmd = [cleave, "eval", path, "--data", f"x={tmp}/x.npy,y={tmp}/y.npy", "--batch", str(BATCH), "--steps",
                   str(STEPS), "--optimizer", "sgd", "--lr", repr(LR)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                problems.append(f"opset {opset}: exit {proc.returncode}: " + " | ".join(proc.stderr.splitlines()[-3:]))
                continue
            got = []
            for i, line in enumerate(proc.stdout.splitlines()):
                m = STEP_LINE.match(line)
                if not m or int(m.group(1)) != i + 1:
                    problems.append(f"opset {opset}: stdout line {i + 1} is {line!r}")
                    break
                got.append(float(m.group(2)))
            if len(got) != STEPS:
                problems.append(f"opset {opset}: {len(got)} step lines, expected {STEPS}")
                continue
            for k, (g, w) in enumerate(zip(got, want), start=1):
                rel = abs(g - w) / max(abs(w), 1e-30)
                if not rel <= LOSS_RTOL:
                    problems.append(f"opset {opset}: step {k}: loss {g!r}, torch {w!r} (relative {rel:.3g})")
            print(f"opset {opset}: losses {got} vs torch {want}", file=sys.stderr)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
