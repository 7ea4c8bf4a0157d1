#pragma once
// Internal to ir/describe: the per-kind description functions and the helpers they share.
#include <functional>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/shape_rules.h"

namespace cleave::describe {

using Descs = std::vector<Description>;

#define CLEAVE_OP(name) Descs describe_##name(const Graph &g, const Op &op);
#include "ir/ops.def"
#undef CLEAVE_OP

/** Shape of input slot i (UserError naming the op if absent). */
const Shape &in_shape(const Graph &g, const Op &op, size_t i);
/** True if output slot i exists. */
inline bool has_out(const Op &op, size_t i) { return op.output(i) != kNoTensor; }
/** A placeholder for an absent output: no body. */
Description absent(const Op &op, int slot, const std::string &name);
/** i, j, k, l, m, n, o, p, then d8, d9, ... */
std::string generic_name(size_t i);
/** Output vars named generically, one per dim of `shape`. */
std::vector<Var> out_vars(Builder &b, const Shape &shape, size_t first_name = 0);
/** Affine indexes of the given vars. */
std::vector<Affine> idx(const std::vector<Var> &vars);
std::vector<Ix> ix(const std::vector<Var> &vars);
/** Index of an operand of shape `in` broadcast (numpy, right-aligned) to the output indexed by `vars`. */
std::vector<Ix> bcast_ix(const std::vector<Var> &vars, const Shape &in);
/** Spatial var names: x; y,x; z,y,x; then s0, s1, ... */
std::vector<std::string> spatial_names(size_t n);
/** k * e, omitting k == 1. */
E scaled(double k, const E &e);
/** a + k * b, omitting the term if k == 0. */
E plus_scaled(const E &a, double k, const E &b);
/** `op "name" (Kind)`. */
std::string op_label(const Op &op);

}  // namespace cleave::describe
