#pragma once
// Loading and validating an ONNX model before translation: parse, opset range, onnx's checker, the list of
// unsupported nodes, static input shapes, ONNX shape inference.
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "ir/shape_rules.h"

namespace cleave {

/** Parses `path`; throws UserError naming the file if it is missing, unreadable or not a ModelProto. */
onnx::ModelProto load_model(const std::string &path);

/** The opset of `domain` ("" = ai.onnx) the model imports, or -1. */
int64_t model_opset(const onnx::ModelProto &m, const std::string &domain);

/** Rejects ai.onnx opsets outside 13..17 (exit code 2). Opsets 7..12 are accepted when every ai.onnx node is an op
 *  whose semantics have not changed since opset 7 (the ONNX gradient tests are written at opset 12). */
void check_opsets(const onnx::ModelProto &m);

/** Checks every main-graph node's attributes (and those of its If nodes' branches) against its ONNX schema (types,
 *  required ones), with messages naming node, op and attribute. Runs before onnx's checker, whose messages are
 *  terser. */
void check_node_attributes(const onnx::ModelProto &m);

/** onnx's checker; its exceptions become one-line UserErrors. External data is checked (not read) first. */
void run_onnx_checker(const onnx::ModelProto &m, const std::string &model_dir);

/** Throws one UserError (exit code 2) listing every node, in the main graph and in training algorithms, that has no
 *  translator; `unexpanded` (expand_functions) says why a main-graph node's function body did not replace it. */
void check_nodes_supported(const onnx::ModelProto &m, const std::string &path,
                           const std::map<int, std::string> &unexpanded = {});

/** Gives graph inputs static shapes and returns each one's sample axis: its symbolic dimension (which becomes
 *  opts.batch), or the axis opts.batch_axes names, else 0. A second symbolic dimension, or a missing one, is an error
 *  naming the input. Modifies the model's input types in place (for shape inference). */
std::map<std::string, int> fix_input_shapes(onnx::ModelProto &m, const ImportOptions &opts);

/** Runs ONNX shape inference (strict) and returns the statically known types of every value it inferred. */
std::map<std::string, TensorType> infer_onnx_types(onnx::ModelProto &m);

/** `node "n" (Op, opset V)`, with the domain named when it is not ai.onnx. */
std::string node_label(const std::string &name, const std::string &op_type, const std::string &domain, int64_t opset);

}  // namespace cleave
