"""An op Cleave has no translator for, imported by expanding its ONNX function body (frontend/expand_functions.h),
trains one step like torch: MeanVarianceNormalization (body: ReduceMean, Pow, Sub, Sqrt, Add, Div), once with the
schema's default axes [0, 2, 3] (substituted for the body's ref_attr_name) and once with axes [1], inside a graph
differentiated by Cleave, written with onnx.helper and computed in torch by its ONNX definition
((X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)).

Checks, as index_ops.py: the graph imports as the body's ops (named after the node) and no MeanVarianceNormalization
remains; `cleave eval` one SGD step: the loss within relative 1e-5 of torch float64's; each parameter's gradient,
recovered from the saved model as (w0 - w1) / lr, no further from torch float64's (relative to the parameter's largest
gradient) than torch float32's own, and at most max(1e-5, that).
Usage (CTest): /usr/bin/python3 tests/e2e/function_ops.py <cleave-binary> <source-dir>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

BATCH = 4
LR = 1e4  # w1 = w0 - LR * g carries g to float32 precision
LOSS_RTOL = 1e-5


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def model(path, w, v):
    f = TensorProto.FLOAT
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "w"], ["h"]),                                           # [B, 3, 4, 5]
        n("MeanVarianceNormalization", ["h"], ["n0"], name="mvn_default"),     # axes [0, 2, 3]
        n("MeanVarianceNormalization", ["h"], ["n1"], name="mvn_c", axes=[1]),
        n("Mul", ["n0", "v"], ["a"]),
        n("Mul", ["a", "a"], ["a2"]),
        n("Mul", ["n1", "t"], ["b"]),
        n("Add", ["a2", "b"], ["s"]),
        n("ReduceSum", ["s"], ["total"], keepdims=0),
        n("Div", ["total", "batch"], ["loss"]),
    ]
    graph = helper.make_graph(
        nodes, "function_ops",
        [helper.make_tensor_value_info("x", f, [BATCH, 3, 4, 5]),
         helper.make_tensor_value_info("t", f, [BATCH, 3, 4, 5])],
        [helper.make_tensor_value_info("loss", f, [])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(v, "v"),
         numpy_helper.from_array(np.float32(BATCH), "batch")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def mvn(x, axes):
    mean = x.mean(dim=axes, keepdim=True)
    var = (x ** 2).mean(dim=axes, keepdim=True) - mean ** 2
    return (x - mean) / (var.sqrt() + 1e-9)


def loss_torch(p, x, t):
    h = x * p["w"]
    a = mvn(h, (0, 2, 3)) * p["v"]
    return ((a * a).sum() + (mvn(h, (1,)) * t).sum()) / BATCH


def worst_error(grads, ref):
    worst = (0.0, "")
    for name, want in ref.items():
        err = np.abs(grads[name] - want).max() / max(np.abs(want).max(), 1e-30)
        if err > worst[0]:
            worst = (err, name)
    return worst


def main():
    cleave = sys.argv[1]
    problems = []
    rng = np.random.default_rng(0)
    w = (1 + 0.5 * rng.standard_normal((3, 4, 5))).astype(np.float32)
    v = rng.standard_normal((3, 1, 1)).astype(np.float32)
    x = rng.standard_normal((BATCH, 3, 4, 5)).astype(np.float32)
    t = rng.standard_normal((BATCH, 3, 4, 5)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "function_ops.onnx")
        model(path, w, v)

        ir = sh([cleave, "ir", path])
        if "MeanVarianceNormalization" in ir.replace("mvn_default/", "").replace("mvn_c/", ""):
            problems.append("the IR still names MeanVarianceNormalization outside the expanded ops")
        for node in ("mvn_default", "mvn_c"):
            if f"{node}/ReduceMean" not in ir:
                problems.append(f"the IR has no op {node}/ReduceMean*: {node} was not expanded")

        out = {}
        for dt in (torch.float64, torch.float32):
            p = {"w": torch.tensor(w, dtype=dt, requires_grad=True), "v": torch.tensor(v, dtype=dt, requires_grad=True)}
            loss = loss_torch(p, torch.tensor(x, dtype=dt), torch.tensor(t, dtype=dt))
            loss.backward()
            out[dt] = (loss.item(), {k: q.grad.double().numpy() for k, q in p.items()})
        loss64, g64 = out[torch.float64]
        worst32 = worst_error(out[torch.float32][1], g64)

        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "t.npy"), t)
        saved = os.path.join(tmp, "saved.onnx")
        log = sh([cleave, "eval", path, "--data", f"x={tmp}/x.npy,t={tmp}/t.npy", "--batch", str(BATCH), "--steps",
                  "1", "--save-model", saved, "--optimizer", "sgd", "--lr", str(LR)])
        loss = float([line for line in log.splitlines() if "loss" in line][0].split()[-1])
        w0 = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(path).graph.initializer}
        w1 = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(saved).graph.initializer}
        worst = worst_error({k: (w0[k] - w1[k]) / LR for k in g64}, g64)
        rel = abs(loss - loss64) / abs(loss64)
        print(f"function_ops eval: loss {loss:.8g} vs torch f64 {loss64:.8g} (rel {rel:.2g}); worst gradient error "
              f"relative to the parameter's largest: {worst[0]:.3g} ({worst[1]}); torch float32's {worst32[0]:.3g}",
              flush=True)
        if rel > LOSS_RTOL:
            problems.append(f"loss rel diff {rel:.3g} > {LOSS_RTOL:g}")
        if worst[0] > max(1e-5, worst32[0]):
            problems.append(f"gradient of {worst[1]} off by {worst[0]:.3g}, worse than max(1e-5, torch float32's "
                            f"{worst32[0]:.3g})")
    for p in problems:
        print("FAIL " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
