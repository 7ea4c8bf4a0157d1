#pragma once
// Internal to the reference interpreter: the calling convention of kernels and the helpers they share.
//
// run_op resolves an op's operands into a KernelArgs: present inputs point at their values, present outputs are
// pre-allocated (dtype and shape from the graph's output tensors, data zero-filled). A kernel fills the output data
// and CLEAVE_CHECKs that the shapes it computes agree with the pre-allocated ones; run_op then rounds f32 outputs.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/interp/interpreter.h"

namespace cleave::interp {

struct KernelArgs {
  const Graph &graph;
  const Op &op;
  const Context &ctx;
  /** One slot per op.inputs entry; nullptr where the operand is absent. */
  std::vector<const Value *> ins;
  /** One slot per op.outputs entry; nullptr where the output is absent. */
  std::vector<Value *> outs;

  /** `op "name" (Kind)`: the prefix of every error about this op. */
  std::string label() const;
  /** Input i; throws UserError naming the op if it is absent. */
  const Value &in(size_t i) const;
  bool has_in(size_t i) const { return i < ins.size() && ins[i] != nullptr; }
  /** Output i; throws UserError naming the op if it is absent. */
  Value &out(size_t i) const;
  bool has_out(size_t i) const { return i < outs.size() && outs[i] != nullptr; }
  /** CLEAVE_CHECKs that output i (when present) has `shape`: the graph was shape-checked, so a mismatch is a bug. */
  void expect_out_shape(size_t i, const Shape &shape) const;
};

using Kernel = void (*)(const KernelArgs &);

// ---- shared helpers (kernel_util.cpp) ----

/** Row-major strides of `shape`. */
std::vector<int64_t> strides_of(const Shape &shape);
/** Numpy broadcast of two shapes; UserError naming the op if incompatible. */
Shape broadcast_shape(const KernelArgs &k, const Shape &a, const Shape &b);
/** For each flat index of `out_shape`, the flat index of the element of `in_shape` that broadcasts to it
 *  (in_shape right-aligned, size-1 dims repeated). */
std::vector<int64_t> broadcast_index_map(const Shape &in_shape, const Shape &out_shape);
/** Multi-index of flat index `flat` in `shape`. */
void unravel(int64_t flat, const Shape &shape, std::vector<int64_t> &idx);
/** Normalises a possibly negative axis against `rank`; UserError naming the op if out of range. */
int64_t norm_axis(const KernelArgs &k, int64_t axis, int64_t rank);
/** Attribute `key` as ints, or `n` copies of `def` if absent. */
std::vector<int64_t> ints_or(const Op &op, const std::string &key, size_t n, int64_t def);
/** Y = f(X), elementwise. */
template <typename F>
void unary(const KernelArgs &k, F f) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  Value &y = k.out(0);
  for (size_t i = 0; i < y.data.size(); ++i) y.data[i] = f(x.data[i]);
}
/** dX = f(dY, Z) for gradient ops whose second operand Z (the forward's input or output) has dY's shape. */
template <typename F>
void unary_grad(const KernelArgs &k, F f) {
  const Value &dy = k.in(0);
  const Value &z = k.in(1);
  CLEAVE_CHECK(dy.shape == z.shape, k.label(), ": ", shape_str(dy.shape), " vs ", shape_str(z.shape));
  k.expect_out_shape(0, dy.shape);
  Value &dx = k.out(0);
  for (size_t i = 0; i < dx.data.size(); ++i) dx.data[i] = f(dy.data[i], z.data[i]);
}
/** Class index of a label as an integer (labels are stored as doubles; exact below 2^53). */
inline int64_t as_index(double v) { return static_cast<int64_t>(v); }
/** An index `raw` into a dim of `dim` elements (Gather, GatherElements, ScatterElements, GatherND), made non-negative
 *  as ONNX counts negative ones from the end; UserError naming the op if out of [-dim, dim). */
inline int64_t wrapped_index(const KernelArgs &k, double raw, int64_t dim) {
  int64_t i = as_index(raw);
  if (i < -dim || i >= dim) CLEAVE_USER_ERROR(k.label(), ": index ", i, " is out of range [", -dim, ", ", dim, ")");
  return i < 0 ? i + dim : i;
}

// ---- kernels, one per op kind, grouped by family ----
#define CLEAVE_OP(name) void kernel_##name(const KernelArgs &k);
#include "ir/ops.def"
#undef CLEAVE_OP

}  // namespace cleave::interp
