// One gradient rule per forward op kind. Rules emit IR ops only: the dedicated backward kinds of ops.def where one
// exists, forward kinds otherwise. Each rule fills dx only for the inputs ctx.need() asks for.
#include <array>
#include <numeric>

#include "ir/autodiff/grad_context.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave::autodiff_detail {
namespace {

using Dx = std::vector<TensorId>;

AttrMap copy_attrs(const Op &op, std::initializer_list<const char *> keys) {
  AttrMap out;
  for (const char *k : keys) {
    auto it = op.attrs.find(k);
    if (it != op.attrs.end()) out.emplace(k, it->second);
  }
  return out;
}

/** Every axis of a rank-r tensor but `keep`. */
std::vector<int64_t> axes_except(size_t rank, size_t keep) {
  std::vector<int64_t> axes;
  for (size_t d = 0; d < rank; ++d)
    if (d != keep) axes.push_back(static_cast<int64_t>(d));
  return axes;
}

// ---- elementwise ----

void grad_Add(GradContext &c, Dx &dx) {
  for (size_t i = 0; i < 2; ++i)
    if (c.need(i)) dx[i] = c.sum_to(c.dy(0), c.shape(c.in(i)), c.grad_name(i));
}

void grad_Sub(GradContext &c, Dx &dx) {
  if (c.need(0)) dx[0] = c.sum_to(c.dy(0), c.shape(c.in(0)), c.grad_name(0));
  if (c.need(1)) dx[1] = c.unary(OpKind::Neg, c.sum_to(c.dy(0), c.shape(c.in(1))), c.grad_name(1));
}

void grad_Mul(GradContext &c, Dx &dx) {
  for (size_t i = 0; i < 2; ++i)
    if (c.need(i)) {
      const Shape &target = c.shape(c.in(i));
      TensorId prod = c.binary(OpKind::Mul, c.dy(0), c.in(1 - i), c.shape(c.dy(0)) == target ? c.grad_name(i) : "");
      dx[i] = c.sum_to(prod, target, c.grad_name(i));
    }
}

void grad_Div(GradContext &c, Dx &dx) {
  // Y = A / B: dA = dY / B, dB = -dY * Y / B.
  if (c.need(0)) {
    const Shape &target = c.shape(c.in(0));
    TensorId q = c.binary(OpKind::Div, c.dy(0), c.in(1), c.shape(c.dy(0)) == target ? c.grad_name(0) : "");
    dx[0] = c.sum_to(q, target, c.grad_name(0));
  }
  if (c.need(1)) {
    TensorId t = c.binary(OpKind::Div, c.binary(OpKind::Mul, c.dy(0), c.out(0)), c.in(1));
    dx[1] = c.unary(OpKind::Neg, c.sum_to(t, c.shape(c.in(1))), c.grad_name(1));
  }
}

void grad_Pow(GradContext &c, Dx &dx) {
  TensorId a = c.in(0), b = c.in(1);
  Shape bshape = broadcast_shape(c.shape(a), c.shape(b));
  std::vector<TensorId> g =
      c.emit_multi(OpKind::PowGrad, {c.dy(0), a, b}, {}, {c.need(0), c.need(1)}, {c.dtype(a), c.dtype(b)},
                   {bshape, bshape},
                   {bshape == c.shape(a) ? c.grad_name(0) : "", bshape == c.shape(b) ? c.grad_name(1) : ""});
  for (size_t i = 0; i < 2; ++i)
    if (c.need(i)) dx[i] = c.sum_to(g[i], c.shape(c.in(i)), c.grad_name(i));
}

/** Rules of the form dX = Kind(dY, operand) with operand the forward input (from_output = false) or output. */
template <OpKind kGrad, bool kFromOutput>
void grad_unary_kernel(GradContext &c, Dx &dx) {
  TensorId operand = kFromOutput ? c.value_out(0) : c.in(0);
  dx[0] = c.emit(kGrad, {c.dy(0), operand}, {}, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

/** ReLU's gradient masks by its output itself (never a rounded copy: rounding to fp16 could zero tiny positives). */
void grad_relu(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::ReluGrad, {c.dy(0), c.out(0)}, {}, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}
void grad_Neg(GradContext &c, Dx &dx) { dx[0] = c.unary(OpKind::Neg, c.dy(0), c.grad_name(0)); }
void grad_Identity(GradContext &c, Dx &dx) { dx[0] = c.unary(OpKind::Identity, c.dy(0), c.grad_name(0)); }
// A cast to bfloat16 and back, as torch.autocast's: the gradient reaching the bfloat16 value is itself a bfloat16
// tensor, and the cast's backward hands it on as float.
void grad_RoundToBf16(GradContext &c, Dx &dx) { dx[0] = c.unary(OpKind::RoundToBf16, c.dy(0), c.grad_name(0)); }
// Likewise for float16: a gradient too large for binary16 becomes inf here, which --precision fp16's loss scaling
// detects (the step is skipped and the scale lowered).
void grad_RoundToFp16(GradContext &c, Dx &dx) { dx[0] = c.unary(OpKind::RoundToFp16, c.dy(0), c.grad_name(0)); }
// exp' = exp: dX = dY * Y.
void grad_Exp(GradContext &c, Dx &dx) { dx[0] = c.binary(OpKind::Mul, c.dy(0), c.value_out(0), c.grad_name(0)); }
void grad_Log(GradContext &c, Dx &dx) { dx[0] = c.binary(OpKind::Div, c.dy(0), c.in(0), c.grad_name(0)); }

template <OpKind kGrad>
void grad_softmax_like(GradContext &c, Dx &dx) {
  dx[0] = c.emit(kGrad, {c.dy(0), c.value_out(0)}, copy_attrs(c.fwd(), {"axis"}), c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

// ---- losses ----

void grad_SoftmaxCrossEntropyLoss(GradContext &c, Dx &dx) {
  // The loss gradient reads log_prob; add that output to the forward op if the model did not ask for it.
  TensorId scores = c.in(0);
  if (c.out(1) == kNoTensor) {
    Graph &g = c.graph();
    TensorId lp = g.add_tensor(g.fresh_tensor_name(c.fwd().name + ".log_prob"), c.dtype(scores), c.shape(scores),
                               Role::activation);
    Op &op = g.op(c.fwd_id());
    op.outputs.resize(2, kNoTensor);
    op.outputs[1] = lp;
    g.tensor(lp).producer = c.fwd_id();
  }
  TensorId log_prob = c.out(1);
  std::vector<TensorId> parts;
  const bool both = c.dy(0) != kNoTensor && c.dy(1) != kNoTensor;
  const std::string hint = both ? "" : c.grad_name(0);
  if (c.dy(0) != kNoTensor) {
    std::vector<TensorId> ins = {c.dy(0), log_prob, c.in(1)};
    if (c.in(2) != kNoTensor) ins.push_back(c.in(2));
    parts.push_back(c.emit(OpKind::SoftmaxCrossEntropyLossGrad, ins,
                           copy_attrs(c.fwd(), {"reduction", "ignore_index"}), c.dtype(scores), c.shape(scores),
                           hint));
  }
  if (c.dy(1) != kNoTensor)  // log_prob = LogSoftmax(scores, axis 1)
    parts.push_back(c.emit(OpKind::LogSoftmaxGrad, {c.dy(1), log_prob}, {{"axis", int64_t{1}}}, c.dtype(scores),
                           c.shape(scores), hint));
  dx[0] = parts.size() == 1 ? parts[0] : c.binary(OpKind::Add, parts[0], parts[1], c.grad_name(0));
}

void grad_NegativeLogLikelihoodLoss(GradContext &c, Dx &dx) {
  std::vector<TensorId> ins = {c.dy(0), c.in(0), c.in(1)};
  if (c.in(2) != kNoTensor) ins.push_back(c.in(2));
  dx[0] = c.emit(OpKind::NegativeLogLikelihoodLossGrad, ins, copy_attrs(c.fwd(), {"reduction", "ignore_index"}),
                 c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

// ---- linear algebra ----

void grad_MatMul(GradContext &c, Dx &dx) {
  // Y = op(A) op(B), op swapping an operand's last two dims where transA / transB say so. Promote 1-D operands as
  // numpy does ([k] -> [1,k] on the left, [k,1] on the right), differentiate the batched product, sum the gradient
  // over broadcast batch dims and drop the promoted dims again. Every transposed operand is a MatMul flag, not a copy.
  TensorId a = c.in(0), b = c.in(1);
  const Shape sa = c.shape(a), sb = c.shape(b);
  const bool ta = c.fwd().attr_int("transA", 0) != 0, tb = c.fwd().attr_int("transB", 0) != 0;
  if (sa.size() >= 2 && sb.size() == 2 && !ta) {
    // A Linear layer: B is one matrix, so A's batch dims fold into its rows ([rows, k], a free reshape of a
    // row-major tensor) and both gradients are single GEMMs: dA = dY op(B)^T, dB = A^T dY (dY^T A under transB).
    // dB accumulates over all rows inside the GEMM instead of a per-batch product summed afterwards.
    int64_t k = sa.back(), n = tb ? sb[0] : sb[1], rows = 1;
    for (size_t d = 0; d + 1 < sa.size(); ++d) rows *= sa[d];
    auto gemm = [&](TensorId x, TensorId y, int64_t tx, int64_t ty, const Shape &shape, const std::string &hint) {
      AttrMap attrs = {{"alpha", 1.0}, {"beta", 1.0}, {"transA", tx}, {"transB", ty}};
      return c.emit(OpKind::Gemm, {x, y}, attrs, c.dtype(c.dy(0)), shape, hint);
    };
    auto grad_b = [&](TensorId a_rows, TensorId dy_rows) {
      return tb ? gemm(dy_rows, a_rows, 1, 0, sb, c.grad_name(1)) : gemm(a_rows, dy_rows, 1, 0, sb, c.grad_name(1));
    };
    if (int batch = c.batch_dim(a); batch > 0 && batch + 1 < static_cast<int>(sa.size())) {
      // Time-major activations (torch's attention): folding the leading dims into rows would interleave the
      // samples, which a data-parallel split could not divide. dA = dY op(B)^T stays a batched product; dB is a
      // Gemm that sums A's and dY's leading dims as they lie (ops.def).
      if (c.need(0)) dx[0] = c.matmul(c.dy(0), b, c.grad_name(0), false, !tb);
      if (c.need(1)) dx[1] = grad_b(a, c.dy(0));
      return;
    }
    TensorId dy = c.reshape(c.dy(0), {rows, n});
    bool folded = sa.size() > 2;
    if (c.need(0))
      dx[0] = c.reshape(gemm(dy, b, 0, tb ? 0 : 1, {rows, k}, folded ? "" : c.grad_name(0)), sa, c.grad_name(0));
    if (c.need(1)) dx[1] = grad_b(c.reshape(a, {rows, k}), dy);
    return;
  }
  bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  Shape pa = a1 ? Shape{1, sa[0]} : sa, pb = b1 ? Shape{sb[0], 1} : sb;  // as stored
  Shape py = broadcast_shape(Shape(pa.begin(), pa.end() - 2), Shape(pb.begin(), pb.end() - 2));
  py.push_back(ta ? pa.back() : pa[pa.size() - 2]);
  py.push_back(tb ? pb[pb.size() - 2] : pb.back());
  TensorId dy = c.reshape(c.dy(0), py);
  TensorId ap = c.reshape(a, pa), bp = c.reshape(b, pb);
  // The hint goes to the last op that is actually emitted.
  auto finish = [&](TensorId lhs, TensorId rhs, bool tl, bool tr, const Shape &promoted, const Shape &target,
                    bool promoted_1d, const std::string &name) {
    const Shape sl = c.shape(lhs), sr = c.shape(rhs);
    Shape prod = broadcast_shape(Shape(sl.begin(), sl.end() - 2), Shape(sr.begin(), sr.end() - 2));
    prod.push_back(tl ? sl.back() : sl[sl.size() - 2]);
    prod.push_back(tr ? sr[sr.size() - 2] : sr.back());
    bool summed = prod != promoted;
    TensorId t = c.matmul(lhs, rhs, !summed && !promoted_1d ? name : "", tl, tr);
    t = c.sum_to(t, promoted, promoted_1d ? "" : name);
    return c.reshape(t, target, name);
  };
  // d op(A) = dY op(B)^T and d op(B) = op(A)^T dY; a transposed operand's gradient is the transpose of that:
  // dA = op(B) dY^T under transA, dB = dY^T op(A) under transB.
  if (c.need(0)) {
    if (ta) dx[0] = finish(bp, dy, tb, true, pa, sa, a1, c.grad_name(0));
    else dx[0] = finish(dy, bp, false, !tb, pa, sa, a1, c.grad_name(0));
  }
  if (c.need(1)) {
    if (tb) dx[1] = finish(dy, ap, true, ta, pb, sb, b1, c.grad_name(1));
    else dx[1] = finish(ap, dy, !ta, false, pb, sb, b1, c.grad_name(1));
  }
}

void grad_Gemm(GradContext &c, Dx &dx) {
  // Y = alpha * A' B' + beta * C with A' = transA ? A^T : A, B' likewise.
  const Op &f = c.fwd();
  double alpha = f.attr_float("alpha", 1.0), beta = f.attr_float("beta", 1.0);
  int64_t ta = f.attr_int("transA", 0), tb = f.attr_int("transB", 0);
  TensorId a = c.in(0), b = c.in(1), cc = c.in(2), dy = c.dy(0);
  auto gemm = [&](TensorId x, TensorId y, int64_t tx, int64_t ty, const Shape &shape, const std::string &hint) {
    AttrMap attrs = {{"alpha", alpha}, {"beta", 1.0}, {"transA", tx}, {"transB", ty}};
    return c.emit(OpKind::Gemm, {x, y}, attrs, c.dtype(dy), shape, hint);
  };
  if (c.need(0))  // dA' = alpha dY B'^T
    dx[0] = ta == 0 ? gemm(dy, b, 0, 1 - tb, c.shape(a), c.grad_name(0))
                    : gemm(b, dy, tb, 1, c.shape(a), c.grad_name(0));
  if (c.need(1))  // dB' = alpha A'^T dY
    dx[1] = tb == 0 ? gemm(a, dy, 1 - ta, 0, c.shape(b), c.grad_name(1))
                    : gemm(dy, a, 1, ta, c.shape(b), c.grad_name(1));
  if (c.need(2)) {
    bool scaled = beta != 1.0;
    TensorId t = c.sum_to(dy, c.shape(cc), scaled ? "" : c.grad_name(2));
    dx[2] = c.scale(t, beta, c.grad_name(2));
  }
}

// ---- layout ----

void grad_Reshape(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::Reshape, {c.dy(0)}, {{"shape", std::vector<int64_t>(c.shape(c.in(0)))}},
                 c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

void grad_Transpose(GradContext &c, Dx &dx) {
  size_t r = c.shape(c.in(0)).size();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(r - 1 - i);
  perm = c.fwd().attr_ints("perm", perm);
  std::vector<int64_t> inverse(r);
  for (size_t i = 0; i < r; ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  dx[0] = c.transpose(c.dy(0), inverse, c.grad_name(0));
}

void grad_Expand(GradContext &c, Dx &dx) { dx[0] = c.sum_to(c.dy(0), c.shape(c.in(0)), c.grad_name(0)); }

void grad_Concat(GradContext &c, Dx &dx) {
  int64_t axis = c.fwd().attr_int("axis");
  int64_t offset = 0;
  size_t n = c.fwd().inputs.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t len = c.shape(c.in(i))[static_cast<size_t>(axis)];
    if (c.need(i)) {
      AttrMap attrs = {{"starts", std::vector<int64_t>{offset}},
                       {"ends", std::vector<int64_t>{offset + len}},
                       {"axes", std::vector<int64_t>{axis}},
                       {"steps", std::vector<int64_t>{1}}};
      dx[i] = c.emit(OpKind::Slice, {c.dy(0)}, attrs, c.dtype(c.in(i)), c.shape(c.in(i)), c.grad_name(i));
    }
    offset += len;
  }
}

void grad_Split(GradContext &c, Dx &dx) {
  // Outputs nobody differentiates contribute zeros: a scalar 0 Expanded to their shape.
  std::vector<TensorId> parts;
  size_t n = c.fwd().outputs.size();
  for (size_t i = 0; i < n; ++i) {
    TensorId y = c.out(i);
    if (y == kNoTensor) continue;
    parts.push_back(c.dy(i) != kNoTensor ? c.dy(i) : c.expand(c.constant(0.0, c.dtype(y)), c.shape(y)));
  }
  dx[0] = c.emit(OpKind::Concat, parts, copy_attrs(c.fwd(), {"axis"}), c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

void grad_Slice(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::SliceGrad, {c.dy(0)}, c.fwd().attrs, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

void grad_Gather(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::GatherGrad, {c.dy(0), c.in(1)}, copy_attrs(c.fwd(), {"axis"}), c.dtype(c.in(0)),
                 c.shape(c.in(0)), c.grad_name(0));
}

// ---- convolution and pooling ----

void grad_Conv(GradContext &c, Dx &dx) {
  AttrMap attrs = copy_attrs(c.fwd(), {"strides", "pads", "dilations", "group"});
  TensorId x = c.in(0), w = c.in(1), b = c.in(2), dy = c.dy(0);
  if (c.need(0)) dx[0] = c.emit(OpKind::ConvGradData, {dy, w}, attrs, c.dtype(x), c.shape(x), c.grad_name(0));
  if (c.need(1)) dx[1] = c.emit(OpKind::ConvGradFilter, {dy, x}, attrs, c.dtype(w), c.shape(w), c.grad_name(1));
  if (c.need(2)) dx[2] = c.reduce_sum(dy, axes_except(c.shape(dy).size(), 1), false, c.grad_name(2));
  (void)b;
}

void grad_MaxPool(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::MaxPoolGrad, {c.dy(0), c.in(0)}, c.fwd().attrs, c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

void grad_AveragePool(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::AveragePoolGrad, {c.dy(0)}, c.fwd().attrs, c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

void grad_GlobalAveragePool(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::GlobalAveragePoolGrad, {c.dy(0)}, {}, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

// ---- reductions ----

template <bool kMean>
void grad_reduce(GradContext &c, Dx &dx) {
  const Shape &xs = c.shape(c.in(0));
  std::vector<int64_t> axes = c.fwd().attr_ints("axes");
  Shape kept = xs;
  int64_t n = 1;
  for (int64_t a : axes) {
    n *= xs[static_cast<size_t>(a)];
    kept[static_cast<size_t>(a)] = 1;
  }
  TensorId t = c.reshape(c.dy(0), kept);
  if (kMean) t = c.scale(t, 1.0 / static_cast<double>(n));
  dx[0] = c.expand(t, xs, c.grad_name(0));
  if (dx[0] == c.dy(0)) dx[0] = c.unary(OpKind::Identity, t, c.grad_name(0));  // nothing reduced (all dims 1)
}

// ---- normalisation and dropout ----

/** Adds output `slot` to the forward op if it is absent, as a new activation of the given type. */
TensorId ensure_output(GradContext &c, size_t slot, const std::string &suffix, DType dt, const Shape &shape) {
  if (c.out(slot) != kNoTensor) return c.out(slot);
  Graph &g = c.graph();
  TensorId t = g.add_tensor(g.fresh_tensor_name(c.fwd().name + "." + suffix), dt, shape, Role::activation);
  Op &op = g.op(c.fwd_id());
  if (op.outputs.size() <= slot) op.outputs.resize(slot + 1, kNoTensor);
  op.outputs[slot] = t;
  g.tensor(t).producer = c.fwd_id();
  return t;
}

void grad_BatchNormalization(GradContext &c, Dx &dx) {
  // The running mean/var operands are statistics, not trained (torch keeps them as buffers): no gradient for them.
  if (c.dy(0) == kNoTensor) return;
  TensorId x = c.in(0), scale = c.in(1), mean = c.in(3), var = c.in(4), dy = c.dy(0);
  DType dt = c.dtype(x);
  Shape cshape = c.shape(scale);
  std::vector<int64_t> red = axes_except(c.shape(x).size(), 1);
  if (c.fwd().attr_int("training_mode", 0) != 0) {
    TensorId saved_mean = ensure_output(c, 3, "saved_mean", dt, cshape);
    TensorId saved_invstd = ensure_output(c, 4, "saved_invstd", dt, cshape);
    std::vector<TensorId> g = c.emit_multi(
        OpKind::BatchNormalizationGrad, {dy, x, scale, saved_mean, saved_invstd}, copy_attrs(c.fwd(), {"epsilon"}),
        {c.need(0), c.need(1), c.need(2)}, {dt, dt, dt}, {c.shape(x), cshape, cshape},
        {c.grad_name(0), c.grad_name(1), c.grad_name(2)});
    for (size_t i = 0; i < 3; ++i) dx[i] = g[i];
    return;
  }
  // Inference: Y = (X - mean) / std * scale + B with std = sqrt(var + eps), a per-channel affine map.
  Shape bshape(c.shape(x).size(), 1);
  bshape[1] = cshape[0];
  TensorId std_dev = c.unary(OpKind::Sqrt, c.binary(OpKind::Add, var, c.constant(c.fwd().attr_float("epsilon", 1e-5), dt)));
  if (c.need(0)) {
    TensorId s = c.reshape(c.binary(OpKind::Div, scale, std_dev), bshape);
    dx[0] = c.binary(OpKind::Mul, dy, s, c.grad_name(0));
  }
  if (c.need(1)) {
    TensorId xhat = c.binary(OpKind::Div, c.binary(OpKind::Sub, x, c.reshape(mean, bshape)), c.reshape(std_dev, bshape));
    dx[1] = c.reduce_sum(c.binary(OpKind::Mul, dy, xhat), red, false, c.grad_name(1));
  }
  if (c.need(2)) dx[2] = c.reduce_sum(dy, red, false, c.grad_name(2));
}

void grad_Dropout(GradContext &c, Dx &dx) {
  const Op &f = c.fwd();
  double ratio = f.attr_float("ratio", 0.5);
  if (f.attr_int("training_mode", 0) == 0 || ratio == 0.0) {
    dx[0] = c.unary(OpKind::Identity, c.dy(0), c.grad_name(0));
    return;
  }
  TensorId mask = ensure_output(c, 1, "mask", DType::boolean, c.shape(c.in(0)));
  dx[0] = c.emit(OpKind::DropoutGrad, {c.dy(0), mask}, {{"ratio", ratio}}, c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

// ---- masks, selections, padding, layer norm ----

void grad_Reciprocal(GradContext &c, Dx &dx) {
  // Y = 1 / X: dX = -dY * Y * Y.
  TensorId t = c.binary(OpKind::Mul, c.binary(OpKind::Mul, c.dy(0), c.out(0)), c.out(0));
  dx[0] = c.unary(OpKind::Neg, t, c.grad_name(0));
}

void grad_Where(GradContext &c, Dx &dx) {
  // The selected operand gets dY, the other zeros; each is summed back over its broadcast dims.
  TensorId dy = c.dy(0), zero = c.constant(0.0, c.dtype(dy));
  for (size_t i = 1; i <= 2; ++i) {
    if (!c.need(i)) continue;
    const Shape target = c.shape(c.in(i));
    std::vector<TensorId> ins = i == 1 ? std::vector<TensorId>{c.in(0), dy, zero} : std::vector<TensorId>{c.in(0), zero, dy};
    TensorId sel = c.emit(OpKind::Where, ins, {}, c.dtype(dy), c.shape(dy), target == c.shape(dy) ? c.grad_name(i) : "");
    dx[i] = c.sum_to(sel, target, c.grad_name(i));
  }
}

void grad_Cast(GradContext &c, Dx &dx) {
  // Only float-to-float casts carry a gradient (integer and bool outputs are never differentiated).
  if (c.dy(0) == kNoTensor) return;
  DType from = c.dtype(c.in(0));
  dx[0] = c.emit(OpKind::Cast, {c.dy(0)}, {{"to", std::string(dtype_name(from))}}, from, c.shape(c.in(0)),
                 c.grad_name(0));
}

void grad_max_min(GradContext &c, Dx &dx) {
  // Each input equal to the result gets dY; ties share it evenly, as torch.maximum/minimum do.
  size_t n = c.fwd().inputs.size();
  TensorId y = c.out(0), dy = c.dy(0);
  DType dt = c.dtype(y);
  const Shape ys = c.shape(y);
  AttrMap to = {{"to", std::string(dtype_name(dt))}};
  std::vector<TensorId> masks(n);
  TensorId count = kNoTensor;
  for (size_t i = 0; i < n; ++i) {
    masks[i] = c.emit(OpKind::Equal, {c.in(i), y}, {}, DType::boolean, ys);
    TensorId f = c.emit(OpKind::Cast, {masks[i]}, to, dt, ys);
    count = count == kNoTensor ? f : c.binary(OpKind::Add, count, f);
  }
  TensorId share = c.binary(OpKind::Div, dy, count), zero = c.constant(0.0, dt);
  for (size_t i = 0; i < n; ++i) {
    if (!c.need(i)) continue;
    const Shape target = c.shape(c.in(i));
    TensorId sel = c.emit(OpKind::Where, {masks[i], share, zero}, {}, dt, ys, target == ys ? c.grad_name(i) : "");
    dx[i] = c.sum_to(sel, target, c.grad_name(i));
  }
}

void grad_reduce_extreme(GradContext &c, Dx &dx) {
  // dY goes to the elements equal to the result, split evenly among ties (torch.amax/amin).
  TensorId x = c.in(0);
  const Shape xs = c.shape(x);
  DType dt = c.dtype(x);
  std::vector<int64_t> axes = c.fwd().attr_ints("axes");
  Shape kept = xs;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  TensorId y = c.reshape(c.out(0), kept), dy = c.reshape(c.dy(0), kept);
  TensorId mask = c.emit(OpKind::Equal, {x, y}, {}, DType::boolean, xs);
  TensorId hits = c.emit(OpKind::Cast, {mask}, {{"to", std::string(dtype_name(dt))}}, dt, xs);
  TensorId share = c.binary(OpKind::Div, dy, c.reduce_sum(hits, axes, true));
  dx[0] = c.emit(OpKind::Where, {mask, share, c.constant(0.0, dt)}, {}, dt, xs, c.grad_name(0));
}

void grad_Pad(GradContext &c, Dx &dx) {
  // Constant padding's adjoint is padding by the negated amounts: crop what was added, zero-fill what was cropped.
  // Edge and reflect padding also route the padded gradient back onto border elements (a scatter-add).
  if (c.fwd().has_attr("mode"))
    CLEAVE_USER_ERROR("op \"", c.fwd().name, "\" (Pad): the gradient of ", c.fwd().attr_string("mode"),
                      "-mode padding is not supported (only constant)");
  std::vector<int64_t> pads = c.fwd().attr_ints("pads");
  for (int64_t &p : pads) p = -p;
  dx[0] = c.emit(OpKind::Pad, {c.dy(0)}, {{"pads", pads}, {"value", 0.0}}, c.dtype(c.in(0)), c.shape(c.in(0)),
                 c.grad_name(0));
}

void grad_LayerNormalization(GradContext &c, Dx &dx) {
  if (c.dy(1) != kNoTensor || c.dy(2) != kNoTensor)
    CLEAVE_USER_ERROR("op \"", c.fwd().name, "\" (LayerNormalization): the loss depends on its mean or invstd output, ",
                      "whose gradient is not supported");
  TensorId x = c.in(0), scale = c.in(1);
  int64_t axis = c.fwd().attr_int("axis");
  Shape stat = c.shape(x);
  for (size_t d = static_cast<size_t>(axis); d < stat.size(); ++d) stat[d] = 1;
  TensorId mean = ensure_output(c, 1, "mean", DType::f32, stat);
  TensorId invstd = ensure_output(c, 2, "invstd", DType::f32, stat);
  DType dt = c.dtype(x);
  std::vector<TensorId> g = c.emit_multi(
      OpKind::LayerNormalizationGrad, {c.dy(0), x, scale, mean, invstd}, {{"axis", axis}},
      {c.need(0), c.need(1), c.need(2)}, {dt, dt, dt}, {c.shape(x), c.shape(scale), c.shape(scale)},
      {c.grad_name(0), c.grad_name(1), c.need(2) ? c.grad_name(2) : ""});
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = g[i];  // 2 inputs without a bias B, else 3
}

// ---- image layers ----

void grad_InstanceNormalization(GradContext &c, Dx &dx) {
  if (c.dy(1) != kNoTensor || c.dy(2) != kNoTensor)
    CLEAVE_USER_ERROR("op \"", c.fwd().name, "\" (InstanceNormalization): the loss depends on its mean or invstd ",
                      "output, whose gradient is not supported");
  TensorId x = c.in(0), scale = c.in(1);
  Shape stat{c.shape(x)[0], c.shape(x)[1]};
  TensorId mean = ensure_output(c, 1, "mean", DType::f32, stat);
  TensorId invstd = ensure_output(c, 2, "invstd", DType::f32, stat);
  DType dt = c.dtype(x);
  std::vector<TensorId> g = c.emit_multi(
      OpKind::InstanceNormalizationGrad, {c.dy(0), x, scale, mean, invstd}, {}, {c.need(0), c.need(1), c.need(2)},
      {dt, dt, dt}, {c.shape(x), c.shape(scale), c.shape(scale)},
      {c.grad_name(0), c.need(1) ? c.grad_name(1) : "", c.need(2) ? c.grad_name(2) : ""});
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = g[i];
}

void grad_ConvTranspose(GradContext &c, Dx &dx) {
  // Y = ConvGradData(X, W) + B, so dX = Conv(dY, W) and dW = ConvGradFilter with X and dY in the roles of the
  // Conv's dY and X: dW[ci, co, k] = sum X[b, ci, o] * dY[b, co, o*s + k*dil - pad].
  AttrMap attrs = copy_attrs(c.fwd(), {"strides", "pads", "dilations", "group"});
  TensorId x = c.in(0), w = c.in(1), dy = c.dy(0);
  if (c.need(0)) dx[0] = c.emit(OpKind::Conv, {dy, w}, attrs, c.dtype(x), c.shape(x), c.grad_name(0));
  if (c.need(1)) dx[1] = c.emit(OpKind::ConvGradFilter, {x, dy}, attrs, c.dtype(w), c.shape(w), c.grad_name(1));
  if (c.need(2)) dx[2] = c.reduce_sum(dy, axes_except(c.shape(dy).size(), 1), false, c.grad_name(2));
}

void grad_Resize(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::ResizeGrad, {c.dy(0)}, c.fwd().attrs, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

// ---- index and scan ops ----

void grad_CumSum(GradContext &c, Dx &dx) {
  // Each X element feeds the outputs after it (before it, reversed): dX is the cumsum of dY the other way round.
  AttrMap attrs = copy_attrs(c.fwd(), {"axis", "exclusive", "reverse"});
  attrs["reverse"] = int64_t{c.fwd().attr_int("reverse", 0) != 0 ? 0 : 1};
  dx[0] = c.emit(OpKind::CumSum, {c.dy(0)}, attrs, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

void grad_Mod(GradContext &c, Dx &dx) {
  // C = A - q * B with q = trunc(A / B) (fmod) or floor(A / B), piecewise constant: dA = dY, dB = -dY * q (torch's
  // fmod/remainder backward). q is read back as round((A - C) / B), exact where the division is within half a unit.
  TensorId dy = c.dy(0);
  if (c.need(0)) dx[0] = c.sum_to(dy, c.shape(c.in(0)), c.grad_name(0));
  if (c.need(1)) {
    TensorId q = c.unary(OpKind::Round, c.binary(OpKind::Div, c.binary(OpKind::Sub, c.in(0), c.out(0)), c.in(1)));
    dx[1] = c.unary(OpKind::Neg, c.sum_to(c.binary(OpKind::Mul, dy, q), c.shape(c.in(1))), c.grad_name(1));
  }
}

void grad_OneHot(GradContext &c, Dx &dx) {
  // Y = values[1] at the hits, values[0] elsewhere: dvalues = [sum of dY off the hits, sum of dY on them].
  if (!c.need(1)) return;
  TensorId dy = c.dy(0);
  DType dt = c.dtype(dy);
  const Shape ys = c.shape(dy);
  Tensor unit;
  unit.name = c.graph().fresh_tensor_name(c.fwd().name + ".grad.unit");
  unit.dtype = dt;
  unit.shape = {2};
  unit.role = Role::constant;
  unit.data = encode_doubles(dt, {0.0, 1.0});
  TensorId unit_id = c.graph().add_tensor(std::move(unit));
  TensorId hits = c.emit(OpKind::OneHot, {c.in(0), unit_id}, copy_attrs(c.fwd(), {"axis", "depth"}), dt, ys);
  std::vector<int64_t> all(ys.size());
  std::iota(all.begin(), all.end(), 0);
  TensorId on = c.reduce_sum(c.binary(OpKind::Mul, dy, hits), all, false);
  TensorId off = c.binary(OpKind::Sub, c.reduce_sum(dy, all, false), on);
  dx[1] = c.emit(OpKind::Concat, {c.reshape(off, {1}), c.reshape(on, {1})}, {{"axis", int64_t{0}}}, dt, {2},
                 c.grad_name(1));
}

// ---- element-wise and N-d indexing ----

/** Zeros of `shape` (a scalar constant expanded: no data of the full size in the graph). */
TensorId zeros(GradContext &c, DType dt, const Shape &shape) { return c.expand(c.constant(0.0, dt), shape); }

void grad_GatherElements(GradContext &c, Dx &dx) {
  // ddata = zeros with dY scatter-added where the gather read (repeated indices accumulate).
  TensorId data = c.in(0);
  AttrMap attrs = copy_attrs(c.fwd(), {"axis"});
  attrs["reduction"] = std::string("add");
  dx[0] = c.emit(OpKind::ScatterElements, {zeros(c, c.dtype(data), c.shape(data)), c.in(1), c.dy(0)}, attrs,
                 c.dtype(data), c.shape(data), c.grad_name(0));
}

void grad_ScatterElements(GradContext &c, Dx &dx) {
  // dupdates = dY gathered at the targets; ddata = dY, with the overwritten targets zeroed unless updates are added
  // (torch's scatter/scatter_add backward).
  TensorId dy = c.dy(0), ind = c.in(1);
  bool add = c.fwd().has_attr("reduction") && c.fwd().attr_string("reduction") == "add";
  AttrMap axis = copy_attrs(c.fwd(), {"axis"});
  if (c.need(0)) {
    if (add) {
      dx[0] = c.unary(OpKind::Identity, dy, c.grad_name(0));
    } else {
      AttrMap attrs = axis;
      attrs["reduction"] = std::string("none");
      TensorId z = zeros(c, c.dtype(dy), c.shape(c.in(2)));
      dx[0] = c.emit(OpKind::ScatterElements, {dy, ind, z}, attrs, c.dtype(dy), c.shape(dy), c.grad_name(0));
    }
  }
  if (c.need(2))
    dx[2] = c.emit(OpKind::GatherElements, {dy, ind}, axis, c.dtype(dy), c.shape(c.in(2)), c.grad_name(2));
}

void grad_GatherND(GradContext &c, Dx &dx) {
  dx[0] = c.emit(OpKind::GatherNDGrad, {c.dy(0), c.in(1)}, copy_attrs(c.fwd(), {"batch_dims"}), c.dtype(c.in(0)),
                 c.shape(c.in(0)), c.grad_name(0));
}

// ---- activations and rounding ----

/** dX = Kind(dY, X) carrying the forward's attributes (alpha, min/max, ...). */
template <OpKind kGrad>
void grad_activation(GradContext &c, Dx &dx) {
  dx[0] = c.emit(kGrad, {c.dy(0), c.in(0)}, c.fwd().attrs, c.dtype(c.in(0)), c.shape(c.in(0)), c.grad_name(0));
}

void grad_PRelu(GradContext &c, Dx &dx) {
  TensorId x = c.in(0), slope = c.in(1);
  const Shape xs = c.shape(x);
  bool whole = c.shape(slope) == xs;
  std::vector<TensorId> g = c.emit_multi(OpKind::PReluGrad, {c.dy(0), x, slope}, {}, {c.need(0), c.need(1)},
                                         {c.dtype(x), c.dtype(slope)}, {xs, xs},
                                         {c.grad_name(0), whole ? c.grad_name(1) : ""});
  if (c.need(0)) dx[0] = g[0];
  if (c.need(1)) dx[1] = c.sum_to(g[1], c.shape(slope), c.grad_name(1));
}

/** Piecewise-constant ops (Sign, Floor, Ceil, Round): torch's gradient is zero, so nothing flows back. */
void grad_zero(GradContext &, Dx &) {}

// torch.abs: dX = dY * sgn(X) (0 at 0 and at NaN).
void grad_Abs(GradContext &c, Dx &dx) {
  dx[0] = c.binary(OpKind::Mul, c.dy(0), c.unary(OpKind::Sign, c.in(0)), c.grad_name(0));
}

// ---- the table ----

constexpr GradRule rule(GradFn fn) { return {Differentiability::differentiable, fn}; }
constexpr GradRule kNoRule = {Differentiability::no_rule, nullptr};

// One named entry per kind of ops.def; the table below is generated from ops.def, so a new kind fails to compile
// until it gets an entry here. (Integer operands such as Gather's indices or the loss labels are skipped by dtype.)
constexpr GradRule kRule_Gemm = rule(grad_Gemm);
constexpr GradRule kRule_MatMul = rule(grad_MatMul);
constexpr GradRule kRule_Add = rule(grad_Add);
constexpr GradRule kRule_Sub = rule(grad_Sub);
constexpr GradRule kRule_Mul = rule(grad_Mul);
constexpr GradRule kRule_Div = rule(grad_Div);
constexpr GradRule kRule_Pow = rule(grad_Pow);
constexpr GradRule kRule_Sqrt = rule(grad_unary_kernel<OpKind::SqrtGrad, true>);
constexpr GradRule kRule_Neg = rule(grad_Neg);
constexpr GradRule kRule_Exp = rule(grad_Exp);
constexpr GradRule kRule_Log = rule(grad_Log);
constexpr GradRule kRule_Erf = rule(grad_unary_kernel<OpKind::ErfGrad, false>);
// ReLU's gradient masks by its output (y > 0 exactly where x > 0, NaN for NaN), as torch's threshold_backward does:
// then ReLU's input, often a norm's output, need not live until the backward pass.
constexpr GradRule kRule_Relu = rule(grad_relu);
constexpr GradRule kRule_Sigmoid = rule(grad_unary_kernel<OpKind::SigmoidGrad, true>);
constexpr GradRule kRule_Tanh = rule(grad_unary_kernel<OpKind::TanhGrad, true>);
constexpr GradRule kRule_Identity = rule(grad_Identity);
constexpr GradRule kRule_Softmax = rule(grad_softmax_like<OpKind::SoftmaxGrad>);
constexpr GradRule kRule_LogSoftmax = rule(grad_softmax_like<OpKind::LogSoftmaxGrad>);
constexpr GradRule kRule_SoftmaxCrossEntropyLoss = rule(grad_SoftmaxCrossEntropyLoss);
constexpr GradRule kRule_NegativeLogLikelihoodLoss = rule(grad_NegativeLogLikelihoodLoss);
constexpr GradRule kRule_Reshape = rule(grad_Reshape);
constexpr GradRule kRule_Transpose = rule(grad_Transpose);
constexpr GradRule kRule_Expand = rule(grad_Expand);
constexpr GradRule kRule_Concat = rule(grad_Concat);
constexpr GradRule kRule_Split = rule(grad_Split);
constexpr GradRule kRule_Slice = rule(grad_Slice);
constexpr GradRule kRule_Gather = rule(grad_Gather);
constexpr GradRule kRule_Conv = rule(grad_Conv);
constexpr GradRule kRule_MaxPool = rule(grad_MaxPool);
constexpr GradRule kRule_AveragePool = rule(grad_AveragePool);
constexpr GradRule kRule_GlobalAveragePool = rule(grad_GlobalAveragePool);
constexpr GradRule kRule_ReduceMean = rule(grad_reduce<true>);
constexpr GradRule kRule_ReduceSum = rule(grad_reduce<false>);
constexpr GradRule kRule_BatchNormalization = rule(grad_BatchNormalization);
constexpr GradRule kRule_Dropout = rule(grad_Dropout);
constexpr GradRule kRule_Reciprocal = rule(grad_Reciprocal);
constexpr GradRule kRule_Where = rule(grad_Where);
constexpr GradRule kRule_Cast = rule(grad_Cast);
// Comparisons and logic produce bools: nothing flows back through them.
constexpr GradRule kNonDifferentiable = {Differentiability::non_differentiable, nullptr};
constexpr GradRule kRule_Equal = kNonDifferentiable;
constexpr GradRule kRule_Less = kNonDifferentiable;
constexpr GradRule kRule_Greater = kNonDifferentiable;
constexpr GradRule kRule_LessOrEqual = kNonDifferentiable;
constexpr GradRule kRule_GreaterOrEqual = kNonDifferentiable;
constexpr GradRule kRule_Not = kNonDifferentiable;
constexpr GradRule kRule_And = kNonDifferentiable;
constexpr GradRule kRule_Or = kNonDifferentiable;
constexpr GradRule kRule_Xor = kNonDifferentiable;
constexpr GradRule kRule_Max = rule(grad_max_min);
constexpr GradRule kRule_Min = rule(grad_max_min);
constexpr GradRule kRule_Pad = rule(grad_Pad);
constexpr GradRule kRule_ReduceMax = rule(grad_reduce_extreme);
constexpr GradRule kRule_ReduceMin = rule(grad_reduce_extreme);
constexpr GradRule kRule_LayerNormalization = rule(grad_LayerNormalization);
constexpr GradRule kRule_Clip = rule(grad_activation<OpKind::ClipGrad>);
constexpr GradRule kRule_HardSigmoid = rule(grad_activation<OpKind::HardSigmoidGrad>);
constexpr GradRule kRule_HardSwish = rule(grad_activation<OpKind::HardSwishGrad>);
constexpr GradRule kRule_Gelu = rule(grad_activation<OpKind::GeluGrad>);
constexpr GradRule kRule_LeakyRelu = rule(grad_activation<OpKind::LeakyReluGrad>);
constexpr GradRule kRule_Elu = rule(grad_activation<OpKind::EluGrad>);
constexpr GradRule kRule_Selu = rule(grad_activation<OpKind::SeluGrad>);
constexpr GradRule kRule_Celu = rule(grad_activation<OpKind::CeluGrad>);
constexpr GradRule kRule_PRelu = rule(grad_PRelu);
constexpr GradRule kRule_Softplus = rule(grad_activation<OpKind::SoftplusGrad>);
constexpr GradRule kRule_Softsign = rule(grad_activation<OpKind::SoftsignGrad>);
constexpr GradRule kRule_ThresholdedRelu = rule(grad_activation<OpKind::ThresholdedReluGrad>);
constexpr GradRule kRule_Abs = rule(grad_Abs);
constexpr GradRule kRule_Sign = rule(grad_zero);
constexpr GradRule kRule_Floor = rule(grad_zero);
constexpr GradRule kRule_Ceil = rule(grad_zero);
constexpr GradRule kRule_Round = rule(grad_zero);
constexpr GradRule kRule_RoundToBf16 = rule(grad_RoundToBf16);
constexpr GradRule kRule_RoundToFp16 = rule(grad_RoundToFp16);
constexpr GradRule kRule_InstanceNormalization = rule(grad_InstanceNormalization);
constexpr GradRule kRule_ConvTranspose = rule(grad_ConvTranspose);
constexpr GradRule kRule_Resize = rule(grad_Resize);
// ArgMax/ArgMin give int64 positions: no gradient flows back through them.
constexpr GradRule kRule_ArgMax = kNonDifferentiable;
constexpr GradRule kRule_ArgMin = kNonDifferentiable;
constexpr GradRule kRule_TopKIndices = kNonDifferentiable;  // TopK's values flow through its GatherElements
constexpr GradRule kRule_CumSum = rule(grad_CumSum);
constexpr GradRule kRule_Mod = rule(grad_Mod);
constexpr GradRule kRule_OneHot = rule(grad_OneHot);
constexpr GradRule kRule_GatherElements = rule(grad_GatherElements);
constexpr GradRule kRule_ScatterElements = rule(grad_ScatterElements);
constexpr GradRule kRule_GatherND = rule(grad_GatherND);
// The trigonometric and hyperbolic functions: dX = <Kind>Grad(dY, X) (Tan: of Y, as torch: dY * (1 + y^2)).
constexpr GradRule kRule_Sin = rule(grad_unary_kernel<OpKind::SinGrad, false>);
constexpr GradRule kRule_Cos = rule(grad_unary_kernel<OpKind::CosGrad, false>);
constexpr GradRule kRule_Tan = rule(grad_unary_kernel<OpKind::TanGrad, true>);
constexpr GradRule kRule_Asin = rule(grad_unary_kernel<OpKind::AsinGrad, false>);
constexpr GradRule kRule_Acos = rule(grad_unary_kernel<OpKind::AcosGrad, false>);
constexpr GradRule kRule_Atan = rule(grad_unary_kernel<OpKind::AtanGrad, false>);
constexpr GradRule kRule_Sinh = rule(grad_unary_kernel<OpKind::SinhGrad, false>);
constexpr GradRule kRule_Cosh = rule(grad_unary_kernel<OpKind::CoshGrad, false>);
constexpr GradRule kRule_Asinh = rule(grad_unary_kernel<OpKind::AsinhGrad, false>);
constexpr GradRule kRule_Acosh = rule(grad_unary_kernel<OpKind::AcoshGrad, false>);
constexpr GradRule kRule_Atanh = rule(grad_unary_kernel<OpKind::AtanhGrad, false>);
constexpr GradRule kRule_RandomLike = rule(grad_zero);  // Y does not depend on X's values
// Backward kinds: autodiff emits them, it never differentiates them.
constexpr GradRule kRule_ReluGrad = kNoRule;
constexpr GradRule kRule_SigmoidGrad = kNoRule;
constexpr GradRule kRule_TanhGrad = kNoRule;
constexpr GradRule kRule_ErfGrad = kNoRule;
constexpr GradRule kRule_SqrtGrad = kNoRule;
constexpr GradRule kRule_PowGrad = kNoRule;
constexpr GradRule kRule_SoftmaxGrad = kNoRule;
constexpr GradRule kRule_LogSoftmaxGrad = kNoRule;
constexpr GradRule kRule_SoftmaxCrossEntropyLossGrad = kNoRule;
constexpr GradRule kRule_NegativeLogLikelihoodLossGrad = kNoRule;
constexpr GradRule kRule_ConvGradData = kNoRule;
constexpr GradRule kRule_ConvGradFilter = kNoRule;
constexpr GradRule kRule_MaxPoolGrad = kNoRule;
constexpr GradRule kRule_AveragePoolGrad = kNoRule;
constexpr GradRule kRule_GlobalAveragePoolGrad = kNoRule;
constexpr GradRule kRule_BatchNormalizationGrad = kNoRule;
constexpr GradRule kRule_DropoutGrad = kNoRule;
constexpr GradRule kRule_SliceGrad = kNoRule;
constexpr GradRule kRule_GatherGrad = kNoRule;
constexpr GradRule kRule_GatherNDGrad = kNoRule;
constexpr GradRule kRule_LayerNormalizationGrad = kNoRule;
constexpr GradRule kRule_InstanceNormalizationGrad = kNoRule;
constexpr GradRule kRule_ResizeGrad = kNoRule;
constexpr GradRule kRule_ClipGrad = kNoRule;
constexpr GradRule kRule_HardSigmoidGrad = kNoRule;
constexpr GradRule kRule_HardSwishGrad = kNoRule;
constexpr GradRule kRule_GeluGrad = kNoRule;
constexpr GradRule kRule_LeakyReluGrad = kNoRule;
constexpr GradRule kRule_EluGrad = kNoRule;
constexpr GradRule kRule_SeluGrad = kNoRule;
constexpr GradRule kRule_CeluGrad = kNoRule;
constexpr GradRule kRule_PReluGrad = kNoRule;
constexpr GradRule kRule_SoftplusGrad = kNoRule;
constexpr GradRule kRule_SoftsignGrad = kNoRule;
constexpr GradRule kRule_ThresholdedReluGrad = kNoRule;
constexpr GradRule kRule_SinGrad = kNoRule;
constexpr GradRule kRule_CosGrad = kNoRule;
constexpr GradRule kRule_TanGrad = kNoRule;
constexpr GradRule kRule_AsinGrad = kNoRule;
constexpr GradRule kRule_AcosGrad = kNoRule;
constexpr GradRule kRule_AtanGrad = kNoRule;
constexpr GradRule kRule_SinhGrad = kNoRule;
constexpr GradRule kRule_CoshGrad = kNoRule;
constexpr GradRule kRule_AsinhGrad = kNoRule;
constexpr GradRule kRule_AcoshGrad = kNoRule;
constexpr GradRule kRule_AtanhGrad = kNoRule;
// Update kinds: the optimizer step is not differentiated.
constexpr GradRule kRule_SGDUpdate = kNoRule;
constexpr GradRule kRule_MomentumUpdate = kNoRule;
constexpr GradRule kRule_AdamUpdate = kNoRule;
constexpr GradRule kRule_Momentum = kNoRule;
constexpr GradRule kRule_Adam = kNoRule;
constexpr GradRule kRule_Adagrad = kNoRule;

constexpr std::array<GradRule, kNumOpKinds> kRules = {
#define CLEAVE_OP(name) kRule_##name,
#include "ir/ops.def"
#undef CLEAVE_OP
};
static_assert(kNumOpKinds == 148, "ops.def changed: give the new kind a kRule_ entry above, then update this count");

}  // namespace

const GradRule &grad_rule(OpKind kind) { return kRules[static_cast<size_t>(kind)]; }

}  // namespace cleave::autodiff_detail
