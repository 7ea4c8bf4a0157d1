"""Codegen of the layout and dropout kinds (Gather, Slice, Split, Concat, batched/broadcast MatMul, Dropout and their
gradients): small torch models using them are exported (training mode, no constant folding), and `cleave run` of the
`data` plan on 2 ranks reproduces `cleave eval` (the reference interpreter, the 1-rank run): per-step
losses within relative 1e-5 and --save-model weights within 1e-5 * max|w|, SGD lr 0.1, batch 8, 4 steps. The dropout
masks are drawn from each element's global index, so the 2-rank run must draw the same ones as the interpreter.
SplitAxis also runs a hand-edited data plan in which Split, Slice (step 2), SliceGrad and Concat's gradient Slices are
split along the axis they cut (each rank's local geometry then comes from its boxes).
Usage: layout_ops_match_eval.py CLEAVE SOURCE_DIR."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import losses, runtime_flags, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
STEPS, BATCH, CLASSES = 4, 8, 5


class DropoutMlp(nn.Module):
    """Dropout (training) between two Linears: Dropout, DropoutGrad."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 16), nn.Linear(16, CLASSES)

    def forward(self, x, y):
        return F.cross_entropy(self.b(F.dropout(torch.relu(self.a(x)), 0.3, training=True)), y)


class SliceConcat(nn.Module):
    """Split, Slice (with a step), Concat and their gradients on batch-split activations."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 12), nn.Linear(13, CLASSES)

    def forward(self, x, y):
        h = torch.tanh(self.a(x))
        p, q, r = torch.split(h, [4, 5, 3], dim=1)
        z = torch.cat([r, p * q[:, :4], q[:, ::2], h[:, 1:4]], dim=1)
        return F.cross_entropy(self.b(z), y)


class BatchedMatMul(nn.Module):
    """Rank-5 MatMul with broadcast batch dims on both sides ([B,2,1,3,6] @ [3,6,4] -> [B,2,3,3,4])
    and a Gather of embedding rows (constant indices)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(0.3 * torch.randn(3, 6, 4))
        self.emb = nn.Embedding(10, 6)
        self.out = nn.Linear(2 * 3 * 3 * 4, CLASSES)

    def forward(self, x, y):
        t = self.emb(torch.tensor([1, 4, 2]))  # [3, 6]: Gather
        a = (t * x[:, None, :6]).unsqueeze(1).unsqueeze(2)  # [B, 1, 1, 3, 6]
        a = torch.cat([a, 0.5 * a], dim=1)  # [B, 2, 1, 3, 6]
        h = torch.matmul(a, self.w)  # [B, 2, 3, 3, 4]
        return F.cross_entropy(self.out(torch.tanh(h).flatten(1)), y)


class SplitAxis(nn.Module):
    """Even widths, so Split/Slice can be split along dim 1 on 2 ranks (see AXIS_OPS)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, CLASSES)

    def forward(self, x, y):
        h = torch.tanh(self.a(x))
        p, q = torch.split(h, [4, 4], dim=1)
        return F.cross_entropy(self.b(torch.cat([p * q, h[:, 0:8:2]], dim=1)), y)


MODELS = [("dropout_mlp", DropoutMlp), ("slice_concat", SliceConcat), ("batched_matmul", BatchedMatMul),
          ("split_axis", SplitAxis)]
# Edits of split_axis's data plan: these ops split their var j (dim 1) and these tensors are split(1).
AXIS_OPS = ["/Split", "/Slice", "/Concat.grad", "/Concat.grad.1", "/Slice.grad"]
AXIS_TENSORS = ["/Split_output_0", "/Split_output_1", "/Slice_output_0", "/Slice_output_0.grad", "/Tanh_output_0.grad",
                "/Mul_output_0.grad"]


def axis_plan(data_plan, path):
    """Writes the data plan with AXIS_OPS/AXIS_TENSORS switched to dim 1; every name must be found."""
    out, seen = [], set()
    for line in data_plan.splitlines():
        w = line.split()
        if w and w[0] == "op" and w[1] in AXIS_OPS:
            assert line.endswith("[i]"), line
            line = line[:-len("[i]")] + "[j]"
            seen.add(w[1])
        if w and w[0] == "tensor" and w[1] in AXIS_TENSORS:
            assert line.endswith("[split(0)]"), line
            line = line[:-len("[split(0)]")] + "[split(1)]"
            seen.add(w[1])
        out.append(line)
    missing = set(AXIS_OPS + AXIS_TENSORS) - seen
    assert not missing, f"not in the data plan: {sorted(missing)}"
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-1500:]}")
    return r.stdout


def main():
    problems, checked = [], 0
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory(prefix="cleave_layout_") as tmp:
        x = rng.normal(size=(BATCH * STEPS, 6)).astype(np.float32) * 3
        y = rng.integers(0, CLASSES, size=(BATCH * STEPS,)).astype(np.int64)
        data = f"x={os.path.join(tmp, 'x.npy')},y={os.path.join(tmp, 'y.npy')}"
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        opt = ["--optimizer", "sgd", "--lr", "0.1", "--batch", str(BATCH)]
        for name, cls in MODELS:
            torch.manual_seed(0)
            model = cls()
            path = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(model, (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])), path,
                              input_names=["x", "y"], output_names=["loss"],
                              dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=15)
            ref_path = os.path.join(tmp, name + "_eval.onnx")
            try:
                ref = losses(sh([CLEAVE, "eval", path, "--data", data, "--steps", str(STEPS), "--save-model",
                                 ref_path] + opt))
            except RuntimeError as e:
                problems.append(f"{name}: cleave eval failed: {e}")
                continue
            ref_w = weights(ref_path)
            # The 1-rank reference is `cleave eval`; the single plan adds nothing here but compile time.
            plans = [("data", 2)] + ([("axis", 2)] if name == "split_axis" else [])
            for planner, n in plans:
                where = f"{name} {planner} on {n} rank(s)"
                bundle = os.path.join(tmp, f"{name}_{planner}{n}")
                saved = bundle + "_trained.onnx"
                try:
                    if planner == "axis":
                        plan = bundle + ".plan"
                        axis_plan(sh([CLEAVE, "plan", path, "--planner", "data", "--devices", "2"] + opt), plan)
                        how = ["--plan", plan]
                    else:
                        how = ["--planner", planner]
                    sh([CLEAVE, "compile", path, "--devices", str(n), "-o", bundle] + how + opt)
                    got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model",
                                     saved] + runtime_flags(CLEAVE)))
                except RuntimeError as e:
                    problems.append(f"{where}: {e}")
                    continue
                if len(got) != STEPS:
                    problems.append(f"{where}: {len(got)} loss lines, want {STEPS}")
                    continue
                worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
                if not worst <= 1e-5:
                    problems.append(f"{where}: losses {got} vs eval {ref} (worst rel {worst:.3g})")
                got_w, worst_w = weights(saved), 0.0
                for wname, w in ref_w.items():
                    if not np.issubdtype(w.dtype, np.floating):
                        continue
                    rel = float(np.abs(got_w[wname].astype(np.float64) - w).max()) / max(1.0, float(np.abs(w).max()))
                    worst_w = max(worst_w, rel)
                    if not rel <= 1e-5:
                        problems.append(f"{where}: {wname} differs by {rel:.3g} x max|w|")
                print(f"{where}: worst loss rel diff {worst:.3g}, worst weight diff {worst_w:.3g}, losses {got}",
                      flush=True)
                checked += 1
    for p in problems:
        print(f"error: {p}")
    print(f"layout_ops_match_eval: {checked} bundles checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
