// Shape and dtype rules of every op kind (ONNX semantics at opsets 13-17 for forward kinds, ops.def's operand
// conventions for backward and update kinds).
#include "ir/shape_rules.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace cleave {
namespace {

/** What a rule sees: the op, its input types and the declared output types. */
struct RuleArgs {
  const Graph &g;
  const Op &op;

  std::string label() const { return detail::concat("op \"", op.name, "\" (", op_kind_name(op.kind), ")"); }
  [[noreturn]] void fail(const std::string &msg) const { throw UserError(label() + ": " + msg); }

  bool has_in(size_t i) const { return op.input(i) != kNoTensor; }
  const Tensor &in(size_t i, const char *name) const {
    if (!has_in(i)) fail(detail::concat("missing input ", name));
    return g.tensor(op.input(i));
  }
  TensorType type(size_t i, const char *name) const {
    const Tensor &t = in(i, name);
    return {t.dtype, t.shape};
  }
  const Tensor &declared(size_t i, const char *name) const {
    if (op.output(i) == kNoTensor) fail(detail::concat("output ", name, " is absent; its shape cannot be inferred"));
    return g.tensor(op.output(i));
  }
  void need_inputs(size_t lo, size_t hi) const {
    if (op.inputs.size() < lo || op.inputs.size() > hi)
      fail(detail::concat("expects ", lo == hi ? std::to_string(lo) : detail::concat(lo, " to ", hi), " inputs, got ",
                          op.inputs.size()));
  }
  void need_float(const TensorType &t, const char *name) const {
    if (!is_float(t.dtype)) fail(detail::concat(name, " must be a float tensor, got ", dtype_name(t.dtype)));
  }
  void need_int(const TensorType &t, const char *name) const {
    if (t.dtype != DType::i64 && t.dtype != DType::i32)
      fail(detail::concat(name, " must be an integer tensor, got ", dtype_name(t.dtype)));
  }
  void need_same_shape(const TensorType &a, const char *an, const TensorType &b, const char *bn) const {
    if (a.shape != b.shape)
      fail(detail::concat(an, " ", shape_str(a.shape), " and ", bn, " ", shape_str(b.shape), " differ in shape"));
  }
  void need_rank_at_least(const TensorType &t, const char *name, size_t r) const {
    if (t.shape.size() < r) fail(detail::concat(name, " must have rank >= ", r, ", got ", shape_str(t.shape)));
  }
  int64_t axis(const std::string &key, size_t rank, int64_t def = 0) const {
    int64_t a = op.attr_int(key, def);
    if (a < 0 || a >= static_cast<int64_t>(rank))
      fail(detail::concat(key, " ", a, " out of range for rank ", rank));
    return a;
  }
  /** `n` copies of t (one per output slot). */
  std::vector<TensorType> same(const TensorType &t) const { return std::vector<TensorType>(std::max<size_t>(op.outputs.size(), 1), t); }
};

using Types = std::vector<TensorType>;

Types unary(const RuleArgs &r) {
  r.need_inputs(1, 1);
  return {r.type(0, "X")};
}

Types binary_broadcast(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType a = r.type(0, "A"), b = r.type(1, "B");
  if (a.dtype != b.dtype && r.op.kind != OpKind::Pow)
    r.fail(detail::concat("A (", dtype_name(a.dtype), ") and B (", dtype_name(b.dtype), ") differ in dtype"));
  return {{a.dtype, broadcast_shapes(a.shape, b.shape, r.label())}};
}

/** dX of an elementwise gradient (dY, X-or-Y) -> dX. */
Types elementwise_grad(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X");
  r.need_same_shape(dy, "dY", x, "X");
  return {dy};
}

Types rule_Gemm(const RuleArgs &r) {
  r.need_inputs(2, 3);
  TensorType a = r.type(0, "A"), b = r.type(1, "B");
  bool ta = r.op.attr_int("transA", 0) != 0, tb = r.op.attr_int("transB", 0) != 0;
  if (ta && !tb && !r.has_in(2) && a.shape.size() > 2) {
    // Rows in their layout (ops.def): every leading dim is summed, so A and B share them.
    if (b.shape.size() != a.shape.size() || !std::equal(a.shape.begin(), a.shape.end() - 1, b.shape.begin()))
      r.fail(detail::concat("A ", shape_str(a.shape), " and B ", shape_str(b.shape), " differ in their leading dims"));
    return {{a.dtype, Shape{a.shape.back(), b.shape.back()}}};
  }
  if (a.shape.size() != 2 || b.shape.size() != 2)
    r.fail(detail::concat("A and B must be 2-D, got ", shape_str(a.shape), " and ", shape_str(b.shape)));
  int64_t m = ta ? a.shape[1] : a.shape[0], ka = ta ? a.shape[0] : a.shape[1];
  int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (ka != kb)
    r.fail(detail::concat("inner dims differ: A ", shape_str(a.shape), (ta ? " (transposed)" : ""), " and B ",
                          shape_str(b.shape), (tb ? " (transposed)" : "")));
  Shape y{m, n};
  if (r.has_in(2)) {
    TensorType c = r.type(2, "C");
    bool ok = c.shape.size() <= 2;
    for (size_t i = 0; ok && i < c.shape.size(); ++i) {
      int64_t d = c.shape[c.shape.size() - 1 - i];
      ok = d == 1 || d == y[1 - i];
    }
    if (!ok)
      r.fail(detail::concat("C ", shape_str(c.shape), " does not broadcast to ", shape_str(y)));
  }
  return {{a.dtype, y}};
}

Types rule_MatMul(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType a = r.type(0, "A"), b = r.type(1, "B");
  if (a.shape.empty() || b.shape.empty()) r.fail("A and B must have rank >= 1");
  Shape sa = a.shape, sb = b.shape;
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  bool ta = r.op.attr_int("transA", 0) != 0, tb = r.op.attr_int("transB", 0) != 0;
  if (ta && a1) r.fail(detail::concat("transA needs A of rank >= 2, got ", shape_str(a.shape)));
  if (tb && b1) r.fail(detail::concat("transB needs B of rank >= 2, got ", shape_str(b.shape)));
  if (ta) std::swap(sa[sa.size() - 2], sa.back());
  if (tb) std::swap(sb[sb.size() - 2], sb.back());
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  if (sa.back() != sb[sb.size() - 2])
    r.fail(detail::concat("inner dims differ: A ", shape_str(a.shape), (ta ? " (transposed)" : ""), " and B ",
                          shape_str(b.shape), (tb ? " (transposed)" : "")));
  Shape batch = broadcast_shapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), r.label());
  if (!a1) batch.push_back(sa[sa.size() - 2]);
  if (!b1) batch.push_back(sb.back());
  return {{a.dtype, batch}};
}

