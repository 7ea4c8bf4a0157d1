// Descriptions of the mask and selection kinds torch exports for attention masks and clamps: Where, Cast, the
// comparisons and boolean logic, Reciprocal, variadic Max/Min, ReduceMax/ReduceMin, and Pad.
// Booleans are 0/1 values in descriptions, so logic is arithmetic on them (And = a*b, Or = a+b-ab, ...).
#include <algorithm>
#include <functional>

#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

Descs unary(const Graph &g, const Op &op, const std::function<E(const E &)> &f) {
  Builder b(g, op, 0, "Y");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, f(x(ix(v))))};
}

Descs binary(const Graph &g, const Op &op, const std::function<E(const E &, const E &)> &f) {
  Builder b(g, op, 0, "C");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand a = b.in(0, "A"), bb = b.in(1, "B");
  return {std::move(b).build(idx(v), Reduce::none, f(a(bcast_ix(v, a.shape())), bb(bcast_ix(v, bb.shape()))))};
}

/** Max (pick_greater) or Min over every input: a chain of selections, each input broadcast to the output. */
Descs variadic_select(const Graph &g, const Op &op, bool pick_greater) {
  Builder b(g, op, 0, "Y");
  std::vector<Var> v = out_vars(b, b.out_shape());
  E m;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Operand x = b.in(static_cast<int>(i), "X" + std::to_string(i));
    E xi = x(bcast_ix(v, x.shape()));
    m = i == 0 ? xi : where(step(pick_greater ? xi - m : m - xi), xi, m);
  }
  return {std::move(b).build(idx(v), Reduce::none, m)};
}

/** ReduceMax / ReduceMin (as -max(-x)): the reduced axes are max-reduction vars, which are never split. */
Descs reduce_extreme(const Graph &g, const Op &op, bool max) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0);
  std::vector<int64_t> axes = op.attr_ints("axes");
  bool keep = op.attr_int("keepdims", 1) != 0;
  auto is_reduced = [&](size_t d) { return std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end(); };
  std::vector<Var> v(xs.size());
  for (size_t d = 0; d < xs.size(); ++d)
    if (!is_reduced(d)) v[d] = b.out(generic_name(d), xs[d]);
  for (size_t d = 0; d < xs.size(); ++d)
    if (is_reduced(d)) v[d] = b.sum(generic_name(d), xs[d]);
  std::vector<Affine> out;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (!is_reduced(d)) out.emplace_back(v[d]);
    else if (keep) out.emplace_back(int64_t{0});
  }
  Operand x = b.in(0, "X");
  if (max) return {std::move(b).build(out, Reduce::max, x(ix(v)))};
  return {std::move(b).build(out, Reduce::max, -x(ix(v)), -reduced())};
}

}  // namespace

Descs describe_Reciprocal(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return E(1.0) / x; });
}

Descs describe_Where(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Z");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand c = b.in(0, "C"), x = b.in(1, "X"), y = b.in(2, "Y");
  return {std::move(b).build(idx(v), Reduce::none,
                             where(c(bcast_ix(v, c.shape())), x(bcast_ix(v, x.shape())), y(bcast_ix(v, y.shape()))))};
}

Descs describe_Cast(const Graph &g, const Op &op) {
  DType from = g.tensor(op.input(0)).dtype;
  std::optional<DType> to = parse_dtype(op.attr_string("to"));
  if (!to) CLEAVE_USER_ERROR(op_label(op), ": attribute to \"", op.attr_string("to"), "\" is not a dtype");
  // Float to integer truncates toward zero, which index expressions cannot say; every other cast keeps the value
  // (to bool: x != 0), up to the rounding of the target float type.
  if (is_float(from) && !is_float(*to) && *to != DType::boolean)
    return unary(g, op, [](const E &x) { return opaque("trunc", {x}, 1); });
  if (*to == DType::boolean) return unary(g, op, [](const E &x) { return E(1.0) - eq(x, E(0.0)); });
  return unary(g, op, [](const E &x) { return x; });
}

Descs describe_Equal(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return eq(a, b); });
}
Descs describe_Less(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return step(b - a); });
}
Descs describe_Greater(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return step(a - b); });
}
Descs describe_LessOrEqual(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return E(1.0) - step(a - b); });
}
Descs describe_GreaterOrEqual(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return E(1.0) - step(b - a); });
}
Descs describe_Not(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return E(1.0) - x; });
}
Descs describe_And(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return a * b; });
}
Descs describe_Or(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return a + b - a * b; });
}
Descs describe_Xor(const Graph &g, const Op &op) {
  return binary(g, op, [](const E &a, const E &b) { return a + b - E(2.0) * a * b; });
}
Descs describe_Max(const Graph &g, const Op &op) { return variadic_select(g, op, true); }
Descs describe_Min(const Graph &g, const Op &op) { return variadic_select(g, op, false); }
Descs describe_ReduceMax(const Graph &g, const Op &op) { return reduce_extreme(g, op, true); }
Descs describe_ReduceMin(const Graph &g, const Op &op) { return reduce_extreme(g, op, false); }

Descs describe_Pad(const Graph &g, const Op &op) {
  // Y[i] = X[i - pad_begin]: reads outside X give the constant, negative pads crop. Edge and reflect modes read a
  // clamped or mirrored index instead, which is not affine: their padded dims are opaque (never split) and the body
  // an opaque function of the shifted access, whose range still covers the whole of X along those dims.
  std::vector<int64_t> pads = op.attr_ints("pads");
  std::string mode = op.has_attr("mode") ? op.attr_string("mode") : "constant";
  Builder b(g, op, 0, "Y");
  const Shape &ys = b.out_shape();
  size_t n = ys.size();
  std::vector<Var> v;
  for (size_t d = 0; d < n; ++d) {
    bool padded = mode != "constant" && (pads[d] > 0 || pads[d + n] > 0);
    v.push_back(b.out(generic_name(d), ys[d], padded));
  }
  std::vector<Ix> xi;
  for (size_t d = 0; d < n; ++d) xi.emplace_back(Affine(v[d]) - Affine(pads[d]));
  Operand x = b.in(0, "X");
  if (mode != "constant") return {std::move(b).build(idx(v), Reduce::none, opaque("pad_" + mode, {x(xi)}, 0))};
  return {std::move(b).build(idx(v), Reduce::none, x(xi, op.attr_float("value", 0.0)))};
}

}  // namespace cleave::describe
