#pragma once
// Transposes moved next to the copies they compose with, in a forward graph before autodiff.
//
// torch's batch-first attention (nn.MultiheadAttention, nn.TransformerEncoderLayer with batch_first=True) transposes
// its input [B, T, E] to [T, B, E] before the in-projection, and its result back after the out-projection. Between
// such a transpose and the copies around the attention lie only ops that treat every row alike: a Linear's MatMul
// by a 2-D weight, its bias Add. Moved past them, the input's transpose meets the Slices that cut q, k and v out of
// the projection, and the output's the transpose and reshape that gather the heads; codegen then composes each with
// those copies (codegen/compose_moves.h), and the step passes over the rows once where it passed twice. The values
// do not change: each moved op computes the same numbers for the same rows, in another order of rows.
#include "ir/graph.h"

namespace cleave {

/** Rewrites forward graph `g` (no training ops yet). A Transpose whose perm keeps the last axis last moves:
 *  - down, when its result runs through a chain of row-wise ops, each result read by the next op alone, to a result
 *    that only Slices read: the chain reads the transpose's input, and each Slice (its axes renumbered) is followed
 *    by a transpose of its own;
 *  - up, when its input comes out of a chain of row-wise ops, each result read by the next op alone, that starts at
 *    the result of a copy (Reshape, Transpose, Slice or Concat) read by the chain alone:
 *    the transpose follows that copy and the chain computes the transposed rows.
 *  Row-wise, of one operand of rank 2 or more: MatMul of it by a 2-D matrix (no transA); Add, Sub, Mul or Div of it
 *  and an operand whose dims but the last are 1 (a scalar, a bias row); Relu, Gelu, Sigmoid, Tanh, Erf or Neg of it.
 *  Graph outputs and the loss stay where they are. Returns the number of transposes moved. */
int move_transposes(Graph &g);

}  // namespace cleave
