"""Einsum (lowered at import to ReduceSum + Transpose + Reshape + MatMul) trains like torch: a small module of
torch.einsum calls (MaxViT's attention 'bghid,bghjd->bghij' and 'bghij,bghjd->bghid', a contraction over two letters
with a permuted output, a letter summed out of one operand, a single-operand transpose with a sum, and ellipses:
batched, right-aligned against an operand without one, in an implicit output, summed away; diagonals: a repeated
letter within an operand, kept, contracted with another operand, and an implicit trace) is exported in
float64 at opset 13; one `cleave eval` step (SGD, lr 1) must give the loss and every parameter's gradient (w0 - w1)
of torch float64 within 1e-9 of the largest gradient of that parameter.
Usage (CTest): /usr/bin/python3 tests/e2e/einsum_vs_torch.py <cleave-binary> <source-dir>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

TOL = 1e-9


class Einsums(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Parameter(torch.randn(2, 3, 4, 5, 6, dtype=torch.float64))  # b g h i d
        self.k = nn.Parameter(torch.randn(2, 3, 4, 7, 6, dtype=torch.float64))  # b g h j d
        self.v = nn.Parameter(torch.randn(2, 3, 4, 7, 6, dtype=torch.float64))  # b g h j d
        self.w = nn.Parameter(torch.randn(4, 6, 3, 5, dtype=torch.float64))     # h d g e
        self.m = nn.Parameter(torch.randn(2, 5, 5, dtype=torch.float64))        # b i i

    def forward(self, x):
        a = torch.einsum("bghid,bghjd->bghij", self.q * x, self.k).softmax(-1)
        o = torch.einsum("bghij,bghjd->bghid", a, self.v)
        p = torch.einsum("bghid,hdge->ebi", o, self.w)        # contracts g, h, d; output permuted
        r = torch.einsum("ebi,bj->ie", p, self.k[:, 0, 0, :, 0])  # j summed out of one operand
        # Ellipses: batch dims, right-aligned against an operand without them, implicit output, summed away.
        s = torch.einsum("...ij,...jk->...ik", o, self.v.transpose(-1, -2))  # [2, 3, 4, 5, 7]
        t = torch.einsum("...ij,jk", s, self.k[0, 0, 0])                    # implicit: [2, 3, 4, 5, 6]
        u = torch.einsum("b...d->b", t * t)                                  # the ellipsis summed: [2]
        # Diagonals: kept, contracted with another operand, an implicit trace.
        dg = torch.einsum("bii->bi", self.m * x)                             # [2, 5]
        dj = torch.einsum("bii,bij->bj", self.m, self.m * self.m)            # [2, 5]
        # The trace, made 1-d at once: torch exports arithmetic on 0-d doubles (and a sum of two) in float32.
        tr = torch.einsum("ii", self.m[1]).reshape(1)
        return torch.cat([torch.einsum("ie->e", r * r), u, (dg * dj).sum(1), tr * tr]).sum()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: einsum_vs_torch.py <cleave-binary> <source-dir>")
    cleave = sys.argv[1]
    torch.manual_seed(0)
    model = Einsums()
    x = torch.tensor([0.5], dtype=torch.float64)  # the batch dim: 1 sample
    with tempfile.TemporaryDirectory() as tmp:
        path, saved = os.path.join(tmp, "einsum.onnx"), os.path.join(tmp, "einsum_1.onnx")
        torch.onnx.export(model, (x,), path, opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x"], output_names=["loss"])
        ops = sorted({n.op_type for n in onnx.load(path).graph.node})
        if "Einsum" not in ops:
            print(f"FAIL: the export has no Einsum ({ops})")
            return 1
        xp = os.path.join(tmp, "x.npy")
        np.save(xp, np.full((1,), 0.5))
        r = subprocess.run([cleave, "eval", path, "--data", f"x={xp}", "--batch", "1", "--steps", "1",
                            "--optimizer", "sgd", "--lr", "1", "--save-model", saved], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: cleave eval exited with {r.returncode}: {r.stderr.strip()[-600:]}")
            return 1
        loss = float([l for l in r.stdout.splitlines() if "loss" in l][0].split()[-1])
        ref = model(x)
        ref.backward()
        problems = []
        if abs(loss - ref.item()) > 1e-8 * abs(ref.item()):  # the loss line prints 9 digits
            problems.append(f"loss {loss!r} vs torch {ref.item()!r}")
        w0 = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
        w1 = {i.name: numpy_helper.to_array(i) for i in onnx.load(saved).graph.initializer}
        for name, p in model.named_parameters():
            want = p.grad.numpy()
            err = np.abs((w0[name] - w1[name]) - want).max() / np.abs(want).max()
            print(f"{name}: gradient error {err:.2g} of its largest value", file=sys.stderr)
            if not err <= TOL:
                problems.append(f"gradient of {name} off by {err:.3g} of its largest value")
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print(f"ok: Einsum's loss and gradients match torch float64 (ONNX ops {', '.join(ops)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
