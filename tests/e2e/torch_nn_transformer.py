#!/usr/bin/python3
"""torch.nn.Transformer (encoder-decoder) in torch's default time-major layout, against torch 1.13 and across ranks.

A tiny sequence-to-sequence model: Embedding(16, 16) of source and target tokens -> nn.Transformer(d_model 16, 2 heads,
1 encoder and 1 decoder layer, feed-forward 32, dropout 0, batch_first=False, a causal target mask) -> Linear(16, 16)
-> cross entropy over every target position (the mask, a torch buffer, is frozen: `--freeze mask`). Its inputs are time-major ([S, B] source, [T, B] target and labels):
torch exports the batch as dim 1 (symbolic), which becomes each input's sample axis; the data files are sample-major
([samples, S]). Trained with SGD (lr 0.05, batch 4):
  1. `cleave eval` gives torch's 3 per-step losses within relative 1e-4 and torch's final weights within 1e-4 * max|w|;
  2. `cleave compile --planner data|tofu --devices 2` + `cleave run` give `cleave eval`'s losses and saved weights
     within relative 1e-5 (the inputs are split on dim 1).
Usage: torch_nn_transformer.py CLEAVE SOURCE_DIR"""
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
from bundle_check import check_output as sh, compare_run, losses, run_partitioned, weights  # noqa: E402

VOCAB, D, HEADS, S, T, BATCH, STEPS, LR = 16, 16, 2, 6, 5, 4, 3, 0.05


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.tr = nn.Transformer(D, HEADS, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
                                 dropout=0.0)
        self.out = nn.Linear(D, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(T))

    def forward(self, src, tgt, y):  # [S, B], [T, B], [T, B] token ids
        h = self.tr(self.emb(src), self.emb(tgt), tgt_mask=self.mask)  # [T, B, D]
        return F.cross_entropy(self.out(h).reshape(-1, VOCAB), y.reshape(-1))


def main():
    problems = []
    torch.manual_seed(0)
    model = Seq2Seq()
    rng = np.random.default_rng(2)
    n = BATCH * STEPS
    src = rng.integers(0, VOCAB, (n, S)).astype(np.int64)  # sample-major, as the data files hold them
    tgt = rng.integers(0, VOCAB, (n, T)).astype(np.int64)
    y = rng.integers(0, VOCAB, (n, T)).astype(np.int64)
    time_major = lambda a: torch.from_numpy(np.ascontiguousarray(a.T))  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="cleave_nn_transformer_") as tmp:
        files = []
        for name, a in (("src", src), ("tgt", tgt), ("y", y)):
            np.save(os.path.join(tmp, name + ".npy"), a)
            files.append(f"{name}={os.path.join(tmp, name + '.npy')}")
        data = ",".join(files)
        path = os.path.join(tmp, "seq2seq.onnx")
        model.train()
        torch.onnx.export(model, (time_major(src[:BATCH]), time_major(tgt[:BATCH]), time_major(y[:BATCH])), path,
                          input_names=["src", "tgt", "y"], output_names=["loss"],
                          dynamic_axes={"src": {1: "B"}, "tgt": {1: "B"}, "y": {1: "B"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=14)
        ops = sorted({nd.op_type for nd in onnx.load(path).graph.node})
        print("seq2seq: ONNX ops " + ", ".join(ops), flush=True)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        ref = []
        for k in range(STEPS):
            b = slice(k * BATCH, (k + 1) * BATCH)
            opt.zero_grad()
            loss = model(time_major(src[b]), time_major(tgt[b]), time_major(y[b]))
            loss.backward()
            opt.step()
            ref.append(float(loss))
        torch_w = {k: v.detach().double().numpy() for k, v in model.named_parameters()}

        # The causal mask is a torch buffer: an initializer of the export, which Cleave would train unless frozen.
        flags = ["--optimizer", "sgd", "--lr", str(LR), "--batch", str(BATCH), "--freeze", "mask"]
        ir = sh([CLEAVE, "ir", path, "--batch", str(BATCH)])
        axes = sorted(line.split()[1] for line in ir.splitlines() if line.startswith("tensor ") and "samples=1" in line)
        if axes != ["src", "tgt", "y"]:
            problems.append(f"inputs with their samples in dim 1: {axes}, want src, tgt, y")
        saved = os.path.join(tmp, "eval.onnx")
        got = losses(sh([CLEAVE, "eval", path, "--data", data, "--steps", str(STEPS), "--save-model", saved] + flags))
        worst = max((abs(a - b) / abs(b) for a, b in zip(got, ref)), default=float("inf"))
        if len(got) != STEPS or not worst <= 1e-4:
            problems.append(f"eval vs torch: losses {got} vs {ref}")
        eval_w = weights(saved)
        wworst = 0.0
        for name, w in torch_w.items():
            if name not in eval_w:
                problems.append(f"eval: no initializer {name!r} in the saved model")
                continue
            rel = float(np.abs(eval_w[name].astype(np.float64).reshape(w.shape) - w).max()) / float(np.abs(w).max())
            wworst = rel if np.isnan(rel) else max(wworst, rel)
            if not rel <= 1e-4:
                problems.append(f"eval vs torch: {name} differs by {rel:.3g} x max|w|")
        print(f"seq2seq eval vs torch: worst loss rel diff {worst:.3g}, worst weight diff {wworst:.3g} x max|w|, "
              f"losses {got}", flush=True)
        eval_w = {k: v.astype(np.float64) for k, v in eval_w.items()}
        for planner in ("data", "tofu"):
            where = f"seq2seq {planner} plan on 2 ranks vs eval"
            try:
                run, saved = run_partitioned(CLEAVE, path, os.path.join(tmp, planner),
                                             ["--planner", planner, "--devices", "2"] + flags, data, STEPS)
            except RuntimeError as e:
                problems.append(f"{where}: {e}")
                continue
            found, worst = compare_run(where, run, got, saved, eval_w, STEPS)
            problems += found
            print(f"{where}: worst loss rel diff {worst:.3g}", flush=True)
    for p in problems:
        print(f"error: {p}")
    print("torch_nn_transformer: " + (f"{len(problems)} problem(s)" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
