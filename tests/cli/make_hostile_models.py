#!/usr/bin/python3
"""Writes the hostile models of tests/cli/hostile_input.sh into DIR (argv[1]) (issue 25: what mutation found).

Each is a small, otherwise valid model broken in one way that ONNX's shape inference crashes on or silently accepts.
Built with onnx.helper without running the checker, so the defects reach Cleave."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opsets=(("", 15),)):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    with open(os.path.join(out, name), "wb") as f:
        f.write(model.SerializeToString())


def vi(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


x4 = vi("x", [1, 1, 4, 4])
w4 = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w")


def conv(name, **attrs):
    save(name, [helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)], [x4], [vi("y", None)], [w4])


def pool(name, op="MaxPool", **attrs):
    save(name, [helper.make_node(op, ["x"], ["y"], name="p", kernel_shape=[2, 2], **attrs)], [x4], [vi("y", None)])


conv("conv_stride0.onnx", strides=[1, 0])
conv("conv_dilation_neg.onnx", dilations=[-1, 1])
conv("conv_pads_neg.onnx", pads=[0, -1, 0, 0])
conv("conv_valid_pads.onnx", auto_pad="VALID", pads=[1, 1, 1, 1])
pool("maxpool_stride0.onnx", strides=[0, 1])
pool("maxpool_ceil5.onnx", ceil_mode=5)
save("avgpool_kernel0.onnx", [helper.make_node("AveragePool", ["x"], ["y"], name="p", kernel_shape=[2, 0])], [x4],
     [vi("y", None)])


def int64_raw(name, nbytes, op):
    """An int64 initializer of dims [2] whose raw_data holds `nbytes` bytes (16 would be right)."""
    t = TensorProto()
    t.name, t.data_type = "k", TensorProto.INT64
    t.dims.extend([2])
    t.raw_data = bytes(nbytes)
    x = vi("x", [2, 3])
    if op == "Reshape":
        node = helper.make_node("Reshape", ["x", "k"], ["y"], name="r")
    else:
        starts = numpy_helper.from_array(np.array([0, 0], np.int64), "s")
        ends = numpy_helper.from_array(np.array([1, 1], np.int64), "e")
        node = helper.make_node("Slice", ["x", "s", "e", "k"], ["y"], name="r")
        save(name, [node], [x], [vi("y", None)], [t, starts, ends])
        return
    save(name, [node], [x], [vi("y", None)], [t])


int64_raw("reshape_shape_short.onnx", 8, "Reshape")
int64_raw("slice_axes_long.onnx", 24, "Slice")


def gemm(name, **attrs):
    w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
    save(name, [helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", **attrs)], [vi("x", [2, 3])], [vi("y", None)],
         [w])


gemm("gemm_transB2.onnx", transB=2)
gemm("gemm_transA_neg.onnx", transA=-1)
gemm("gemm_alpha_nan.onnx", alpha=float("nan"))


def batchnorm(name, **attrs):
    inits = [numpy_helper.from_array(np.ones(3, np.float32), n) for n in ("s", "b", "m", "v")]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn", **attrs)
    save(name, [node], [vi("x", [2, 3, 4])], [vi("y", None)], inits)


batchnorm("bn_eps_neg.onnx", epsilon=-1.0)
batchnorm("bn_training_mode7.onnx", training_mode=7)

x2 = vi("x", [2])
save("unsorted.onnx", [helper.make_node("Exp", ["b"], ["y"], name="e"), helper.make_node("Neg", ["x"], ["a"], name="n"),
                       helper.make_node("Tanh", ["a"], ["b"], name="t")], [x2], [vi("y", [2])])
save("two_opsets.onnx", [helper.make_node("Relu", ["x"], ["y"], name="r")], [x2], [vi("y", [2])],
     opsets=(("", 15), ("ai.onnx", 13)))
save("optype_newline.onnx", [helper.make_node("Re\nlu", ["x"], ["y"], name="r")], [x2], [vi("y", [2])])
save("name_newline.onnx", [helper.make_node("Relu", ["x"], ["y"], name="a\nb")], [x2], [vi("y", [2])])

# A training model (Gemm -> SoftmaxCrossEntropyLoss) whose float weight's raw_data is 4 bytes short: `cleave plan`
# (no weights read) must refuse it as `cleave ir` does.
w = TensorProto()
w.name, w.data_type = "w", TensorProto.FLOAT
w.dims.extend([3, 4])
w.raw_data = bytes(44)
save("float_raw_short.onnx", [helper.make_node("Gemm", ["x", "w"], ["logits"], name="fc", transB=1),
                              helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], name="sce")],
     [vi("x", [2, 4]), vi("y", [2], TensorProto.INT64)], [vi("loss", [])], [w])