Types rule_Add(const RuleArgs &r) { return binary_broadcast(r); }
Types rule_Sub(const RuleArgs &r) { return binary_broadcast(r); }
Types rule_Mul(const RuleArgs &r) { return binary_broadcast(r); }
Types rule_Div(const RuleArgs &r) { return binary_broadcast(r); }
Types rule_Pow(const RuleArgs &r) { return binary_broadcast(r); }
Types rule_Sqrt(const RuleArgs &r) { return unary(r); }
Types rule_Neg(const RuleArgs &r) { return unary(r); }
Types rule_Exp(const RuleArgs &r) { return unary(r); }
Types rule_Log(const RuleArgs &r) { return unary(r); }
Types rule_Erf(const RuleArgs &r) { return unary(r); }
Types rule_Relu(const RuleArgs &r) { return unary(r); }
Types rule_Sigmoid(const RuleArgs &r) { return unary(r); }
Types rule_Tanh(const RuleArgs &r) { return unary(r); }
Types rule_Identity(const RuleArgs &r) { return unary(r); }
Types rule_Sin(const RuleArgs &r) { return unary(r); }
Types rule_Cos(const RuleArgs &r) { return unary(r); }
Types rule_Tan(const RuleArgs &r) { return unary(r); }
Types rule_Asin(const RuleArgs &r) { return unary(r); }
Types rule_Acos(const RuleArgs &r) { return unary(r); }
Types rule_Atan(const RuleArgs &r) { return unary(r); }
Types rule_Sinh(const RuleArgs &r) { return unary(r); }
Types rule_Cosh(const RuleArgs &r) { return unary(r); }
Types rule_Asinh(const RuleArgs &r) { return unary(r); }
Types rule_Acosh(const RuleArgs &r) { return unary(r); }
Types rule_Atanh(const RuleArgs &r) { return unary(r); }

Types softmax_like(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  r.axis("axis", x.shape.size(), static_cast<int64_t>(x.shape.size()) - 1);
  return {x};
}
Types rule_Softmax(const RuleArgs &r) { return softmax_like(r); }
Types rule_LogSoftmax(const RuleArgs &r) { return softmax_like(r); }

/** Shape of a loss output: the per-element shape [N, d...] for reduction none, else a scalar. */
Shape loss_shape(const RuleArgs &r, const Shape &per_element) {
  std::string red = r.op.has_attr("reduction") ? r.op.attr_string("reduction") : "mean";
  if (red == "none") return per_element;
  if (red != "mean" && red != "sum") r.fail("reduction must be none, sum or mean, got " + red);
  return {};
}

/** Checks (scores [N,C,d...], labels [N,d...], weights [C]?) and returns [N,d...]. */
Shape check_class_operands(const RuleArgs &r, const TensorType &scores, const char *sn, const TensorType &labels,
                           const char *ln, size_t weight_slot) {
  r.need_float(scores, sn);
  r.need_int(labels, ln);
  r.need_rank_at_least(scores, sn, 2);
  Shape per(scores.shape);
  per.erase(per.begin() + 1);
  if (labels.shape != per)
    r.fail(detail::concat(ln, " ", shape_str(labels.shape), " must have shape ", shape_str(per), " (", sn,
                          " without its class dim)"));
  if (r.has_in(weight_slot)) {
    TensorType w = r.type(weight_slot, "weights");
    if (w.shape != Shape{scores.shape[1]})
      r.fail(detail::concat("weights ", shape_str(w.shape), " must have shape [", scores.shape[1], "]"));
  }
  return per;
}

Types rule_SoftmaxCrossEntropyLoss(const RuleArgs &r) {
  r.need_inputs(2, 3);
  TensorType s = r.type(0, "scores"), l = r.type(1, "labels");
  Shape per = check_class_operands(r, s, "scores", l, "labels", 2);
  return {{s.dtype, loss_shape(r, per)}, s};
}

Types rule_NegativeLogLikelihoodLoss(const RuleArgs &r) {
  r.need_inputs(2, 3);
  TensorType x = r.type(0, "input"), t = r.type(1, "target");
  Shape per = check_class_operands(r, x, "input", t, "target", 2);
  return {{x.dtype, loss_shape(r, per)}};
}

Types rule_Reshape(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  Shape s = r.op.attr_ints("shape");
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) r.fail("shape has more than one -1");
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      r.fail("shape " + shape_str(r.op.attr_ints("shape")) + " has a negative dim");
    } else {
      known *= s[i];
    }
  }
  int64_t n = checked_num_elements(x.shape, r.label());
  if (infer >= 0) {
    if (known == 0 || n % known != 0) r.fail("cannot infer the -1 dim of shape " + shape_str(s));
    s[static_cast<size_t>(infer)] = n / known;
  }
  if (checked_num_elements(s, r.label()) != n)
    r.fail(detail::concat("cannot reshape ", shape_str(x.shape), " to ", shape_str(s)));
  return {{x.dtype, s}};
}

Types rule_Transpose(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  size_t n = x.shape.size();
  std::vector<int64_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(n - 1 - i);
  perm = r.op.attr_ints("perm", perm);
  std::vector<bool> seen(n, false);
  if (perm.size() != n) r.fail(detail::concat("perm ", shape_str(perm), " is not a permutation of rank ", n));
  Shape y(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(n) || seen[static_cast<size_t>(p)])
      r.fail(detail::concat("perm ", shape_str(perm), " is not a permutation of rank ", n));
    seen[static_cast<size_t>(p)] = true;
    y[i] = x.shape[static_cast<size_t>(p)];
  }
  return {{x.dtype, y}};
}

Types rule_Expand(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  return {{x.dtype, broadcast_shapes(x.shape, r.op.attr_ints("shape"), r.label())}};
}

Types rule_Concat(const RuleArgs &r) {
  if (r.op.inputs.empty()) r.fail("expects at least one input");
  TensorType first = r.type(0, "X");
  int64_t axis = r.axis("axis", first.shape.size());
  Shape y = first.shape;
  for (size_t i = 1; i < r.op.inputs.size(); ++i) {
    TensorType t = r.type(i, "X");
    bool ok = t.shape.size() == y.size() && t.dtype == first.dtype;
    for (size_t d = 0; ok && d < y.size(); ++d)
      if (static_cast<int64_t>(d) != axis && t.shape[d] != y[d]) ok = false;
    if (!ok)
      r.fail(detail::concat("input ", i, " ", shape_str(t.shape), " does not match input 0 ", shape_str(first.shape),
                            " outside axis ", axis));
    y[static_cast<size_t>(axis)] += t.shape[static_cast<size_t>(axis)];
  }
  return {{first.dtype, y}};
}

