#!/usr/bin/python3
"""LSTM, GRU and RNN import (frontend/translate_rnn.cpp) against torch 1.13, and their compiled bundles against
`cleave eval`.

A tiny language model, Embedding(32, 8) -> nn.LSTM / nn.GRU / nn.RNN(8, 16, layers) -> Linear(16, 32) -> cross
entropy over 5 unrolled steps, is exported by torch (training mode, no constant folding, symbolic batch) and trained
with SGD:
  1. `cleave eval` gives torch's per-step losses within relative 1e-4, and torch's final weights within 1e-4 * max|w|,
     for: LSTM 2 layers batch_first (5 steps), 1 layer seq-first at opset 13, 3 layers with learned initial states at
     opset 17, 1 bidirectional layer at opset 14, 2 layers time-major ([SEQ, B] inputs, symbolic batch in dim 1);
     GRU (torch exports linear_before_reset=1) 2 layers batch_first, 1 layer seq-first, 1 bidirectional layer, 1 layer
     time-major with static shapes and `--batch-axis x=1,y=1`; RNN tanh 2 layers, RNN relu bidirectional (3 steps
     each). Data files are sample-major ([samples, SEQ]) whatever the model's layout;
  2. the first case of each cell compiled with `--planner data --devices 2` (the GRU's and the time-major LSTM's also
     with `--planner tofu`, and with `--shuffle 3` against `cleave eval --shuffle 3`; the time-major ones split their
     inputs on dim 1) and run under mpirun (`cleave run`) gives the losses and saved weights of the 1-rank run
     (`cleave eval`, checked against torch in 1.) within relative 1e-5.
Usage: tiny_recurrent.py CLEAVE SOURCE_DIR"""
import os
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

CLEAVE, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "codegen"))
from bundle_check import check_output as sh, losses, run_partitioned, weights  # noqa: E402

VOCAB, EMBED, HIDDEN, SEQ, BATCH, LR = 32, 8, 16, 5, 4, 0.1
# Layouts: BF = batch_first; SF = seq-first inside the model (the graph's inputs stay [B, SEQ]); TM = time-major
# graph inputs [SEQ, B] (the symbolic batch is dim 1: data files stay sample-major and the sample axis is fed there);
# TM_STATIC = TM exported without a symbolic dim, the sample axis given by --batch-axis.
BF, SF, TM, TM_STATIC = "batch_first", "seq_first", "time_major", "time_major_static"
# (name, cell, layers, layout, learned initial states, bidirectional, opset, steps)
CASES = [("lstm2_bf", "lstm", 2, BF, False, False, 15, 5), ("lstm1_seq_first", "lstm", 1, SF, False, False, 13, 3),
         ("lstm3_h0", "lstm", 3, BF, True, False, 17, 3), ("lstm1_bidir", "lstm", 1, BF, False, True, 14, 3),
         ("lstm2_time_major", "lstm", 2, TM, False, False, 15, 3),
         ("gru2_bf", "gru", 2, BF, False, False, 15, 3), ("gru1_seq_first", "gru", 1, SF, False, False, 13, 3),
         ("gru1_bidir", "gru", 1, BF, False, True, 14, 3), ("gru1_time_major", "gru", 1, TM_STATIC, False, False, 15, 3),
         ("rnn2_tanh", "rnn_tanh", 2, BF, False, False, 15, 3), ("rnn1_relu_bidir", "rnn_relu", 1, BF, False, True, 15, 3)]
# Partitioned runs: (case, planner, devices, run knobs: the reference is then `cleave eval` with them too).
PLANS = [("lstm2_bf", "data", 2, []), ("gru2_bf", "data", 2, []), ("gru2_bf", "tofu", 2, []),
         ("rnn2_tanh", "data", 2, []), ("lstm2_time_major", "data", 2, []), ("lstm2_time_major", "tofu", 2, []),
         ("lstm2_time_major", "data", 2, ["--shuffle", "3"]), ("gru1_time_major", "data", 2, [])]


