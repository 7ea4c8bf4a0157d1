#pragma once
// torch's attention projects time-major activations: its out-projection reshapes [T, B*H, d] (or [T, B, E]) to rows
// [T*B, E], multiplies them by the weight (Gemm) and reshapes the result back to [T, B, F]. Those rows interleave the
// samples, so a data plan, which splits the batch, cannot split them: it would gather every layer's rows and split the
// Gemm by time instead, forward and backward. Cleave imports such a chain as a MatMul on [T, B, E], whose batch stays a
// dim of its own.
#include <map>

#include <onnx/onnx_pb.h>

namespace cleave {

class Importer;
struct NodeCtx;

/** Reshape X to rows, Gemm(rows, W, bias) and Reshape of its result: node indices. */
struct RowGemm {
  int to_rows = -1;
  int gemm = -1;
  int from_rows = -1;
};

/** The chains Reshape -> Gemm -> Reshape of `g` in which each result is read only by the next node and is no graph
 *  output, the Gemm's W is a 2-D float initializer, its bias absent or a 1-D initializer, transA 0 and alpha, beta 1:
 *  by the index of the first Reshape. Whether a chain is rewritten is decided on the IR's shapes (the importer). */
std::map<int, RowGemm> find_row_gemms(const onnx::GraphProto &g);

/** Whether the rows of X (X [..., E] reshaped to [R, E]) would interleave samples: X is a defined, non-constant tensor
 *  whose batch is in a dim after the first (ir/describe/batch_dims.h). */
bool rows_interleave_samples(Importer &im, const std::string &x);

/** Emits chain c as X' = Reshape(X, [s..., E]), Y = MatMul(X', W) with the Gemm's transB (+ bias), where [s..., F] is
 *  the last Reshape's shape, defining the last Reshape's output. `first`, `gemm` and `last` are the three nodes'
 *  contexts; every input of the chain is defined. False, emitting nothing, where the shapes do not fit ([s...] does
 *  not multiply to the rows, or the last dim is not W's output dim). */
bool translate_row_gemm(Importer &im, const NodeCtx &first, const NodeCtx &gemm, const NodeCtx &last);

}  // namespace cleave