Types rule_Split(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  int64_t axis = r.axis("axis", x.shape.size());
  int64_t dim = x.shape[static_cast<size_t>(axis)];
  size_t n = r.op.outputs.size();
  if (n == 0) r.fail("has no outputs");
  std::vector<int64_t> split;
  if (r.op.has_attr("split")) {
    split = r.op.attr_ints("split");
  } else {  // ONNX: equal parts, the last one smaller if dim does not divide (opset 18 rule, a superset of 13's)
    int64_t part = (dim + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
    for (size_t i = 0; i < n; ++i) split.push_back(std::min(part, dim - part * static_cast<int64_t>(i)));
  }
  if (split.size() != n) r.fail(detail::concat("split has ", split.size(), " parts for ", n, " outputs"));
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0) r.fail("split has a negative part");
    sum += s;
  }
  if (sum != dim) r.fail(detail::concat("split ", shape_str(split), " does not sum to dim ", axis, " = ", dim));
  Types out;
  for (int64_t s : split) {
    Shape y = x.shape;
    y[static_cast<size_t>(axis)] = s;
    out.push_back({x.dtype, y});
  }
  return out;
}

Shape sliced_shape(const RuleArgs &r, const Shape &in) {
  Shape y;
  for (const SliceDim &d : resolve_slice(r.op, in)) y.push_back(d.size);
  return y;
}

Types rule_Slice(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  return {{x.dtype, sliced_shape(r, x.shape)}};
}

Shape gathered_shape(const RuleArgs &r, const Shape &data, const Shape &indices) {
  int64_t axis = r.axis("axis", data.size());
  Shape y(data.begin(), data.begin() + axis);
  y.insert(y.end(), indices.begin(), indices.end());
  y.insert(y.end(), data.begin() + axis + 1, data.end());
  return y;
}

Types rule_Gather(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType d = r.type(0, "data"), i = r.type(1, "indices");
  r.need_int(i, "indices");
  return {{d.dtype, gathered_shape(r, d.shape, i.shape)}};
}

/** Conv output shape of X with W (group, strides, pads, dilations from the op). */
Shape conv_shape(const RuleArgs &r, const Shape &x, const Shape &w) {
  if (x.size() < 3 || w.size() != x.size())
    r.fail(detail::concat("X ", shape_str(x), " and W ", shape_str(w), " must have equal rank >= 3"));
  int64_t group = r.op.attr_int("group", 1);
  if (group < 1 || x[1] % group != 0 || w[0] % group != 0)
    r.fail(detail::concat("group ", group, " does not divide channels of X ", shape_str(x), " and W ", shape_str(w)));
  if (w[1] * group != x[1])
    r.fail(detail::concat("W ", shape_str(w), " expects ", w[1] * group, " input channels, X ", shape_str(x), " has ",
                          x[1]));
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (r.op.has_attr("kernel_shape") && r.op.attr_ints("kernel_shape") != kernel)
    r.fail(detail::concat("kernel_shape ", shape_str(r.op.attr_ints("kernel_shape")), " does not match W ", shape_str(w)));
  WindowGeometry geo = window_geometry(r.op, kernel);
  size_t sp = kernel.size();
  Shape y{x[0], w[0]};
  for (size_t d = 0; d < sp; ++d) {
    int64_t o = window_output_dim(x[d + 2], kernel[d], geo.strides[d], geo.pads[d], geo.pads[d + sp],
                                  geo.dilations[d], false);
    if (o < 1) r.fail(detail::concat("spatial dim ", d, " of X ", shape_str(x), " is smaller than the kernel"));
    y.push_back(o);
  }
  return y;
}

Types rule_Conv(const RuleArgs &r) {
  r.need_inputs(2, 3);
  TensorType x = r.type(0, "X"), w = r.type(1, "W");
  r.need_float(x, "X");
  Shape y = conv_shape(r, x.shape, w.shape);
  if (r.has_in(2) && r.type(2, "B").shape != Shape{w.shape[0]})
    r.fail(detail::concat("B ", shape_str(r.type(2, "B").shape), " must have shape [", w.shape[0], "]"));
  return {{x.dtype, y}};
}

Shape pool_shape(const RuleArgs &r, const Shape &x) {
  if (x.size() < 3) r.fail("X must have rank >= 3, got " + shape_str(x));
  std::vector<int64_t> kernel = r.op.attr_ints("kernel_shape");
  size_t sp = x.size() - 2;
  if (kernel.size() != sp)
    r.fail(detail::concat("kernel_shape ", shape_str(kernel), " does not match the ", sp, " spatial dims of X"));
  WindowGeometry geo = window_geometry(r.op, kernel);
  Shape y{x[0], x[1]};
  for (size_t d = 0; d < sp; ++d) {
    int64_t o = window_output_dim(x[d + 2], kernel[d], geo.strides[d], geo.pads[d], geo.pads[d + sp],
                                  geo.dilations[d], geo.ceil_mode);
    if (o < 1) r.fail(detail::concat("spatial dim ", d, " of X ", shape_str(x), " is smaller than the kernel"));
    y.push_back(o);
  }
  return y;
}

Types rule_MaxPool(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  Shape y = pool_shape(r, x.shape);
  return {{x.dtype, y}, {DType::i64, y}};
}

Types rule_AveragePool(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  return {{x.dtype, pool_shape(r, x.shape)}};
}

Shape global_pool_shape(const RuleArgs &r, const Shape &x) {
  if (x.size() < 3) r.fail("X must have rank >= 3, got " + shape_str(x));
  Shape y(x.size(), 1);
  y[0] = x[0];
  y[1] = x[1];
  return y;
}

Types rule_GlobalAveragePool(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  return {{x.dtype, global_pool_shape(r, x.shape)}};
}

Types reduce(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  std::vector<int64_t> axes = r.op.attr_ints("axes");
  if (axes.empty()) r.fail("axes is empty");
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(x.shape.size()) || (i > 0 && axes[i] <= axes[i - 1]))
      r.fail(detail::concat("axes ", shape_str(axes), " must be sorted, distinct and within rank ", x.shape.size()));
  bool keep = r.op.attr_int("keepdims", 1) != 0;
  Shape y;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!reduced) y.push_back(x.shape[d]);
    else if (keep) y.push_back(1);
  }
  return {{x.dtype, y}};
}
Types rule_ReduceMean(const RuleArgs &r) { return reduce(r); }
Types rule_ReduceSum(const RuleArgs &r) { return reduce(r); }

/** Checks every per-channel operand in [first, last] has shape [C]. */
void check_channel_vectors(const RuleArgs &r, const TensorType &x, size_t first, size_t last,
                           const std::vector<const char *> &names) {
  for (size_t i = first; i <= last; ++i) {
    TensorType t = r.type(i, names[i - first]);
    if (t.shape != Shape{x.shape[1]})
      r.fail(detail::concat(names[i - first], " ", shape_str(t.shape), " must have shape [", x.shape[1], "]"));
  }
}

Types rule_BatchNormalization(const RuleArgs &r) {
  r.need_inputs(5, 5);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  r.need_rank_at_least(x, "X", 2);
  check_channel_vectors(r, x, 1, 4, {"scale", "B", "input_mean", "input_var"});
  TensorType c{r.type(1, "scale").dtype, {x.shape[1]}};
  return {x, c, c, c, c};
}