class TinyLM(nn.Module):
    def __init__(self, cell, layers, layout, learned_state, bidirectional):
        super().__init__()
        self.layout = layout
        batch_first = layout == BF
        self.emb = nn.Embedding(VOCAB, EMBED)
        if cell == "lstm":
            self.lstm = nn.LSTM(EMBED, HIDDEN, layers, batch_first=batch_first, bidirectional=bidirectional)
        elif cell == "gru":
            self.lstm = nn.GRU(EMBED, HIDDEN, layers, batch_first=batch_first, bidirectional=bidirectional)
        else:
            self.lstm = nn.RNN(EMBED, HIDDEN, layers, nonlinearity=cell[4:], batch_first=batch_first,
                               bidirectional=bidirectional)
        self.fc = nn.Linear(2 * HIDDEN if bidirectional else HIDDEN, VOCAB)
        self.h0 = nn.Parameter(0.1 * torch.randn(layers, 1, HIDDEN)) if learned_state else None
        self.c0 = nn.Parameter(0.1 * torch.randn(layers, 1, HIDDEN)) if learned_state else None

    def forward(self, x, y):  # x, y: [B, SEQ] token ids ([SEQ, B] time-major)
        if self.layout in (TM, TM_STATIC):
            # The word-language-model way: [SEQ, B, VOCAB] scores flattened against [SEQ * B] targets.
            out, _ = self.lstm(self.emb(x))
            return F.cross_entropy(self.fc(out).reshape(-1, VOCAB), y.reshape(-1))
        e = self.emb(x if self.layout == BF else x.t())
        if self.h0 is not None:
            # Broadcast the learned [layers, 1, H] states over the batch by adding zeros (exports as Add of a
            # ConstantOfShape, which folds once the batch is fixed).
            zeros = e.new_zeros(self.h0.shape[0], x.shape[0], HIDDEN)
            out, _ = self.lstm(e, (self.h0 + zeros, self.c0 + zeros))
        else:
            out, _ = self.lstm(e)
        if self.layout == SF:
            out = out.transpose(0, 1)
        logits = self.fc(out)  # [B, SEQ, VOCAB]
        return F.cross_entropy(logits.transpose(1, 2), y)


