#!/usr/bin/python3
"""`cleave test` counts exactly the samples torch classifies correctly with the same weights.

Trains the CNN a few steps with `cleave eval --save-model`, loads the saved initializers into torch's own CNN
(models/make_models.py), runs it in training mode (BatchNorm uses batch statistics, as the exported graph does) over
the held-back digits in batches of B, the last batch wrapped around to stay full, and compares the number of correct
predictions with the one `cleave test` prints. Usage: test_accuracy.py CLEAVE_BINARY SOURCE_DIR"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models"))
from make_models import make_net  # noqa: E402

B = 16
data = os.path.join(src, "models", "data")
with tempfile.TemporaryDirectory() as tmp:
    trained = os.path.join(tmp, "trained.onnx")
    subprocess.run([cleave, "eval", os.path.join(src, "models", "cnn.onnx"), "--data",
                    f"x={data}/digits_train_x.npy,y={data}/digits_train_y.npy", "--batch", str(B), "--steps", "40",
                    "--optimizer", "adam", "--lr", "0.01", "--save-model", trained], check=True, capture_output=True)
    out = subprocess.run([cleave, "test", trained, "--data", f"x={data}/digits_test_x.npy,y={data}/digits_test_y.npy",
                          "--batch", str(B)], check=True, capture_output=True, text=True).stdout
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in onnx.load(trained).graph.initializer}

got = re.fullmatch(r"accuracy (\S+) \((\d+) of (\d+)\)\n", out)
if not got:
    sys.exit(f"FAIL: unexpected output {out!r}")
net = make_net("cnn")
state = {k[len("net."):]: v for k, v in weights.items() if k.startswith("net.")}
missing, unexpected = net.load_state_dict(state, strict=False)
if unexpected or any(not k.endswith("num_batches_tracked") for k in missing):
    sys.exit(f"FAIL: weights do not fit torch's CNN: missing {missing}, unexpected {unexpected}")
net.train()
x, y = np.load(f"{data}/digits_test_x.npy"), np.load(f"{data}/digits_test_y.npy")
n, correct = len(x), 0
with torch.no_grad():
    for start in range(0, n, B):
        idx = [(start + i) % n for i in range(B)]
        pred = net(torch.from_numpy(x[idx])).argmax(1).numpy()
        fresh = min(B, n - start)
        correct += int((pred[:fresh] == y[idx][:fresh]).sum())
print(f"cleave: {got.group(2)} of {got.group(3)}, torch: {correct} of {n}")
sys.exit(0 if int(got.group(2)) == correct and int(got.group(3)) == n else 1)