Types rule_Dropout(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  return {x, {DType::boolean, x.shape}};
}

Types rule_RandomLike(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  return {x};
}

Types rule_Reciprocal(const RuleArgs &r) { return unary(r); }

Types rule_Where(const RuleArgs &r) {
  r.need_inputs(3, 3);
  TensorType c = r.type(0, "C"), x = r.type(1, "X"), y = r.type(2, "Y");
  if (c.dtype != DType::boolean) r.fail(detail::concat("C must be a bool tensor, got ", dtype_name(c.dtype)));
  if (x.dtype != y.dtype)
    r.fail(detail::concat("X (", dtype_name(x.dtype), ") and Y (", dtype_name(y.dtype), ") differ in dtype"));
  Shape s = broadcast_shapes(broadcast_shapes(c.shape, x.shape, r.label()), y.shape, r.label());
  return {{x.dtype, s}};
}

Types rule_Cast(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  std::optional<DType> to = parse_dtype(r.op.attr_string("to"));
  if (!to) r.fail("attribute to \"" + r.op.attr_string("to") + "\" is not a dtype");
  return {{*to, x.shape}};
}

/** Comparisons: operands of one dtype, broadcast; the result is bool. */
Types compare(const RuleArgs &r) {
  Types t = binary_broadcast(r);
  t[0].dtype = DType::boolean;
  return t;
}
Types rule_Equal(const RuleArgs &r) { return compare(r); }
Types rule_Less(const RuleArgs &r) { return compare(r); }
Types rule_Greater(const RuleArgs &r) { return compare(r); }
Types rule_LessOrEqual(const RuleArgs &r) { return compare(r); }
Types rule_GreaterOrEqual(const RuleArgs &r) { return compare(r); }

Types rule_Not(const RuleArgs &r) {
  Types t = unary(r);
  if (t[0].dtype != DType::boolean) r.fail(detail::concat("X must be a bool tensor, got ", dtype_name(t[0].dtype)));
  return t;
}
Types logical(const RuleArgs &r) {
  Types t = binary_broadcast(r);
  if (t[0].dtype != DType::boolean)
    r.fail(detail::concat("A and B must be bool tensors, got ", dtype_name(t[0].dtype)));
  return t;
}
Types rule_And(const RuleArgs &r) { return logical(r); }
Types rule_Or(const RuleArgs &r) { return logical(r); }
Types rule_Xor(const RuleArgs &r) { return logical(r); }

/** Max/Min: one or more operands of one dtype, all broadcast together. */
Types variadic_broadcast(const RuleArgs &r) {
  if (r.op.inputs.empty()) r.fail("expects at least one input");
  TensorType first = r.type(0, "X");
  Shape s = first.shape;
  for (size_t i = 1; i < r.op.inputs.size(); ++i) {
    TensorType t = r.type(i, "X");
    if (t.dtype != first.dtype)
      r.fail(detail::concat("input ", i, " (", dtype_name(t.dtype), ") differs in dtype from input 0 (",
                            dtype_name(first.dtype), ")"));
    s = broadcast_shapes(s, t.shape, r.label());
  }
  return {{first.dtype, s}};
}
Types rule_Max(const RuleArgs &r) { return variadic_broadcast(r); }
Types rule_Min(const RuleArgs &r) { return variadic_broadcast(r); }

Types rule_Pad(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  std::vector<int64_t> pads = r.op.attr_ints("pads");
  size_t n = x.shape.size();
  if (pads.size() != 2 * n) r.fail(detail::concat("pads has ", pads.size(), " values for rank ", n, ", expected ", 2 * n));
  std::string mode = r.op.has_attr("mode") ? r.op.attr_string("mode") : "constant";
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    r.fail("mode \"" + mode + "\" is not constant, edge or reflect");
  Shape y(n);
  for (size_t d = 0; d < n; ++d) {
    y[d] = x.shape[d] + pads[d] + pads[d + n];
    if (y[d] < 0) r.fail(detail::concat("pads ", shape_str(pads), " crop dim ", d, " of X ", shape_str(x.shape), " below 0"));
    bool padded = pads[d] > 0 || pads[d + n] > 0;
    // Edge needs an element to repeat; reflect mirrors without repeating the border, so at most len - 1 per side.
    if (mode == "edge" && padded && x.shape[d] == 0)
      r.fail(detail::concat("edge padding of dim ", d, " of X ", shape_str(x.shape), ", which is empty"));
    if (mode == "reflect" && padded && std::max(pads[d], pads[d + n]) > x.shape[d] - 1)
      r.fail(detail::concat("reflect pads ", shape_str(pads), " exceed dim ", d, " of X ", shape_str(x.shape),
                            " minus 1"));
  }
  return {{x.dtype, y}};
}

Types rule_ReduceMax(const RuleArgs &r) { return reduce(r); }
Types rule_ReduceMin(const RuleArgs &r) { return reduce(r); }

/** LayerNormalization's normalised dims [axis, rank) and the statistics' shape (those dims as 1). */
Shape layer_norm_stat_shape(const RuleArgs &r, const TensorType &x, const TensorType &scale, int64_t &axis) {
  r.need_float(x, "X");
  axis = r.axis("axis", x.shape.size());
  Shape norm(x.shape.begin() + axis, x.shape.end());
  if (scale.shape != norm)
    r.fail(detail::concat("scale ", shape_str(scale.shape), " must have the normalised shape ", shape_str(norm)));
  Shape stat(x.shape.begin(), x.shape.begin() + axis);
  stat.resize(x.shape.size(), 1);
  return stat;
}

Types rule_LayerNormalization(const RuleArgs &r) {
  r.need_inputs(2, 3);
  TensorType x = r.type(0, "X"), scale = r.type(1, "scale");
  int64_t axis = 0;
  Shape stat = layer_norm_stat_shape(r, x, scale, axis);
  if (r.has_in(2) && r.type(2, "B").shape != scale.shape)
    r.fail(detail::concat("B ", shape_str(r.type(2, "B").shape), " must have scale's shape ", shape_str(scale.shape)));
  // ONNX computes the statistics in stash_type (float32 by default); the importer only accepts that default.
  return {x, {DType::f32, stat}, {DType::f32, stat}};
}

Types rule_LayerNormalizationGrad(const RuleArgs &r) {
  r.need_inputs(5, 5);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X"), scale = r.type(2, "scale");
  r.need_same_shape(dy, "dY", x, "X");
  int64_t axis = 0;
  Shape stat = layer_norm_stat_shape(r, x, scale, axis);
  for (size_t i = 3; i <= 4; ++i) {
    TensorType s = r.type(i, i == 3 ? "mean" : "invstd");
    if (s.shape != stat)
      r.fail(detail::concat(i == 3 ? "mean " : "invstd ", shape_str(s.shape), " must have shape ", shape_str(stat)));
  }
  return {dy, scale, scale};
}

