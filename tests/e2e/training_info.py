#!/usr/bin/python3
"""A model whose TrainingInfoProto uses ai.onnx.preview.training Gradient + Adam / Momentum / Adagrad trains under
`cleave eval` exactly as ONNX's own reference implementations of those ops say (onnx.backend.test.case.node.*),
with the gradient computed analytically here.

Forward: Z = X @ W, loss = ReduceSum(Z * Z) (scalar); dloss/dW = 2 X^T X W.
Algorithm: dW = Gradient(W; loss); W', state' = Optimizer(R, T, W, dW, state); T' = T + 1; update_binding binds
W, state and T. Usage: training_info.py CLEAVE_BINARY SOURCE_DIR"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.case.node.adagrad import apply_adagrad
from onnx.backend.test.case.node.adam import apply_adam
from onnx.backend.test.case.node.momentum import apply_momentum

cleave = sys.argv[1]
rng = np.random.default_rng(7)
X = rng.standard_normal((6, 4)).astype(np.float32)
W0 = (0.3 * rng.standard_normal((4, 3))).astype(np.float32)
STEPS, R = 5, 0.01
TRAINING = "ai.onnx.preview.training"


def build(kind, attrs, state_names):
    inits = [numpy_helper.from_array(W0, "W"), numpy_helper.from_array(np.array(R, np.float32), "R"),
             numpy_helper.from_array(np.array(0, np.int64), "T"), numpy_helper.from_array(np.array(1, np.int64), "one")]
    inits += [numpy_helper.from_array(np.zeros_like(W0), s) for s in state_names]
    fwd = [helper.make_node("MatMul", ["X", "W"], ["Z"], name="mm"),
           helper.make_node("Mul", ["Z", "Z"], ["Z2"], name="sq"),
           helper.make_node("ReduceSum", ["Z2"], ["loss"], name="sum", keepdims=0)]
    graph = helper.make_graph(fwd, "fwd", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [6, 4])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    algo_nodes = [
        helper.make_node("Gradient", ["W", "X"], ["dW"], name="grad", domain=TRAINING, xs=["W"], zs=["X"], y="loss"),
        helper.make_node(kind, ["R", "T", "W", "dW"] + state_names,
                         ["W_new"] + [s + "_new" for s in state_names], name="opt", domain=TRAINING, **attrs),
        helper.make_node("Add", ["T", "one"], ["T_new"], name="tick")]
    algo = helper.make_graph(algo_nodes, "algorithm", [], [])
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algo)
    for k in ["W", "T"] + state_names:
        b = info.update_binding.add()
        b.key, b.value = k, k + "_new"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid(TRAINING, 1)])
    model.training_info.append(info)
    return model


def reference(kind, attrs):
    W, T = W0.astype(np.float64), 0
    V, H = np.zeros_like(W), np.zeros_like(W)
    X64 = X.astype(np.float64)
    losses = []
    for _ in range(STEPS):
        Z = X64 @ W
        losses.append(float((Z * Z).sum()))
        G = 2 * X64.T @ Z
        if kind == "Adam":
            W, V, H = apply_adam(R, T, W, G, V, H, attrs.get("norm_coefficient", 0.0), attrs.get("norm_coefficient_post", 0.0),
                                 attrs.get("alpha", 0.9), attrs.get("beta", 0.999), attrs.get("epsilon", 1e-6))
        elif kind == "Momentum":
            W, V = apply_momentum(R, T, W, G, V, attrs["norm_coefficient"], attrs["alpha"], attrs["beta"])
        else:
            W, H = apply_adagrad(R, T, W, G, H, attrs["norm_coefficient"], attrs["epsilon"], attrs["decay_factor"])
        T += 1
    return losses, W


cases = [("Adam", {"alpha": 0.9, "beta": 0.999, "epsilon": 1e-6, "norm_coefficient": 0.001}, ["V", "H"]),
         ("Momentum", {"alpha": 0.9, "beta": 0.5, "norm_coefficient": 0.01, "mode": "standard"}, ["V"]),
         ("Adagrad", {"epsilon": 1e-6, "decay_factor": 0.1, "norm_coefficient": 0.001}, ["H"])]
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    np.save(os.path.join(tmp, "x.npy"), X)  # 6 samples of [4]: --batch 6 feeds all of X every step
    for kind, attrs, state_names in cases:
        model = build(kind, attrs, state_names)
        path = os.path.join(tmp, kind + ".onnx")
        onnx.save(model, path)
        out = os.path.join(tmp, kind + "_trained.onnx")
        proc = subprocess.run([cleave, "eval", path, "--data", "X=" + os.path.join(tmp, "x.npy"), "--batch", "6",
                               "--steps", str(STEPS), "--save-model", out], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"FAIL {kind}: cleave eval exited {proc.returncode}: {proc.stderr.strip()}")
            failures += 1
            continue
        got = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
        want, W_ref = reference(kind, attrs)
        W_got = numpy_helper.to_array([i for i in onnx.load(out).graph.initializer if i.name == "W"][0])
        loss_err = max(abs(g - w) / abs(w) for g, w in zip(got, want)) if len(got) == STEPS else float("inf")
        w_err = float(np.abs(W_got - W_ref).max() / np.abs(W_ref).max())
        ok = loss_err <= 1e-5 and w_err <= 1e-5
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {kind}: {len(got)} steps, max rel loss err {loss_err:.2e}, "
              f"max rel weight err {w_err:.2e}")
sys.exit(1 if failures else 0)
