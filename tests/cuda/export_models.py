#!/usr/bin/python3
"""Exports the tiny LSTM and tiny Transformer of tests/e2e (the same torch modules) and writes data for them.

Usage: /usr/bin/python3 export_models.py SOURCE_DIR OUT_DIR
Writes OUT_DIR/lstm.onnx (+ lstm_x.npy, lstm_y.npy) and OUT_DIR/transformer.onnx (+ tf_ids.npy, tf_mask.npy, tf_y.npy).
"""
import copy
import os
import sys

import numpy as np
import torch

SRC, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
sys.argv = [sys.argv[0], "unused-cleave", SRC]  # tiny_lstm reads its arguments at import
import tiny_lstm  # noqa: E402
import tiny_transformer  # noqa: E402

torch.manual_seed(0)
path, _, _, _ = tiny_lstm.make_case(OUT, "lstm", 2, True, False, False, 15, 3)
os.replace(path, os.path.join(OUT, "lstm.onnx"))

torch.manual_seed(0)
model = tiny_transformer.TinyEncoder()
model.train()
ids, mask, y = tiny_transformer.make_data(np.random.default_rng(0))
for name, arr in (("ids", ids), ("mask", mask), ("y", y)):
    np.save(os.path.join(OUT, f"tf_{name}.npy"), arr)
b = tiny_transformer.BATCH
torch.onnx.export(copy.deepcopy(model), (torch.from_numpy(ids[:b]), torch.from_numpy(mask[:b]), torch.from_numpy(y[:b])),
                  os.path.join(OUT, "transformer.onnx"), opset_version=17, input_names=["ids", "mask", "y"],
                  output_names=["loss"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