// ---- image layers: InstanceNormalization, ConvTranspose, Resize ----

/** InstanceNormalization's X [N, C, spatial...] with scale [C]; returns the statistics' shape [N, C]. */
Shape instance_norm_stat_shape(const RuleArgs &r, const TensorType &x, const TensorType &scale) {
  r.need_float(x, "X");
  r.need_rank_at_least(x, "X", 3);
  if (scale.shape != Shape{x.shape[1]})
    r.fail(detail::concat("scale ", shape_str(scale.shape), " must have shape [", x.shape[1], "] (X's channels)"));
  return {x.shape[0], x.shape[1]};
}

Types rule_InstanceNormalization(const RuleArgs &r) {
  r.need_inputs(3, 3);
  TensorType x = r.type(0, "X"), scale = r.type(1, "scale"), b = r.type(2, "B");
  Shape stat = instance_norm_stat_shape(r, x, scale);
  if (b.shape != scale.shape)
    r.fail(detail::concat("B ", shape_str(b.shape), " must have scale's shape ", shape_str(scale.shape)));
  return {x, {DType::f32, stat}, {DType::f32, stat}};
}

Types rule_InstanceNormalizationGrad(const RuleArgs &r) {
  r.need_inputs(5, 5);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X"), scale = r.type(2, "scale");
  r.need_same_shape(dy, "dY", x, "X");
  Shape stat = instance_norm_stat_shape(r, x, scale);
  for (size_t i = 3; i <= 4; ++i) {
    TensorType s = r.type(i, i == 3 ? "mean" : "invstd");
    if (s.shape != stat)
      r.fail(detail::concat(i == 3 ? "mean " : "invstd ", shape_str(s.shape), " must have shape ", shape_str(stat)));
  }
  return {dy, scale, scale};
}

Types rule_ConvTranspose(const RuleArgs &r) {
  // Y is the input of a Conv with W whose output is X: Y's spatial dims are s*(x-1) + output_padding + d*(k-1) + 1
  // - pads, and that Conv maps Y back onto X exactly when output_padding < stride (checked below).
  r.need_inputs(2, 3);
  TensorType x = r.type(0, "X"), w = r.type(1, "W");
  r.need_float(x, "X");
  if (x.shape.size() < 3 || w.shape.size() != x.shape.size())
    r.fail(detail::concat("X ", shape_str(x.shape), " and W ", shape_str(w.shape), " must have equal rank >= 3"));
  int64_t group = r.op.attr_int("group", 1);
  if (group < 1 || x.shape[1] % group != 0 || w.shape[0] != x.shape[1])
    r.fail(detail::concat("W ", shape_str(w.shape), " must have X's ", x.shape[1], " channels first, in ", group,
                          " groups"));
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  WindowGeometry geo = window_geometry(r.op, kernel);
  size_t sp = kernel.size();
  std::vector<int64_t> out_pad = r.op.attr_ints("output_padding", std::vector<int64_t>(sp, 0));
  if (out_pad.size() != sp) r.fail(detail::concat("output_padding needs ", sp, " entries"));
  Shape y{x.shape[0], w.shape[1] * group};
  for (size_t d = 0; d < sp; ++d) {
    if (out_pad[d] < 0 || out_pad[d] >= geo.strides[d])
      r.fail(detail::concat("output_padding ", shape_str(out_pad), " must be in [0, stride) in every dim"));
    int64_t o = geo.strides[d] * (x.shape[d + 2] - 1) + out_pad[d] + geo.dilations[d] * (kernel[d] - 1) + 1 -
                geo.pads[d] - geo.pads[d + sp];
    if (o < 1) r.fail(detail::concat("spatial dim ", d, " of the output would be ", o, " (pads too large)"));
    y.push_back(o);
  }
  if (conv_shape(r, y, w.shape) != x.shape)
    r.fail(detail::concat("the Conv of the output ", shape_str(y), " with W does not give back X ", shape_str(x.shape)));
  if (r.has_in(2) && r.type(2, "B").shape != Shape{y[1]})
    r.fail(detail::concat("B ", shape_str(r.type(2, "B").shape), " must have shape [", y[1], "]"));
  return {{x.dtype, y}};
}

/** Resize's output shape (attribute sizes) after checking it and the mode attributes against X's shape. */
Shape resize_shape(const RuleArgs &r, const Shape &x) {
  std::vector<int64_t> sizes = r.op.attr_ints("sizes");
  std::vector<double> scales = r.op.attr_floats("scales");
  if (x.size() < 3 || sizes.size() != x.size() || scales.size() != x.size())
    r.fail(detail::concat("X ", shape_str(x), " needs rank >= 3 and sizes ", shape_str(sizes), " and ",
                          scales.size(), " scales of its rank"));
  if (sizes[0] != x[0] || sizes[1] != x[1])
    r.fail(detail::concat("sizes ", shape_str(sizes), " must keep X's batch and channel dims ", shape_str(x)));
  for (size_t d = 2; d < x.size(); ++d)
    if (sizes[d] < 1 || scales[d] <= 0 || x[d] < 1)
      r.fail(detail::concat("sizes ", shape_str(sizes), " and scales must be positive, X ", shape_str(x), " not empty"));
  std::string mode = r.op.attr_string("mode");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    r.fail("mode \"" + mode + "\" is not nearest, linear or cubic");
  if (mode == "cubic" && (!r.op.has_attr("cubic_coeff_a") || !r.op.has_attr("exclude_outside")))
    r.fail("mode \"cubic\" needs the attributes cubic_coeff_a and exclude_outside");
  if (mode == "cubic" && !std::isfinite(r.op.attr_float("cubic_coeff_a"))) r.fail("cubic_coeff_a is not finite");
  return sizes;
}

Types rule_Resize(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  return {{x.dtype, resize_shape(r, x.shape)}};
}

