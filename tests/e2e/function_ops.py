"""An op Cleave has no translator for, imported by expanding its ONNX function body (frontend/expand_functions.h),
trains one step like torch: MeanVarianceNormalization (body: ReduceMean, Pow, Sub, Sqrt, Add, Div), once with the
schema's default axes [0, 2, 3] (substituted for the body's ref_attr_name) and once with axes [1], inside a graph
differentiated by Cleave, written with onnx.helper and computed in torch by its ONNX definition
((X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)).

Checks, as index_ops.py (tests/e2e/torch_compare.py): the graph imports as the body's ops (named after the node) and
no MeanVarianceNormalization remains; one SGD step of `cleave eval` and of the data plan on 2 ranks (the default axes
reduce over the batch: each rank's ReduceMean is a share of the global mean, all-reduced): the loss within relative
1e-5 of torch float64's; each parameter's gradient, recovered from the saved model as (w0 - w1) / lr, no further from
torch float64's (relative to the parameter's largest gradient) than max(1e-5, torch float32's own).
Usage (CTest): /usr/bin/python3 tests/e2e/function_ops.py <cleave-binary> <source-dir>
"""
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "codegen"))
import torch_compare as tc  # noqa: E402
from bundle_check import check_output as sh, run_partitioned  # noqa: E402

BATCH = 4


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

        ref = tc.function_reference(loss_torch, {"w": w, "v": v}, [x, t])
        data = tc.save_data(tmp, "function_ops", {"x": x, "t": t})
        sgd = ["--optimizer", "sgd", "--lr", str(tc.LR)]
        saved = os.path.join(tmp, "saved.onnx")
        out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--save-model", saved]
                 + sgd)
        problems += tc.check_step("function_ops eval", tc.step_loss(out), tc.recovered_gradients(path, saved), ref,
                                  floor=0)[0]
        got, saved = run_partitioned(cleave, path, os.path.join(tmp, "data2"),
                                     ["--planner", "data", "--devices", "2", "--batch", str(BATCH)] + sgd, data, 1)
        if len(got) != 1:
            problems.append(f"function_ops 2 ranks: {len(got)} loss lines, want 1")
        else:
            problems += tc.check_step("function_ops 2 ranks", got[0], tc.recovered_gradients(path, saved), ref,
                                      floor=0)[0]
    for p in problems:
        print("FAIL " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
