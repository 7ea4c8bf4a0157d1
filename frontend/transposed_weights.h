#pragma once
// A Transpose that swaps the last two dims and feeds only MatMuls costs a copy per step, and its gradient another:
// torch exports nn.Linear on inputs of rank > 2 as Transpose(W) + MatMul, and attention's scores as
// MatMul(q, Transpose(k)). Cleave imports neither Transpose: a 2-D weight's MatMul becomes a Gemm by W with transB
// where its rows may fold, any other MatMul reads the operand itself with MatMul's transA / transB.
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

namespace cleave {

/** The Transpose nodes XT = Transpose(X) of `g` that swap X's last two dims (perm [0, ..., r-1, r-2] with r >= 2; a
 *  2-D initializer's may omit perm) whose result is no graph output, is read by MatMul nodes only and by no subgraph
 *  or training-info graph of `m` (those see `g`'s tensors): node index -> X. The importer defers such a node
 *  (Importer::pending_transposes): it is never emitted. */
std::map<int, std::string> find_transposed_operands(const onnx::ModelProto &m, const onnx::GraphProto &g);

}  // namespace cleave