Types rule_ResizeGrad(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType dy = r.type(0, "dY");
  const Tensor &dx = r.declared(0, "dX");
  if (resize_shape(r, dx.shape) != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the Resize output of dX ", shape_str(dx.shape)));
  return {{dy.dtype, dx.shape}};
}

// ---- index and scan ops: ArgMax/ArgMin, CumSum, Mod, OneHot ----

/** ArgMax/ArgMin: X's shape with the axis removed (or kept as 1); int64 indices. */
Types arg_extreme(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  if (x.dtype == DType::boolean) r.fail("X must be a numeric tensor, got bool");
  if (x.shape.empty()) r.fail("X must have rank >= 1");
  auto axis = static_cast<size_t>(r.axis("axis", x.shape.size()));
  if (x.shape[axis] == 0) r.fail(detail::concat("axis ", axis, " of X ", shape_str(x.shape), " is empty"));
  Shape y;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (d != axis) y.push_back(x.shape[d]);
    else if (r.op.attr_int("keepdims", 1) != 0) y.push_back(1);
  return {{DType::i64, y}};
}
Types rule_ArgMax(const RuleArgs &r) { return arg_extreme(r); }
Types rule_ArgMin(const RuleArgs &r) { return arg_extreme(r); }

/** TopKIndices: X's shape with k along the axis; int64 positions. */
Types rule_TopKIndices(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  r.need_float(x, "X");
  if (x.shape.empty()) r.fail("X must have rank >= 1");
  for (const char *a : {"axis", "k", "largest"})  // no defaults: the interpreter and codegen read all three
    if (!r.op.has_attr(a)) r.fail(detail::concat("needs the attribute ", a));
  auto axis = static_cast<size_t>(r.axis("axis", x.shape.size()));
  int64_t k = r.op.attr_int("k");
  if (k < 1 || k > x.shape[axis])
    r.fail(detail::concat("k = ", k, " is outside [1, ", x.shape[axis], "] (axis ", axis, " of X ", shape_str(x.shape),
                          ")"));
  Shape y = x.shape;
  y[axis] = k;
  return {{DType::i64, y}};
}

Types rule_CumSum(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType x = r.type(0, "X");
  if (x.dtype == DType::boolean) r.fail("X must be a numeric tensor, got bool");
  if (x.shape.empty()) r.fail("X must have rank >= 1");
  r.axis("axis", x.shape.size());
  return {x};
}

Types rule_Mod(const RuleArgs &r) {
  Types t = binary_broadcast(r);
  if (t[0].dtype == DType::boolean) r.fail("A and B must be numeric tensors, got bool");
  return t;
}

Types rule_OneHot(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType ind = r.type(0, "indices"), values = r.type(1, "values");
  if (ind.dtype == DType::boolean) r.fail("indices must be a numeric tensor, got bool");
  if (values.shape != Shape{2}) r.fail(detail::concat("values ", shape_str(values.shape), " must have shape [2]"));
  int64_t depth = r.op.attr_int("depth");
  if (depth < 1) r.fail(detail::concat("depth ", depth, " must be positive"));
  auto axis = static_cast<size_t>(r.axis("axis", ind.shape.size() + 1));
  Shape y = ind.shape;
  y.insert(y.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  return {{values.dtype, y}};
}

// ---- element-wise and N-d indexing: GatherElements, ScatterElements, GatherND ----

/** indices (an integer tensor of data's rank) fits data off `axis`: indices.shape[d] <= data.shape[d]. */
void need_elementwise_indices(const RuleArgs &r, const TensorType &data, const TensorType &ind, int64_t axis) {
  r.need_int(ind, "indices");
  if (data.shape.empty()) r.fail("data must have rank >= 1");
  if (ind.shape.size() != data.shape.size())
    r.fail(detail::concat("indices ", shape_str(ind.shape), " and data ", shape_str(data.shape), " differ in rank"));
  for (size_t d = 0; d < data.shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ind.shape[d] > data.shape[d])
      r.fail(detail::concat("indices ", shape_str(ind.shape), " exceed data ", shape_str(data.shape), " on dim ", d));
}

Types rule_GatherElements(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType data = r.type(0, "data"), ind = r.type(1, "indices");
  int64_t axis = r.axis("axis", std::max<size_t>(data.shape.size(), 1));
  need_elementwise_indices(r, data, ind, axis);
  return {{data.dtype, ind.shape}};
}

Types rule_ScatterElements(const RuleArgs &r) {
  r.need_inputs(3, 3);
  TensorType data = r.type(0, "data"), ind = r.type(1, "indices"), upd = r.type(2, "updates");
  int64_t axis = r.axis("axis", std::max<size_t>(data.shape.size(), 1));
  need_elementwise_indices(r, data, ind, axis);
  r.need_same_shape(ind, "indices", upd, "updates");
  if (upd.dtype != data.dtype)
    r.fail(detail::concat("updates of dtype ", dtype_name(upd.dtype), " differ from data's ", dtype_name(data.dtype)));
  std::string red = r.op.has_attr("reduction") ? r.op.attr_string("reduction") : "none";
  if (red != "none" && red != "add") r.fail("reduction \"" + red + "\" is not supported (none, add)");
  return {data};
}

/** GatherND's output shape: indices[:-1] + data[batch_dims + indices[-1]:]. */
Shape gathered_nd_shape(const RuleArgs &r, const Shape &data, const Shape &ind) {
  int64_t b = r.op.attr_int("batch_dims", 0);
  auto q = static_cast<int64_t>(ind.size()), rank = static_cast<int64_t>(data.size());
  if (q < 1 || rank < 1)
    r.fail(detail::concat("data ", shape_str(data), " and indices ", shape_str(ind), " must have rank >= 1"));
  if (b < 0 || b >= std::min(q, rank))
    r.fail(detail::concat("batch_dims ", b, " out of range for data ", shape_str(data), " and indices ",
                          shape_str(ind)));
  for (int64_t d = 0; d < b; ++d)
    if (data[static_cast<size_t>(d)] != ind[static_cast<size_t>(d)])
      r.fail(detail::concat("batch dim ", d, " of data ", shape_str(data), " and indices ", shape_str(ind), " differ"));
  int64_t k = ind.back();
  if (k < 1 || k > rank - b)
    r.fail(detail::concat("indices ", shape_str(ind), " index ", k, " dims of data ", shape_str(data),
                          " (1 to ", rank - b, " after ", b, " batch dims)"));
  Shape y(ind.begin(), ind.end() - 1);
  y.insert(y.end(), data.begin() + b + k, data.end());
  return y;
}

Types rule_GatherND(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType data = r.type(0, "data"), ind = r.type(1, "indices");
  r.need_int(ind, "indices");
  return {{data.dtype, gathered_nd_shape(r, data.shape, ind.shape)}};
}

// ---- activations and rounding ----

/** PRelu's slope must broadcast to X (unidirectionally): the output has X's shape. */
TensorType prelu_x(const RuleArgs &r, const TensorType &x, const TensorType &slope) {
  if (x.dtype != slope.dtype)
    r.fail(detail::concat("X (", dtype_name(x.dtype), ") and slope (", dtype_name(slope.dtype), ") differ in dtype"));
  if (broadcast_shapes(x.shape, slope.shape, r.label()) != x.shape)
    r.fail(detail::concat("slope ", shape_str(slope.shape), " does not broadcast to X ", shape_str(x.shape)));
  return x;
}

Types rule_Clip(const RuleArgs &r) { return unary(r); }
Types rule_HardSigmoid(const RuleArgs &r) { return unary(r); }
Types rule_HardSwish(const RuleArgs &r) { return unary(r); }
Types rule_Gelu(const RuleArgs &r) { return unary(r); }
Types rule_LeakyRelu(const RuleArgs &r) { return unary(r); }
Types rule_Elu(const RuleArgs &r) { return unary(r); }
Types rule_Selu(const RuleArgs &r) { return unary(r); }
Types rule_Celu(const RuleArgs &r) { return unary(r); }
Types rule_PRelu(const RuleArgs &r) {
  r.need_inputs(2, 2);
  return {prelu_x(r, r.type(0, "X"), r.type(1, "slope"))};
}
Types rule_Softplus(const RuleArgs &r) { return unary(r); }
Types rule_Softsign(const RuleArgs &r) { return unary(r); }
Types rule_ThresholdedRelu(const RuleArgs &r) { return unary(r); }
Types rule_Abs(const RuleArgs &r) { return unary(r); }
Types rule_Sign(const RuleArgs &r) { return unary(r); }
Types rule_Floor(const RuleArgs &r) { return unary(r); }
Types rule_Ceil(const RuleArgs &r) { return unary(r); }
Types rule_Round(const RuleArgs &r) { return unary(r); }
Types rule_RoundToBf16(const RuleArgs &r) { return unary(r); }
Types rule_RoundToFp16(const RuleArgs &r) { return unary(r); }
Types rule_ClipGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_HardSigmoidGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_HardSwishGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_GeluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_LeakyReluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_EluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SeluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_CeluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_PReluGrad(const RuleArgs &r) {
  r.need_inputs(3, 3);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X");
  r.need_same_shape(dy, "dY", x, "X");
  TensorType y = prelu_x(r, x, r.type(2, "slope"));
  return {y, y};
}
Types rule_SoftplusGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SoftsignGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_ThresholdedReluGrad(const RuleArgs &r) { return elementwise_grad(r); }

Types rule_ReluGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SigmoidGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_TanhGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_ErfGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SqrtGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SinGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_CosGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_TanGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AsinGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AcosGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AtanGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_SinhGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_CoshGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AsinhGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AcoshGrad(const RuleArgs &r) { return elementwise_grad(r); }
Types rule_AtanhGrad(const RuleArgs &r) { return elementwise_grad(r); }

Types rule_PowGrad(const RuleArgs &r) {
  r.need_inputs(3, 3);
  TensorType dy = r.type(0, "dY"), a = r.type(1, "A"), b = r.type(2, "B");
  Shape y = broadcast_shapes(a.shape, b.shape, r.label());
  if (dy.shape != y) r.fail(detail::concat("dY ", shape_str(dy.shape), " must have the broadcast shape ", shape_str(y)));
  return {{a.dtype, y}, {b.dtype, y}};
}

Types softmax_grad(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), y = r.type(1, "Y");
  r.need_same_shape(dy, "dY", y, "Y");
  r.axis("axis", y.shape.size(), static_cast<int64_t>(y.shape.size()) - 1);
  return {y};
}
Types rule_SoftmaxGrad(const RuleArgs &r) { return softmax_grad(r); }
Types rule_LogSoftmaxGrad(const RuleArgs &r) { return softmax_grad(r); }

Types loss_grad(const RuleArgs &r, const char *xn, const char *ln) {
  r.need_inputs(3, 4);
  TensorType dl = r.type(0, "dloss"), x = r.type(1, xn), l = r.type(2, ln);
  Shape per = check_class_operands(r, x, xn, l, ln, 3);
  Shape want = loss_shape(r, per);
  if (dl.shape != want) r.fail(detail::concat("dloss ", shape_str(dl.shape), " must have shape ", shape_str(want)));
  return {x};
}
Types rule_SoftmaxCrossEntropyLossGrad(const RuleArgs &r) { return loss_grad(r, "log_prob", "labels"); }
Types rule_NegativeLogLikelihoodLossGrad(const RuleArgs &r) { return loss_grad(r, "input", "target"); }

Types rule_ConvGradData(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), w = r.type(1, "W");
  const Tensor &dx = r.declared(0, "dX");
  Shape y = conv_shape(r, dx.shape, w.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the Conv output ", shape_str(y), " of dX ",
                          shape_str(dx.shape), " and W ", shape_str(w.shape)));
  return {{dy.dtype, dx.shape}};
}

