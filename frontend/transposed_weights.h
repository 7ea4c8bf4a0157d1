#pragma once
// torch exports nn.Linear on inputs of rank > 2 as Transpose(W) + MatMul. Cleave multiplies by W itself (Gemm with
// transB), so neither the forward pass nor the gradient transposes the weight every step.
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

namespace cleave {

/** The Transpose nodes WT = Transpose(W, perm [1, 0]) of a 2-D float initializer W whose result is not a graph output
 *  and feeds only MatMul nodes, as their right operand: node index -> W. The importer defers such a node
 *  (Importer::pending_transposes) and emits it only if a MatMul cannot use Gemm instead (a 1-D left operand). */
std::map<int, std::string> find_transposed_weights(const onnx::GraphProto &g);

}  // namespace cleave
