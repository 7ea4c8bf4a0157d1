#pragma once
// Region analysis (DESIGN §4, Tofu §4.2): which hyper-rectangle of a tensor a device owns under a sharding, and
// which hyper-rectangle of each operand an op reads when its loop variables are restricted to given ranges.
//
// Boxes are per-dim half-open intervals [begin, end). The operand boxes are computed per index dim from the affine
// index expressions: the exact smallest and largest in-range value the expression reaches over the var ranges
// (windows give their halos, `div` indexes only count exact divisions, out-of-range reads are padding and need no
// data), so they equal the bounding box of every element read, point by point. Indirect (data-dependent) indexes
// read the whole dim. Exactness holds when each var appears in at most one index dim of an access and the vars of a
// dim other than its widest one span at most 65536 points; beyond that the box is a safe over-approximation.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

struct Interval {
  int64_t begin = 0, end = 0;
  bool empty() const { return end <= begin; }
  int64_t size() const { return empty() ? 0 : end - begin; }
  auto operator<=>(const Interval &) const = default;  // (begin, end): a box's order as a key
};

/** One interval per dim. An empty box (some interval empty) holds no element. */
using Box = std::vector<Interval>;

bool box_empty(const Box &b);
/** "[0,8)x[0,16)"; "[]" for rank 0. */
std::string box_str(const Box &b);
/** The whole tensor. */
Box full_box(const Shape &shape);
/** Elements in `b`: the product of its extents (0 if it is empty). */
int64_t box_volume(const Box &b);
/** The box both `a` and `b` cover, dim by dim (empty if they do not meet); `a` and `b` have one rank. */
Box box_intersect(const Box &a, const Box &b);
/** Elements `a` and `b` share: box_volume(box_intersect(a, b)), 0 for boxes of different rank. */
int64_t box_overlap(const Box &a, const Box &b);
/** `s` with its partial axes replicated: what a partial tensor is once reduced (codegen reduces it before anyone
 *  reads it, and an assign copies the reduced value). */
Sharding without_partial(Sharding s);

/** `outer` holds every element of `inner` (one rank). */
bool box_contains(const Box &outer, const Box &inner);

/** Whether the row-major buffer of box `in` of a tensor of `in_shape` holds, in order, the elements of box `out` of
 *  its reshape to `out_shape`: then a shard of a Reshape is its input's buffer as it is (codegen's rule for a split
 *  Reshape, which every planner checks). The non-unit dims of both shapes fall into groups of consecutive dims with
 *  equal products; within each group both boxes must be one contiguous range of the group's row-major flattening,
 *  the same range on both sides. E.g. [T, B, H*D] -> [T, B*H, D] split on B: each group's range is a block. */
bool reshape_boxes_ok(const Box &in, const Shape &in_shape, const Box &out, const Shape &out_shape);

/** Whether assign `a` (an optimizer update's new value -> its param or optimizer state) needs no copy: the update
 *  (SGDUpdate, MomentumUpdate, AdamUpdate) writes its output straight into the destination's memory, which the
 *  runtime's update kernels allow (each element is written after its last read). Holds when the destination is the
 *  update's input that output replaces, no op after the update reads the destination, and source and destination
 *  have the same sharding and dtype. One rule for
 *  codegen (the update's output is the destination's buffer), the cost model and the frontier's cost graph (no
 *  copy, no buffer for the new value). */
bool update_writes_in_place(const Graph &g, const Assign &a, const Sharding &src, const Sharding &dst);

// Box predicates that recognise a collective in "who needs which box of whom" (DESIGN §4): the communication
// derivation (planner/cost/communication.h) decides every all-gather, reduce-scatter and all-to-all by them.

/** `blocks` are two or more, non-empty, of one size, inside `whole`, pairwise disjoint, and cover it. */
bool tiles(const std::vector<Box> &blocks, const Box &whole);

/** `blocks`, in order, are consecutive row-major element ranges of `whole` starting at its first element: a buffer
 *  holding `whole` is the concatenation of buffers holding the blocks (no copies into place). */
bool concatenates(const std::vector<Box> &blocks, const Box &whole);

/** All-to-all: member i owns owned[i] and needs wanted[i]; every owned[i] ∩ wanted[j] is non-empty and of one size,
 *  the owned boxes are pairwise disjoint, and each wanted[j] is covered by its parts. */
bool all_to_all_pattern(const std::vector<Box> &owned, const std::vector<Box> &wanted);

/** Mesh coordinates of the device at `index` in its group (row-major over the mesh: the last axis varies fastest). */
std::vector<int64_t> mesh_coords(const std::vector<int64_t> &mesh, int64_t index);

/** The groups of `devices` (laid out row-major over `mesh`) whose mesh coordinates differ only along `axes`, in order
 *  of their other coordinates, each ordered row-major by its coordinates along `axes`: the communicators of the
 *  product of those axes (one all-reduce of a tensor partial on several axes runs over such a group). */
std::vector<std::vector<int>> axes_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          const std::vector<size_t> &axes);
/** axes_groups over one axis: the communicators of that axis. */
std::vector<std::vector<int>> axis_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          size_t axis);

/** The block [begin, end) of [0, extent) that mesh coordinates `coords` own when the axes listed in `axes` (in mesh
 *  axis order, the first the most significant) split it evenly. Precondition: their product divides extent. */
Interval split_block(int64_t extent, const std::vector<int64_t> &mesh, const std::vector<int> &axes,
                     const std::vector<int64_t> &coords);

/** The box the device at `index` in the sharding's group owns (replicated and partial axes own the whole dim). */
Box shard_region(const Shape &shape, const Sharding &sharding, int64_t index);

/** Per-var ranges of op `config` on the device at `index` of its group, for description `d` (vars split along a
 *  mesh axis get their block; the others, and vars `d` lacks, their whole extent). */
std::vector<Interval> var_ranges(const describe::Description &d, const ParallelConfig &config, int64_t index);

struct OperandRegion {
  int slot = -1;
  std::string name;
  /** Bounding box of the elements read; empty if every access falls in the padding. */
  Box box;
};

struct OpRegion {
  /** The output elements written (bounding box). */
  Box output;
  /** One entry per operand of the description, in slot order. */
  std::vector<OperandRegion> operands;
  /** Some reduction var is restricted to part of its extent: the output holds a partial sum. */
  bool partial = false;
};

/** The regions of description `d` with its vars restricted to `ranges` (one per var; opaque and internal vars always
 *  take their whole extent, since an opaque computation needs all of that dim, unless they are synced: a synced
 *  var's kernel reads only its block and exchanges statistics instead; nor does a synced reduction var make the
 *  output partial). */
OpRegion op_region(const describe::Description &d, const std::vector<Interval> &ranges);

/** What the device at `index` of `config`'s group reads of each input of `op` (indexed by input slot) to compute all
 *  of its present outputs: the hull of every output description's operand box; nullopt for an absent input or one
 *  it reads nothing of. */
std::vector<std::optional<Box>> op_input_regions(const Graph &g, const Op &op, const ParallelConfig &config,
                                                 int64_t index);
/** op_input_regions over descriptions computed once (descs = describe::describe(g, op)). */
std::vector<std::optional<Box>> op_input_regions(const Op &op, const std::vector<describe::Description> &descs,
                                                 const ParallelConfig &config, int64_t index);

/** Whether the kind's kernel, run on a shard whose summed var is split, yields the partial sum of the whole result
 *  of `dtype`: only these kinds may have partial outputs (codegen lowers them; the searches propose no others), and
 *  only floating ones (the collectives sum rt::real). */
bool partial_ok(OpKind kind, DType dtype);

}  // namespace cleave::plan
