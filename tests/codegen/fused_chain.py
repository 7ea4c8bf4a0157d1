"""Fused elementwise functors compute what the unfused ops do: a tiny MLP whose activation is an elementwise chain
(h * sigmoid(h), then tanh, then * 0.5 + 1), and a tiny attention block (q, k and v sliced from one projection, q
times k transposed, a Linear's bias add through an identity Dropout into the residual Add) are exported by torch,
compiled for 1 rank (single) and 2 ranks (data), and `cleave run` must reproduce `cleave eval` (the reference
interpreter, which runs every op on its own): per-step losses within relative 1e-5 and final weights within
1e-5 * max|w|. So must torch's own nn.MultiheadAttention, whose copies compose (codegen/compose_moves.h). The
generated code must contain fused functors (the block's a fused rt::map_block; the attention's rt::view_copy of q,
k and v and of their gradients into their places), so the check cannot pass vacuously.
Usage: fused_chain.py CLEAVE SOURCE_DIR."""
import os
import re
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import compare_run, losses, runtime_flags, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
STEPS, BATCH = 4, 16


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x, y):
        h = self.fc1(x)
        a = torch.tanh(h * torch.sigmoid(h)) * 0.5 + 1.0
        return F.cross_entropy(self.fc2(a), y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.lin, self.out = nn.Linear(16, 48), nn.Linear(16, 16), nn.Linear(64, 10)
        self.drop = nn.Dropout(0.0)

    def forward(self, x, y):
        h = x.reshape(-1, 4, 16)
        t = self.qkv(h)
        q, k, v = t[:, :, :16], t[:, :, 16:32], t[:, :, 32:]
        a = torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
        h = h + self.drop(self.lin(a))
        return F.cross_entropy(self.out(h.flatten(1)), y)


class Heads(nn.Module):
    """torch's own attention (batch-first), which cuts q, k and v out of one projection and moves each to
    [B * heads, T, d]: the cut and the move are one composed copy (rt::view_copy), and so are their gradients' moves
    back and the Concat that puts them in place."""

    def __init__(self):
        super().__init__()
        self.attn, self.out = nn.MultiheadAttention(16, 4, batch_first=True), nn.Linear(64, 10)

    def forward(self, x, y):
        h = x.reshape(-1, 4, 16)
        return F.cross_entropy(self.out((h + self.attn(h, h, h, need_weights=False)[0]).flatten(1)), y)


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    problems = []
    for name, net in [("chain", Net), ("block", Block), ("heads", Heads)]:
        torch.manual_seed(0)
        problems += check(name, net())
    if problems:
        print("\n".join(problems))
        return 1
    print("ok")
    return 0


def check(name, net):
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, f"{name}.onnx")
        torch.onnx.export(net, (torch.zeros(BATCH, 64), torch.zeros(BATCH, dtype=torch.int64)), model,
                          input_names=["x", "y"], output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=15)
        data = (f"x={SRC}/models/data/digits_flat_train_x.npy,y={SRC}/models/data/digits_train_y.npy")
        opt = ["--optimizer", "sgd", "--lr", "0.1"]
        ref_model = os.path.join(tmp, "eval.onnx")
        ref = losses(sh([CLEAVE, "eval", model, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS),
                         "--save-model", ref_model] + opt))
        ref_w = weights(ref_model)
        for planner, n in [("single", 1), ("data", 2)]:
            bundle = os.path.join(tmp, f"{planner}{n}")
            sh([CLEAVE, "compile", model, "--devices", str(n), "--planner", planner, "--batch", str(BATCH), "-o",
                bundle] + opt)
            # The data plan's ranks share one program (src/ranks.cpp).
            program = "ranks.cpp" if os.path.exists(os.path.join(bundle, "src", "ranks.cpp")) else "rank_0.cpp"
            src = open(os.path.join(bundle, "src", program)).read()
            fused = src.count("// fused:")
            if fused == 0 and name != "heads":
                problems.append(f"{name} {planner}{n}: no fused functor in {program}")
            if name == "block" and not re.search(r"// fused:[^\n]*\n\s*rt::map_block\(", src):
                problems.append(f"{name} {planner}{n}: no fused rt::map_block in {program}")
            # Forward: q, k, v read out of the projection (a view_copy into a whole buffer); backward: their
            # gradients written into their places of the projection's (a view_copy with the place's strides).
            copies = re.findall(r"rt::view_copy\(\w+, \{[^}]*\}, \{[^}]*\}, \d+, \w+, (\{)?", src)
            if name == "heads" and not ({"", "{"} <= set(copies)):
                problems.append(f"{name} {planner}{n}: no composed rt::view_copy (whole and into place) in {program}")
            saved = os.path.join(tmp, f"{planner}{n}.onnx")
            got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model", saved]
                            + runtime_flags(CLEAVE)))
            found, worst = compare_run(f"{name} {planner}{n}", got, ref, saved, ref_w, STEPS)
            problems += found
            print(f"{name}, {planner} on {n} rank(s): {fused} fused functors, worst loss rel diff {worst:.3g}",
                  flush=True)
    return problems


if __name__ == "__main__":
    sys.exit(main())
