#!/usr/bin/python3
"""Writes the malformed models of tests/cli/bad_input.sh into DIR (argv[1]).

Each model is a small, otherwise valid training model (Gemm -> SoftmaxCrossEntropyLoss) broken in exactly one way.
Built with onnx.helper without running the checker, so the defects reach Cleave."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def base(nodes=None, inputs=None, outputs=None, inits=None, name="m"):
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    nodes = nodes if nodes is not None else [
        helper.make_node("Gemm", ["x", "w"], ["logits"], name="fc", transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], name="sce"),
    ]
    inputs = inputs if inputs is not None else [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
        helper.make_tensor_value_info("y", TensorProto.INT64, [2]),
    ]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits if inits is not None else [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


def save(model, name):
    with open(os.path.join(out, name), "wb") as f:
        f.write(model.SerializeToString())


good = base()
save(good, "good.onnx")
data = good.SerializeToString()
with open(os.path.join(out, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) // 2])
with open(os.path.join(out, "garbage.onnx"), "wb") as f:
    f.write(b"this is not a protobuf \xff\xfe\x00\x01" * 8)

m = base()
m.graph.node.insert(1, helper.make_node("Foo", ["logits"], ["foo_out"], name="mystery", domain="com.example"))
m.graph.node.insert(1, helper.make_node("Unique", ["logits"], ["uq_out"], name="uniq"))
m.opset_import.append(helper.make_opsetid("com.example", 1))
save(m, "unknown_op.onnx")

# The model's function NeedsUnique has a body, but the body needs Unique, which Cleave cannot translate: the node stays
# and is listed, with why, beside an op that has no body at all.
m = base()
m.functions.append(helper.make_function("com.example", "NeedsUnique", ["a"], ["b"],
                                        [helper.make_node("Unique", ["a"], ["b"])], [helper.make_opsetid("", 15)]))
m.opset_import.append(helper.make_opsetid("com.example", 1))
m.graph.node.insert(1, helper.make_node("NeedsUnique", ["x"], ["wrapped"], name="wrap", domain="com.example"))
m.graph.node.insert(1, helper.make_node("Unique", ["logits"], ["uq_out"], name="uniq"))
save(m, "unexpandable_function.onnx")

m = base()
m.graph.node[0].attribute[0].CopyFrom(helper.make_attribute("transB", 1.0))
save(m, "wrong_attr_type.onnx")

m = base(nodes=[
    helper.make_node("Concat", ["x", "x"], ["xx"], name="cat"),
    helper.make_node("ReduceSum", ["xx"], ["loss"], name="sum", keepdims=0),
])
save(m, "missing_attr.onnx")


def external(name, location, length=None):
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([3, 4])
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    if length is not None:
        entry = w.external_data.add()
        entry.key, entry.value = "length", str(length)
    save(base(inits=[w]), name)


with open(os.path.join(os.path.dirname(os.path.abspath(out)), "outside.bin"), "wb") as f:
    f.write(np.ones(12, np.float32).tobytes())
external("external_outside.onnx", "../outside.bin")
external("external_missing.onnx", "missing.bin")
with open(os.path.join(out, "short.bin"), "wb") as f:
    f.write(np.ones(5, np.float32).tobytes())
external("external_short.onnx", "short.bin")

m = base(inputs=[
    helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
    helper.make_tensor_value_info("y", TensorProto.INT64, ["N"]),
])
save(m, "symbolic_batch.onnx")

m = base(nodes=[helper.make_node("Gemm", ["x", "w"], ["logits"], name="fc", transB=1)],
         outputs=[helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 3])])
save(m, "nonscalar_loss.onnx")

m = base(nodes=[
    helper.make_node("Gemm", ["x", "w"], ["logits"], name="fc", transB=1),
    helper.make_node("Relu", ["x"], ["logits"], name="relu"),
    helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], name="sce"),
])
save(m, "duplicate_name.onnx")

m = base(nodes=[
    helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
    helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
    helper.make_node("ReduceSum", ["b"], ["loss"], name="sum", keepdims=0),
])
save(m, "loop.onnx")

m = base(nodes=[
    helper.make_node("Relu", ["x"], ["r"], name="relu"),
    helper.make_node("ReduceSum", ["r"], ["loss"], name="sum", keepdims=0),
], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [4294967296, 4294967296])])
save(m, "huge.onnx")

# Supported ops with an attribute value Cleave does not implement: exit 2, one line naming the node and the op.
for name, node in (("lpnorm_p3", helper.make_node("LpNormalization", ["logits"], ["normed"], name="norm3", p=3)),
                   ("depth_to_space_mode", helper.make_node("DepthToSpace", ["x4"], ["moved"], name="d2s",
                                                            blocksize=2, mode="XYZ")),
                   ("gru_clip", helper.make_node("GRU", ["x4", "gru_w", "gru_r"], ["gru_y"], name="gru", hidden_size=2,
                                                 clip=1.0))):
    m = base()
    if name == "depth_to_space_mode":
        m.graph.node.insert(0, helper.make_node("Reshape", ["x", "shape4"], ["x4"], name="to4d"))
        m.graph.initializer.append(numpy_helper.from_array(np.array([2, 4, 1, 1], np.int64), "shape4"))
    if name == "gru_clip":  # X [T=2, B=1, I=4]
        m.graph.node.insert(0, helper.make_node("Reshape", ["x", "shape3"], ["x4"], name="to3d"))
        m.graph.initializer.extend([numpy_helper.from_array(np.array([2, 1, 4], np.int64), "shape3"),
                                    numpy_helper.from_array(np.zeros((1, 6, 4), np.float32), "gru_w"),
                                    numpy_helper.from_array(np.zeros((1, 6, 2), np.float32), "gru_r")])
    m.graph.node.insert(len(m.graph.node) - 1, node)
    save(m, name + ".onnx")

# A malformed attribute of a supported op: exit 1, one line naming the node.
m = base()
m.graph.node.insert(1, helper.make_node("GatherElements", ["logits", "gidx"], ["gathered"], name="gath", axis=5))
m.graph.initializer.append(numpy_helper.from_array(np.zeros((2, 3), np.int64), "gidx"))
save(m, "gather_elements_axis.onnx")
