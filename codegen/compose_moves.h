#pragma once
// Copies of copies composed into one (a pass over a lowered rank program, before its memory plan).
//
// torch's attention cuts q, k and v out of one projection (a region copy of a box) and then transposes each of them
// ([T, B*H, d] -> [B*H, T, d]): two passes over every element, and a buffer in between. A copy whose source is a
// buffer that one earlier copy alone wrote, and that nothing else reads, reads that copy's source directly through the
// composed strided view (rt::view_copy); the earlier copy and its buffer go.
#include <optional>

#include "codegen/lower.h"

namespace cleave::codegen {

/** The view through which `b` reads its elements when its source is the row-major result of view `a` (b.in_shape
 *  has as many elements as a.shape): dims split into the common factors of a's and b's, then b's box and permutation.
 *  nullopt when b has no in_shape, there are no elements, the sizes share no common factors (6 against 4), or b's box
 *  cuts a dim that is split. */
std::optional<StridedView> compose_view(const StridedView &a, const Move &b);

/** A whole row-major buffer of `shape`. */
StridedView contiguous(const Shape &shape);

/** The Move of a region copy of `extent` at `start` out of a whole buffer of `in_shape`, permuted by `perm` (empty:
 *  none), into the whole dst. */
Move box_move(int src, int dst, int elem_size, const Shape &in_shape, const Shape &start, const Shape &extent,
              std::vector<int64_t> perm = {});

/** Replaces each Move of prog's step that reads a buffer one earlier Move alone wrote, by one rt::view_copy from that
 *  Move's source; the earlier Move goes. Only when nothing else touches the buffer in between, the source is not
 *  persistent and nothing between the two touches it but other Moves reading it, and neither statement has a
 *  validation variant (Instr::val_code). */
void compose_moves(RankProgram &prog);

}  // namespace cleave::codegen