Types rule_ConvGradFilter(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X");
  const Tensor &dw = r.declared(0, "dW");
  Shape y = conv_shape(r, x.shape, dw.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the Conv output ", shape_str(y), " of X ",
                          shape_str(x.shape), " and dW ", shape_str(dw.shape)));
  return {{dy.dtype, dw.shape}};
}

Types rule_MaxPoolGrad(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X");
  Shape y = pool_shape(r, x.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the pool output ", shape_str(y), " of X ", shape_str(x.shape)));
  return {{dy.dtype, x.shape}};
}

Types rule_AveragePoolGrad(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType dy = r.type(0, "dY");
  const Tensor &dx = r.declared(0, "dX");
  Shape y = pool_shape(r, dx.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the pool output ", shape_str(y), " of dX ",
                          shape_str(dx.shape)));
  return {{dy.dtype, dx.shape}};
}

Types rule_GlobalAveragePoolGrad(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType dy = r.type(0, "dY");
  const Tensor &dx = r.declared(0, "dX");
  if (global_pool_shape(r, dx.shape) != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the global pool output of dX ", shape_str(dx.shape)));
  return {{dy.dtype, dx.shape}};
}

Types rule_BatchNormalizationGrad(const RuleArgs &r) {
  r.need_inputs(5, 5);
  TensorType dy = r.type(0, "dY"), x = r.type(1, "X");
  r.need_rank_at_least(x, "X", 2);
  r.need_same_shape(dy, "dY", x, "X");
  check_channel_vectors(r, x, 2, 4, {"scale", "saved_mean", "saved_invstd"});
  TensorType c{r.type(2, "scale").dtype, {x.shape[1]}};
  return {x, c, c};
}

Types rule_DropoutGrad(const RuleArgs &r) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), m = r.type(1, "mask");
  r.need_same_shape(dy, "dY", m, "mask");
  return {dy};
}

