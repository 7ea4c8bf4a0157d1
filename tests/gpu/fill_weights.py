#!/usr/bin/env python3
"""Writes the external data file of an ONNX model exported with `models/zoo/generate.py --weights none`: every
initializer gets seeded values (float: normal, std 0.02, BatchNorm running variances 1; integers: 0), so a model of
hundreds of MB travels as its graph alone and gets weights where it runs (tests/gpu/bench_vs_torch.sh).

Usage: fill_weights.py MODEL.onnx
"""
import os
import sys

import numpy as np
import onnx

model = onnx.load(sys.argv[1], load_external_data=False)
rng = np.random.default_rng(0)
files = {}
for t in model.graph.initializer:
    if t.data_location != onnx.TensorProto.EXTERNAL:
        continue
    info = {e.key: e.value for e in t.external_data}
    dtype = (onnx.helper.tensor_dtype_to_np_dtype(t.data_type) if hasattr(onnx.helper, "tensor_dtype_to_np_dtype")
             else onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type])
    count = int(np.prod(t.dims)) if len(t.dims) else 1
    if np.issubdtype(dtype, np.floating):
        values = (np.ones(count) if t.name.endswith("running_var") else rng.normal(0, 0.02, count)).astype(dtype)
    else:
        values = np.zeros(count, dtype)
    files.setdefault(info["location"], []).append((int(info.get("offset", 0)), values.tobytes()))
base = os.path.dirname(os.path.abspath(sys.argv[1]))
for location, chunks in files.items():
    with open(os.path.join(base, location), "wb") as f:
        for offset, data in sorted(chunks, key=lambda c: c[0]):
            f.seek(offset)
            f.write(data)
    print(f"{location}: {len(chunks)} tensors, {os.path.getsize(os.path.join(base, location))} bytes")