def make_case(tmp, name, cell, layers, layout, learned_state, bidirectional, opset, steps):
    """Exports the model, writes its data (sample-major whatever the layout), trains torch; returns (onnx path, data
    flag, torch losses, torch weights)."""
    torch.manual_seed(0)
    model = TinyLM(cell, layers, layout, learned_state, bidirectional)
    time_major = layout in (TM, TM_STATIC)
    batch = (lambda a: torch.from_numpy(np.ascontiguousarray(a.T))) if time_major else torch.from_numpy
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, VOCAB, size=(BATCH * steps, SEQ + 1))
    x, y = tokens[:, :-1].astype(np.int64), tokens[:, 1:].astype(np.int64)
    xp, yp = os.path.join(tmp, f"{name}_x.npy"), os.path.join(tmp, f"{name}_y.npy")
    np.save(xp, x)
    np.save(yp, y)
    path = os.path.join(tmp, f"{name}.onnx")
    model.train()
    axis = 1 if time_major else 0
    torch.onnx.export(model, (batch(x[:BATCH]), batch(y[:BATCH])), path, input_names=["x", "y"], output_names=["loss"],
                      dynamic_axes=None if layout == TM_STATIC else {"x": {axis: "N"}, "y": {axis: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=opset)
    op = {"lstm": "LSTM", "gru": "GRU"}.get(cell, "RNN")
    assert any(n.op_type == op for n in onnx.load(path).graph.node), f"torch exported no {op} node"
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    ref = []
    for k in range(steps):
        opt.zero_grad()
        loss = model(batch(x[k * BATCH:(k + 1) * BATCH]), batch(y[k * BATCH:(k + 1) * BATCH]))
        loss.backward()
        opt.step()
        ref.append(float(loss))
    final = {k: v.detach().numpy().astype(np.float64) for k, v in model.named_parameters()}
    return path, f"x={xp},y={yp}", ref, final, ["--batch-axis", "x=1,y=1"] if layout == TM_STATIC else []


def compare_losses(where, got, want, rtol, problems):
    if len(got) != len(want):
        problems.append(f"{where}: {len(got)} loss lines, want {len(want)}")
        return float("inf")
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    if not worst <= rtol:
        problems.append(f"{where}: losses {got} vs {want} (worst rel {worst:.3g} > {rtol:g})")
    return worst


def compare_weights(where, got, want, rtol, problems):
    """Every float initializer of `want` (torch parameter names; the LSTM's are initializers under the same names)."""
    worst = 0.0
    for name, w in want.items():
        if name not in got:
            problems.append(f"{where}: no initializer {name!r} in the saved model")
            continue
        g = got[name].astype(np.float64).reshape(w.shape)
        rel = float(np.abs(g - w).max()) / max(1e-30, float(np.abs(w).max()))
        worst = max(worst, rel)
        if not rel <= rtol:
            problems.append(f"{where}: {name} differs by {rel:.3g} x max|w| (tol {rtol:g})")
    return worst


def main():
    problems = []
    flags = ["--optimizer", "sgd", "--lr", str(LR), "--batch", str(BATCH)]
    with tempfile.TemporaryDirectory(prefix="cleave_recurrent_") as tmp:
        evaluated = {}
        for name, cell, layers, layout, learned, bidir, opset, steps in CASES:
            path, data, ref, ref_w, axes = make_case(tmp, name, cell, layers, layout, learned, bidir, opset, steps)
            saved = os.path.join(tmp, f"{name}_eval.onnx")
            try:
                got = losses(sh([CLEAVE, "eval", path, "--data", data, "--steps", str(steps), "--save-model", saved]
                                + flags + axes))
            except RuntimeError as e:
                problems.append(f"{name}: cleave eval failed: {e}")
                continue
            wl = compare_losses(f"{name} eval vs torch", got, ref, 1e-4, problems)
            ww = compare_weights(f"{name} eval vs torch", weights(saved), ref_w, 1e-4, problems)
            print(f"{name} (opset {opset}): eval vs torch: worst loss rel diff {wl:.3g}, worst weight diff {ww:.3g} "
                  f"x max|w|, losses {got}", flush=True)
            evaluated[name] = (path, data, got, weights(saved), steps, axes)
        for name, planner, devices, knobs in PLANS:
            if name not in evaluated:
                continue
            path, data, ref, ref_w, steps, axes = evaluated[name]
            where = f"{name} {planner} plan on {devices} rank(s) {' '.join(knobs)} vs eval".replace("  ", " ")
            try:
                if knobs:
                    saved = os.path.join(tmp, f"{name}_eval_knobs.onnx")
                    ref = losses(sh([CLEAVE, "eval", path, "--data", data, "--steps", str(steps), "--save-model",
                                     saved] + flags + axes + knobs))
                    ref_w = weights(saved)
                ref_w = {k: v.astype(np.float64) for k, v in ref_w.items() if np.issubdtype(v.dtype, np.floating)}
                got, saved = run_partitioned(CLEAVE, path, os.path.join(tmp, f"{name}_{planner}{devices}{len(knobs)}"),
                                             ["--planner", planner, "--devices", str(devices)] + flags + axes, data,
                                             steps, knobs)
            except RuntimeError as e:
                problems.append(f"{where}: {e}")
                continue
            wl = compare_losses(where, got, ref, 1e-5, problems)
            ww = compare_weights(where, weights(saved), ref_w, 1e-5, problems)
            print(f"{where}: worst loss rel diff {wl:.3g}, worst weight diff {ww:.3g} x max|w|", flush=True)
    for p in problems:
        print(f"error: {p}")
    print("tiny_recurrent: " + (f"{len(problems)} problem(s)" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
