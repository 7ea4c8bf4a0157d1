#pragma once
// Checks of a model's values that ONNX's checker does not make and its shape inference assumes (a stride of 0 is a
// division by zero inside InferShapes, a short int64 initializer a read past its end). import_onnx runs them all
// before InferShapes, so a hostile model gets one error line instead of a crash.
#include <onnx/onnx_pb.h>

namespace cleave {

/** Rejects a domain imported twice (ai.onnx under "" and "ai.onnx" counts as one domain). */
void check_opset_imports(const onnx::ModelProto &m);

/** Rejects node names, op types' domains and tensor names holding control characters (a newline would break the
 *  one-line-per-entry IR and plan text, and every error message naming them). */
void check_names(const onnx::ModelProto &m);

/** Runs check_inline_data (tensor_proto.h) on every initializer and every tensor-valued attribute (Constant's
 *  value), in the main graph, the training graphs and the branches of their If nodes. */
void check_initializer_data(const onnx::ModelProto &m);

/** Rejects attribute values the ops' schemas allow by type but not by meaning: non-positive strides, dilations and
 *  kernel sizes and negative pads of windowed ops, explicit pads beside an auto_pad other than NOTSET, flags other
 *  than 0/1 (Gemm transA/transB, pooling ceil_mode, BatchNormalization training_mode, ...), negative or non-finite
 *  epsilons and non-finite float attributes; in the main graph and its If nodes' branches. */
void check_attribute_values(const onnx::ModelProto &m);

}  // namespace cleave
