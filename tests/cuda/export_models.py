#!/usr/bin/python3
"""Exports the tiny LSTM of tests/e2e/tiny_recurrent.py and the zoo's tiny Transformer (models/zoo, the one the codegen
e2e tests compile: tests/e2e/zoo_seq_ranks.py; tests/e2e/tiny_transformer.py's model runs under `cleave eval` only)
and writes data for them.

Usage: /usr/bin/python3 export_models.py SOURCE_DIR OUT_DIR
Writes OUT_DIR/lstm.onnx (+ lstm_x.npy, lstm_y.npy: batch 4) and OUT_DIR/transformer.onnx (+ tf_x.npy, tf_y.npy:
batch 8, 8 tokens of a 32-word vocabulary).
"""
import os
import subprocess
import sys

import numpy as np
import torch

SRC, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
sys.argv = [sys.argv[0], "unused-cleave", SRC]  # tiny_recurrent reads its arguments at import
import tiny_recurrent  # noqa: E402

torch.manual_seed(0)
path = tiny_recurrent.make_case(OUT, "lstm", "lstm", 2, tiny_recurrent.BF, False, False, 15, 3)[0]
os.replace(path, os.path.join(OUT, "lstm.onnx"))

subprocess.run(["/usr/bin/python3", os.path.join(SRC, "models", "zoo", "generate.py"), "--family", "transformer",
                "--variant", "tiny", "-o", os.path.join(OUT, "transformer.onnx")], check=True, capture_output=True)
rng = np.random.default_rng(0)
for name in ("x", "y"):
    np.save(os.path.join(OUT, f"tf_{name}.npy"), rng.integers(0, 32, (3 * 8, 8)).astype(np.int64))