Types rule_SliceGrad(const RuleArgs &r) {
  r.need_inputs(1, 1);
  TensorType dy = r.type(0, "dY");
  const Tensor &dx = r.declared(0, "dX");
  Shape y = sliced_shape(r, dx.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the slice ", shape_str(y), " of dX ", shape_str(dx.shape)));
  return {{dy.dtype, dx.shape}};
}

/** (dY, indices) -> ddata of a gather's backward: ddata is declared, and `gathered(ddata, indices)` must be dY's shape
 *  (`what` names the gather in the message). */
template <typename Gathered>
Types scatter_back_rule(const RuleArgs &r, const Gathered &gathered, const char *what) {
  r.need_inputs(2, 2);
  TensorType dy = r.type(0, "dY"), i = r.type(1, "indices");
  r.need_int(i, "indices");
  const Tensor &dd = r.declared(0, "ddata");
  Shape y = gathered(r, dd.shape, i.shape);
  if (y != dy.shape)
    r.fail(detail::concat("dY ", shape_str(dy.shape), " is not the ", what, " ", shape_str(y), " of ddata ",
                          shape_str(dd.shape), " by indices ", shape_str(i.shape)));
  return {{dy.dtype, dd.shape}};
}

Types rule_GatherGrad(const RuleArgs &r) { return scatter_back_rule(r, gathered_shape, "gather"); }

Types rule_GatherNDGrad(const RuleArgs &r) { return scatter_back_rule(r, gathered_nd_shape, "GatherND"); }

/** (param, grad, state...) -> (param', state'...): every operand has param's shape. */
Types param_update(const RuleArgs &r, size_t n_in) {
  r.need_inputs(n_in, n_in);
  TensorType p = r.type(0, "param");
  r.need_float(p, "param");
  for (size_t i = 1; i < n_in; ++i) {
    TensorType t = r.type(i, i == 1 ? "grad" : "state");
    r.need_same_shape(p, "param", t, i == 1 ? "grad" : "state");
  }
  return Types(n_in - 1, p);
}
Types rule_SGDUpdate(const RuleArgs &r) { return param_update(r, 2); }
Types rule_MomentumUpdate(const RuleArgs &r) { return param_update(r, 3); }
Types rule_AdamUpdate(const RuleArgs &r) { return param_update(r, 4); }

/** ai.onnx.preview.training ops: (R, T, then `groups` lists of n tensors) -> (groups - 1) lists of n. */
Types training_op(const RuleArgs &r, size_t groups) {
  size_t rest = r.op.inputs.size() < 2 ? 0 : r.op.inputs.size() - 2;
  if (rest == 0 || rest % groups != 0)
    r.fail(detail::concat("expects R, T and ", groups, " equally long lists of tensors, got ", r.op.inputs.size(),
                          " inputs"));
  size_t n = rest / groups;
  TensorType rr = r.type(0, "R"), t = r.type(1, "T");
  if (!rr.shape.empty() || !t.shape.empty()) r.fail("R and T must be scalars");
  r.need_float(rr, "R");
  r.need_int(t, "T");
  if (r.op.outputs.size() != (groups - 1) * n)
    r.fail(detail::concat("expects ", (groups - 1) * n, " outputs for ", n, " tensors, got ", r.op.outputs.size()));
  Types out;
  for (size_t g = 0; g + 1 < groups; ++g) out.resize(out.size() + n);
  for (size_t i = 0; i < n; ++i) {
    TensorType x = r.type(2 + i, "X");
    r.need_float(x, "X");
    for (size_t g = 1; g < groups; ++g) {
      TensorType o = r.type(2 + g * n + i, "optimizer operand");
      if (o.shape != x.shape)
        r.fail(detail::concat("operand ", 2 + g * n + i, " ", shape_str(o.shape), " does not match X ", i, " ",
                              shape_str(x.shape)));
    }
    for (size_t g = 0; g + 1 < groups; ++g) out[g * n + i] = x;
  }
  return out;
}
Types rule_Momentum(const RuleArgs &r) { return training_op(r, 3); }
Types rule_Adam(const RuleArgs &r) { return training_op(r, 4); }
Types rule_Adagrad(const RuleArgs &r) { return training_op(r, 3); }

using Rule = Types (*)(const RuleArgs &);
constexpr Rule kRules[] = {
#define CLEAVE_OP(name) &rule_##name,
#include "ir/ops.def"
#undef CLEAVE_OP
};
static_assert(sizeof(kRules) / sizeof(kRules[0]) == kNumOpKinds, "a shape rule per op kind");

}  // namespace

std::vector<TensorType> infer_output_types(const Graph &g, const Op &op) {
  RuleArgs r{g, op};
  Types out = kRules[static_cast<size_t>(op.kind)](r);
  // Rules list every output an op can have; fewer slots may be present (optional trailing outputs).
  if (op.outputs.size() > out.size())
    r.fail(detail::concat("has ", op.outputs.size(), " outputs, at most ", out.size(), " allowed"));
  out.resize(op.outputs.size());
  return out;
}

Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &what) {
  size_t n = std::max(a.size(), b.size());
  Shape y(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      CLEAVE_USER_ERROR(what, ": shapes ", shape_str(a), " and ", shape_str(b), " are not broadcastable");
    y[i] = da == 1 ? db : da;
  }
  return y;
}

WindowGeometry window_geometry(const Op &op, const std::vector<int64_t> &kernel) {
  size_t sp = kernel.size();
  auto fail = [&](const std::string &key, size_t got, size_t want) {
    CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): ", key, " has ", got, " values, expected ",
                      want);
  };
  WindowGeometry geo;
  geo.kernel = kernel;
  geo.strides = op.attr_ints("strides", std::vector<int64_t>(sp, 1));
  geo.dilations = op.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  geo.pads = op.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  geo.ceil_mode = op.attr_int("ceil_mode", 0) != 0;
  if (geo.strides.size() != sp) fail("strides", geo.strides.size(), sp);
  if (geo.dilations.size() != sp) fail("dilations", geo.dilations.size(), sp);
  if (geo.pads.size() != 2 * sp) fail("pads", geo.pads.size(), 2 * sp);
  for (size_t d = 0; d < sp; ++d)
    if (geo.strides[d] < 1 || geo.dilations[d] < 1 || kernel[d] < 1 || geo.pads[d] < 0 || geo.pads[d + sp] < 0)
      CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind),
                        "): kernel, strides and dilations must be positive and pads non-negative");
  return geo;
}

int64_t window_output_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end,
                          int64_t dilation, bool ceil_mode) {
  int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

std::vector<SliceDim> resolve_slice(const Op &op, const Shape &in) {
  auto fail = [&](const std::string &msg) {
    CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): ", msg);
  };
  std::vector<int64_t> starts = op.attr_ints("starts"), ends = op.attr_ints("ends");
  std::vector<int64_t> axes(starts.size());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  axes = op.attr_ints("axes", axes);
  std::vector<int64_t> steps = op.attr_ints("steps", std::vector<int64_t>(starts.size(), 1));
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail("starts, ends, axes and steps differ in length");
  std::vector<SliceDim> dims(in.size());
  std::vector<bool> seen(in.size(), false);
  for (size_t d = 0; d < in.size(); ++d) dims[d] = {0, 1, in[d]};
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0 || a >= static_cast<int64_t>(in.size()) || seen[static_cast<size_t>(a)])
      fail(detail::concat("axes ", shape_str(axes), " invalid for rank ", in.size()));
    seen[static_cast<size_t>(a)] = true;
    int64_t dim = in[static_cast<size_t>(a)], step = steps[i];
    if (step == 0) fail("steps must be non-zero");
    // The importer normalised negative (from-the-end) values; what is left is clamped here, with -1 meaning
    // "before the first element" for a negative step, as ops.def documents.
    int64_t s = starts[i], e = ends[i];
    int64_t size;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      size = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      size = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    dims[static_cast<size_t>(a)] = {s, step, size};
  }
  return dims;
}

}  // namespace cleave
