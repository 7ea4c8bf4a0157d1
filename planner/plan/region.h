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

/** Mesh coordinates of the device at `index` in its group (row-major over the mesh: the last axis varies fastest). */
std::vector<int64_t> mesh_coords(const std::vector<int64_t> &mesh, int64_t index);

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

}  // namespace cleave::plan
