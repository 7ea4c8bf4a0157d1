// Descriptions of ArgMax/ArgMin, TopKIndices, CumSum, Mod and OneHot. ArgMax's axis is consumed by an opaque function
// (a position is not a sum or a max of values). CumSum is exact, a masked sum over the axis, but both of its axis vars are opaque:
// the kernel scans a whole line, and a split of the summed var would need a prefix exchange, not a plain partial sum.
// Mod is an opaque elementwise function (C's fmod has no expression here); OneHot is exact, its depth axis whole.
#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

Descs arg_extreme(const Graph &g, const Op &op, const std::string &fname) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0);
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  bool keep = op.attr_int("keepdims", 1) != 0;
  std::vector<Var> v(xs.size());
  for (size_t d = 0; d < xs.size(); ++d)
    v[d] = d == axis ? b.internal(generic_name(d), xs[d]) : b.out(generic_name(d), xs[d]);
  std::vector<Affine> out;
  for (size_t d = 0; d < xs.size(); ++d)
    if (d != axis) out.emplace_back(v[d]);
    else if (keep) out.emplace_back(int64_t{0});
  std::string name = fname + "_" + generic_name(axis) + (op.attr_int("select_last_index", 0) ? "_last" : "");
  Operand x = b.in(0, "X");
  // One comparison per element of the line, counted once per output point (post).
  return {std::move(b).build(out, Reduce::none, x(ix(v)), opaque(name, {reduced()}, xs[axis]))};
}

}  // namespace

Descs describe_ArgMax(const Graph &g, const Op &op) { return arg_extreme(g, op, "argmax"); }
Descs describe_ArgMin(const Graph &g, const Op &op) { return arg_extreme(g, op, "argmin"); }

// TopKIndices reads whole lines, like ArgMax, and its k output positions along the axis are opaque too: position r is
// the r-th of a sort, not a function of the input position r.
Descs describe_TopKIndices(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "I");
  const Shape &xs = in_shape(g, op, 0);
  auto axis = static_cast<size_t>(op.attr_int("axis"));
  int64_t k = op.attr_int("k");
  std::vector<Var> v(xs.size());
  std::vector<Affine> out;
  for (size_t d = 0; d < xs.size(); ++d) {
    v[d] = d == axis ? b.internal(generic_name(d), xs[d]) : b.out(generic_name(d), xs[d]);
    out.emplace_back(d == axis ? b.out("r", k, true) : v[d]);
  }
  std::string name = std::string(op.attr_int("largest", 1) ? "top_k_" : "bottom_k_") + generic_name(axis);
  Operand x = b.in(0, "X");
  // One comparison per pair of the line's elements, counted once per output point (post).
  return {std::move(b).build(out, Reduce::none, x(ix(v)), opaque(name, {reduced()}, xs[axis]))};
}

Descs describe_CumSum(const Graph &g, const Op &op) {
  // Y[.., i, ..] = sum(j) X[.., j, ..] * [j <= i]  ([j < i] exclusive; i and j swap roles in reverse).
  Builder b(g, op, 0, "Y");
  const Shape &s = b.out_shape();
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  bool exclusive = op.attr_int("exclusive", 0) != 0, reverse = op.attr_int("reverse", 0) != 0;
  std::vector<Var> v;
  for (size_t d = 0; d < s.size(); ++d) v.push_back(b.out(generic_name(d), s[d], d == axis));
  Var j = b.sum("j", s[axis], true);
  std::vector<Ix> xi = ix(v);
  xi[axis] = j;
  Affine gap = reverse ? Affine(j) - Affine(v[axis]) : Affine(v[axis]) - Affine(j);  // >= 0 where j is summed
  E mask = step(value_of(gap) + E(exclusive ? 0.0 : 0.5));
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::sum, x(xi) * mask)};
}

Descs describe_Mod(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "C");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand a = b.in(0, "A"), bb = b.in(1, "B");
  const char *name = op.attr_int("fmod", 0) ? "fmod" : "mod";
  return {std::move(b).build(idx(v), Reduce::none, opaque(name, {a(bcast_ix(v, a.shape())), bb(bcast_ix(v, bb.shape()))}))};
}

Descs describe_OneHot(const Graph &g, const Op &op) {
  // Y[.., d, ..] = values[1] if indices[..] is d or d - depth, else values[0].
  Builder b(g, op, 0, "Y");
  const Shape &s = b.out_shape();
  auto axis = static_cast<size_t>(op.attr_int("axis"));
  int64_t depth = op.attr_int("depth");
  // The depth var is opaque: the kernel writes whole rows of it (rt::one_hot has no offset along depth).
  std::vector<Var> v;
  for (size_t d = 0; d < s.size(); ++d) v.push_back(b.out(generic_name(d), s[d], d == axis));
  std::vector<Ix> ii;
  for (size_t d = 0; d < s.size(); ++d)
    if (d != axis) ii.emplace_back(v[d]);
  Operand ind = b.in(0, "indices"), values = b.in(1, "values");
  E i = ind(ii);
  E hit = eq(i, value_of(Affine(v[axis]))) + eq(i, value_of(Affine(v[axis]) - Affine(depth)));
  return {std::move(b).build(idx(v), Reduce::none, where(hit, values({1}), values({0})))};
}

}  // namespace cleave::describe
