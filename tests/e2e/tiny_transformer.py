"""A tiny BERT-style encoder exported by torch 1.13 trains in Cleave (`cleave eval`) as it does in torch.optim.SGD.

Usage (CTest): /usr/bin/python3 tests/e2e/tiny_transformer.py <cleave-binary> <source-dir>

The model (vocab 32, d 16, 2 heads, seq 8, 2 layers, 4 classes) exercises what torch exports for Transformers:
  layer 1: token + position nn.Embedding (Gather), LayerNorm, attention written with torch.matmul/softmax and an
           int64 padding mask applied by masked_fill (Equal, Cast, Where), GELU (the Erf chain), residuals;
  layer 2: nn.TransformerEncoderLayer(batch_first=True, activation="gelu") with a causal src_mask (Trilu of a
           constant, folded at import) and src_key_padding_mask (ConstantOfShape, Equal, Where, Expand, Cast on
           shape values folded at import; Or, Where on the masks at run time);
  head:    the first token's state, a Linear, cross-entropy.
It is exported at opset 14 (LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div) and at opset 17
(LayerNormalization), both with training=TRAINING and do_constant_folding=False, and dropout 0 (torch's dropout RNG
is not Cleave's). For each export, 5 SGD steps (lr 0.1, batch 4) of `cleave eval` must give torch's losses within
relative 1e-4, and the data plan on 2 ranks must give the eval's within 1e-5. Exit 0 if all pass, 1 otherwise, one
line per problem.
"""
import copy
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, HEADS, SEQ, CLASSES = 32, 16, 2, 8, 4
BATCH, STEPS, LR = 4, 5, 0.1
LOSS_RTOL = 1e-4
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")


class BertBlock(nn.Module):
    """Post-norm self-attention + GELU MLP, written with matmul/softmax as BERT implementations do."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.f1, self.f2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)

    def forward(self, h, mask):
        b, t, _ = h.shape
        dh = D // HEADS
        split = lambda x: x.view(b, t, HEADS, dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e4)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, t, D)
        h = self.ln1(h + self.o(ctx))
        return self.ln2(h + self.f2(F.gelu(self.f1(h))))


class TinyEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.ln = nn.LayerNorm(D)
        self.block = BertBlock()
        self.layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0, activation="gelu", batch_first=True)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, ids, mask, y):
        pos = torch.arange(SEQ).unsqueeze(0)
        h = self.ln(self.tok(ids) + self.pos(pos))
        h = self.block(h, mask)
        causal = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1)
        h = self.layer(h, src_mask=causal, src_key_padding_mask=mask == 0)
        return F.cross_entropy(self.head(h[:, 0]), y)


def make_data(rng):
    n = BATCH * STEPS
    ids = rng.integers(0, VOCAB, size=(n, SEQ)).astype(np.int64)
    lengths = rng.integers(3, SEQ + 1, size=n)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)  # 1 = real token, 0 = padding
    y = rng.integers(0, CLASSES, size=n).astype(np.int64)
    return ids, mask, y


def torch_losses(model, ids, mask, y):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        sl = slice(step * BATCH, (step + 1) * BATCH)
        opt.zero_grad()
        loss = model(torch.from_numpy(ids[sl]), torch.from_numpy(mask[sl]), torch.from_numpy(y[sl]))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().numpy().astype(np.float32)))
    return losses


def cleave_losses(cleave, onnx_path, files, tag):
    cmd = [cleave, "eval", onnx_path, "--data", ",".join(f"{k}={v}" for k, v in files.items()),
           "--batch", str(BATCH), "--steps", str(STEPS), "--optimizer", "sgd", "--lr", repr(LR)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        return None, [f"{tag}: `{' '.join(cmd)}` exited with {proc.returncode}: {tail}"]
    losses = []
    for i, line in enumerate(proc.stdout.splitlines()):
        m = STEP_LINE.match(line)
        if not m or int(m.group(1)) != i + 1:
            return None, [f"{tag}: stdout line {i + 1} is {line!r}, expected 'step {i + 1} loss <value>'"]
        losses.append(float(m.group(2)))
    if len(losses) != STEPS:
        return None, [f"{tag}: {len(losses)} step lines, expected {STEPS}"]
    return losses, []


def bundle_matches_eval(cleave, onnx_path, files, eval_losses, tmp, tag):
    """The data plan on 2 ranks (`cleave compile` + `cleave run`, ranks built at -O0) prints the eval's losses within
    relative 1e-5: the scalar-index Gather (x[:, 0]) and the bool masks' Expand compile and split."""
    sys.path.insert(0, os.path.join(sys.argv[2], "tests", "codegen"))
    from bundle_check import losses, runtime_flags
    bundle = os.path.join(tmp, f"bundle_{tag.replace(' ', '_')}")
    train = ["--optimizer", "sgd", "--lr", repr(LR)]
    data = ",".join(f"{k}={v}" for k, v in files.items())
    for cmd in ([cleave, "compile", onnx_path, "--planner", "data", "--devices", "2", "--batch", str(BATCH), "-o",
                 bundle] + train,
                [cleave, "run", bundle, "--data", data, "--steps", str(STEPS), "--build-type", "Debug"]
                + runtime_flags(cleave)):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            return [f"{tag}: `{' '.join(cmd[:3])} ...` exited with {proc.returncode}: {tail}"]
    got = losses(proc.stdout)
    worst = max((abs(a - b) / abs(b) for a, b in zip(got, eval_losses)), default=float("inf"))
    print(f"{tag}: data plan on 2 ranks vs eval worst loss rel diff {worst:.3g}", file=sys.stderr)
    if len(got) != STEPS or not worst <= 1e-5:
        return [f"{tag}: 2-rank losses {got} vs eval {eval_losses} (worst rel {worst:.3g} > 1e-5)"]
    return []


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tiny_transformer.py <cleave-binary> <source-dir>")
    cleave = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyEncoder()
    model.train()
    ids, mask, y = make_data(np.random.default_rng(0))
    want = torch_losses(copy.deepcopy(model), ids, mask, y)
    problems = []
    with tempfile.TemporaryDirectory(prefix="cleave_tiny_transformer_") as tmp:
        files = {}
        for name, arr in (("ids", ids), ("mask", mask), ("y", y)):
            files[name] = os.path.join(tmp, f"{name}.npy")
            np.save(files[name], arr)
        for opset in (14, 17):
            path = os.path.join(tmp, f"tiny_transformer_{opset}.onnx")
            sl = slice(0, BATCH)
            args = (torch.from_numpy(ids[sl]), torch.from_numpy(mask[sl]), torch.from_numpy(y[sl]))
            torch.onnx.export(copy.deepcopy(model), args, path, opset_version=opset, input_names=["ids", "mask", "y"],
                              output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
            got, errs = cleave_losses(cleave, path, files, f"opset {opset}")
            problems += errs
            if got is None:
                continue
            for k, (g, w) in enumerate(zip(got, want), start=1):
                rel = abs(g - w) / max(abs(w), 1e-30)
                if not rel <= LOSS_RTOL:
                    problems.append(f"opset {opset}: step {k}: loss {g!r}, torch {w!r} (relative {rel:.3g})")
            print(f"opset {opset}: losses {got} vs torch {want}", file=sys.stderr)
            problems += bundle_matches_eval(cleave, path, files, got, tmp, f"opset {opset}")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
