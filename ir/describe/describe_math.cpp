// Descriptions of the dense and elementwise forward kinds: Gemm, MatMul, arithmetic, unary functions, Softmax,
// reductions.
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

Descs softmax_like(const Graph &g, const Op &op, const char *fname) {
  Builder b(g, op, 0, "Y");
  const Shape &s = b.out_shape();
  size_t axis = static_cast<size_t>(op.attr_int("axis", static_cast<int64_t>(s.size()) - 1));
  std::vector<Var> v;
  for (size_t d = 0; d < s.size(); ++d) v.push_back(b.out(generic_name(d), s[d], d == axis));
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, opaque(std::string(fname) + "_" + generic_name(axis), {x(ix(v))}, 5))};
}

Descs reduce(const Graph &g, const Op &op, bool mean) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0);
  std::vector<int64_t> axes = op.attr_ints("axes");
  bool keep = op.attr_int("keepdims", 1) != 0;
  std::vector<Var> v(xs.size());
  int64_t count = 1;
  for (size_t d = 0; d < xs.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      v[d] = b.out(generic_name(d), xs[d]);
  for (size_t d = 0; d < xs.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end()) {
      v[d] = b.sum(generic_name(d), xs[d]);
      count *= xs[d];
    }
  std::vector<Affine> out;
  for (size_t d = 0; d < xs.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!reduced) out.emplace_back(v[d]);
    else if (keep) out.emplace_back(int64_t{0});
  }
  Operand x = b.in(0, "X");
  E body = x(ix(v));
  if (mean) body = body / E(static_cast<double>(count));
  return {std::move(b).build(out, Reduce::sum, body)};
}

}  // namespace

Descs describe_Gemm(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &ys = b.out_shape();
  bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
  const Shape &as = in_shape(g, op, 0);
  Var m = b.out("m", ys[0]), n = b.out("n", ys[1]);
  Operand a = b.in(0, "A"), bb = b.in(1, "B");
  if (as.size() > 2) {
    // Rows in their layout: Y[m, n] = sum over r... of A[r..., m] B[r..., n].
    std::vector<Ix> ai, bi;
    for (size_t d = 0; d + 1 < as.size(); ++d) {
      Var r = b.sum("r" + std::to_string(d), as[d]);
      ai.emplace_back(r);
      bi.emplace_back(r);
    }
    ai.emplace_back(m);
    bi.emplace_back(n);
    double alpha = op.attr_float("alpha", 1.0);
    return {std::move(b).build({m, n}, Reduce::sum, a(ai) * bb(bi), alpha != 1 ? scaled(alpha, reduced()) : E())};
  }
  Var k = b.sum("k", ta ? as[0] : as[1]);
  E body = (ta ? a[{k, m}] : a[{m, k}]) * (tb ? bb[{n, k}] : bb[{k, n}]);
  double alpha = op.attr_float("alpha", 1.0), beta = op.attr_float("beta", 1.0);
  E post;
  if (alpha != 1 || (op.input(2) != kNoTensor && beta != 0)) {
    post = scaled(alpha, reduced());
    if (op.input(2) != kNoTensor) {
      Operand c = b.in(2, "C");
      post = plus_scaled(post, beta, c(bcast_ix({m, n}, c.shape())));
    }
  }
  return {std::move(b).build({m, n}, Reduce::sum, body, post)};
}

Descs describe_MatMul(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &ys = b.out_shape();
  Shape as = in_shape(g, op, 0), bs = in_shape(g, op, 1);
  bool a1 = as.size() == 1, b1 = bs.size() == 1;
  size_t batch = ys.size() - (a1 ? 0 : 1) - (b1 ? 0 : 1);
  std::vector<Var> bv;
  for (size_t d = 0; d < batch; ++d) bv.push_back(b.out(batch == 1 ? "b" : "b" + std::to_string(d), ys[d]));
  Var m, n;
  if (!a1) m = b.out("m", ys[batch]);
  if (!b1) n = b.out("n", ys.back());
  bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
  Var k = b.sum("k", ta ? as[as.size() - 2] : as.back());
  Operand a = b.in(0, "A"), bb = b.in(1, "B");
  // Batch dims of each operand broadcast right-aligned against the output's batch dims.
  auto batch_ix = [&](const Shape &s, size_t mat_dims) {
    Shape bshape(s.begin(), s.end() - static_cast<int64_t>(mat_dims));
    return bcast_ix(bv, bshape);
  };
  // transA / transB index the operand's last two dims the other way round.
  std::vector<Ix> ai = a1 ? std::vector<Ix>{} : batch_ix(as, 2);
  if (!a1) ai.emplace_back(m);
  ai.emplace_back(k);
  if (ta) std::swap(ai[ai.size() - 2], ai.back());
  std::vector<Ix> bi = b1 ? std::vector<Ix>{} : batch_ix(bs, 2);
  bi.emplace_back(k);
  if (!b1) bi.emplace_back(n);
  if (tb) std::swap(bi[bi.size() - 2], bi.back());
  std::vector<Affine> out = idx(bv);
  if (!a1) out.emplace_back(m);
  if (!b1) out.emplace_back(n);
  return {std::move(b).build(out, Reduce::sum, a(ai) * bb(bi))};
}

Descs describe_Add(const Graph &g, const Op &op) { return binary(g, op, [](const E &a, const E &b) { return a + b; }); }
Descs describe_Sub(const Graph &g, const Op &op) { return binary(g, op, [](const E &a, const E &b) { return a - b; }); }
Descs describe_Mul(const Graph &g, const Op &op) { return binary(g, op, [](const E &a, const E &b) { return a * b; }); }
Descs describe_Div(const Graph &g, const Op &op) { return binary(g, op, [](const E &a, const E &b) { return a / b; }); }
Descs describe_Pow(const Graph &g, const Op &op) { return binary(g, op, [](const E &a, const E &b) { return pow(a, b); }); }
Descs describe_Sqrt(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return sqrt(x); }); }
Descs describe_Neg(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return -x; }); }
Descs describe_Exp(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return exp(x); }); }
Descs describe_Log(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return log(x); }); }
Descs describe_Erf(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return erf(x); }); }
Descs describe_Relu(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return relu(x); }); }
Descs describe_Sigmoid(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return sigmoid(x); }); }
Descs describe_Tanh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return tanh(x); }); }
Descs describe_Identity(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return x; }); }
Descs describe_Sin(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return sin(x); }); }
Descs describe_Cos(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return cos(x); }); }
Descs describe_Tan(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return tan(x); }); }
Descs describe_Asin(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return asin(x); }); }
Descs describe_Acos(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return acos(x); }); }
Descs describe_Atan(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return atan(x); }); }
Descs describe_Sinh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return sinh(x); }); }
Descs describe_Cosh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return cosh(x); }); }
Descs describe_Asinh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return asinh(x); }); }
Descs describe_Acosh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return acosh(x); }); }
Descs describe_Atanh(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return atanh(x); }); }
Descs describe_Softmax(const Graph &g, const Op &op) { return softmax_like(g, op, "softmax"); }
Descs describe_LogSoftmax(const Graph &g, const Op &op) { return softmax_like(g, op, "logsoftmax"); }
Descs describe_ReduceMean(const Graph &g, const Op &op) { return reduce(g, op, true); }
Descs describe_ReduceSum(const Graph &g, const Op &op) { return reduce(g, op, false); }

}  // namespace cleave::describe
