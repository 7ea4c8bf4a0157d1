"""`cleave run` on bundles of a small model built here with onnx.helper from the trigonometric and hyperbolic kinds
(torch 1.13 exports only Sin, Cos, Tan, Asin, Acos and Atan) reproduces `cleave eval` (losses within relative 1e-5,
weights within 1e-5 * max|w|) with the `single` plan on 1 rank and the `data` plan on 2 ranks: the kernels codegen
emits for them (CLEAVE_HD functors shared with the CUDA backend) compute what the interpreter computes. Each function
reads an input inside its domain: tanh(h) * 0.9 for Asin, Acos and Atanh, h * h + 1.5 for Acosh.
Usage: trig_ops_bundle.py CLEAVE SOURCE_DIR."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import losses, run_and_compare, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
STEPS, BATCH = 4, 8
FUNCTIONS = ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def make_model(path):
    """x [N, 64] (pixels in [0, 1]) -> Gemm 48 -> h; the sum of the eleven functions of h -> Gemm 10 -> cross-entropy."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array((rng.standard_normal((48, 64)) * 0.2).astype(np.float32), "fc1.weight"),
             numpy_helper.from_array((rng.standard_normal(48) * 0.1).astype(np.float32), "fc1.bias"),
             numpy_helper.from_array((rng.standard_normal((10, 48)) * 0.02).astype(np.float32), "fc2.weight"),
             numpy_helper.from_array(np.zeros(10, np.float32), "fc2.bias")]
    nodes = []
    for name, v in (("c03", 0.3), ("c09", 0.9), ("c15", 1.5)):
        nodes.append(helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.float32(v))))
    nodes += [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
              helper.make_node("Mul", ["h", "c03"], ["h03"]),
              helper.make_node("Tanh", ["h"], ["th"]),
              helper.make_node("Mul", ["th", "c09"], ["unit"]),              # |unit| < 0.9
              helper.make_node("Mul", ["h", "h"], ["hh"]),
              helper.make_node("Add", ["hh", "c15"], ["above1"])]             # >= 1.5
    domain = {"Tan": "h03", "Asin": "unit", "Acos": "unit", "Atanh": "unit", "Acosh": "above1"}
    terms = []
    for f in FUNCTIONS:
        nodes.append(helper.make_node(f, [domain.get(f, "h")], [f.lower()]))
        terms.append(f.lower())
    acc = terms[0]
    for i, t in enumerate(terms[1:]):
        nodes.append(helper.make_node("Add", [acc, t], [f"sum{i}"]))
        acc = f"sum{i}"
    nodes += [helper.make_node("Gemm", [acc, "fc2.weight", "fc2.bias"], ["logits"], transB=1),
              helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], reduction="mean")]
    graph = helper.make_graph(nodes, "trig", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64]),
                                              helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    xs = os.path.join(SRC, "models/data/digits_flat_train_x.npy")
    ys = os.path.join(SRC, "models/data/digits_train_y.npy")
    data = f"x={xs},y={ys}"
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "trig.onnx")
        make_model(model)
        ir = sh([CLEAVE, "ir", model, "--batch", str(BATCH)])
        missing = [f for f in FUNCTIONS if f" {f} forward " not in ir]
        if missing:
            problems.append(f"the IR has no op of kinds {missing}")
        opt = ["--optimizer", "sgd", "--lr", "0.01"]
        ref_model = os.path.join(tmp, "eval.onnx")
        ref = losses(sh([CLEAVE, "eval", model, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS),
                         "--save-model", ref_model] + opt))
        ref_w = weights(ref_model)
        for planner, n in (("single", 1), ("data", 2)):
            bundle = os.path.join(tmp, f"{planner}{n}")
            sh([CLEAVE, "compile", model, "--devices", str(n), "--planner", planner, "--batch", str(BATCH), "-o",
                bundle] + opt)
            source = open(os.path.join(bundle, "src", "ranks.cpp" if os.path.exists(
                os.path.join(bundle, "src", "ranks.cpp")) else "rank_0.cpp")).read()
            absent = [f for f in FUNCTIONS if f"std::{f.lower()}(" not in source]
            if absent:
                problems.append(f"{planner} on {n} rank(s): the rank source calls no std:: function of {absent}")
            problems += run_and_compare(CLEAVE, bundle, data, STEPS, ref, ref_w, f"{planner} on {n} rank(s)")
    if problems:
        print("\n".join(problems))
        return 1
    print("ok: bundles match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
