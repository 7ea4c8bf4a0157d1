// Elementwise kernels: broadcast binary ops, unary math (trigonometric and hyperbolic functions too), their gradients,
// Dropout, RandomLike.
#include <cmath>

#include "ir/interp/kernels.h"
#include "ir/rng.h"

namespace cleave::interp {
namespace {

template <typename F>
void binary(const KernelArgs &k, F f) {
  const Value &a = k.in(0);
  const Value &b = k.in(1);
  Shape shape = broadcast_shape(k, a.shape, b.shape);
  k.expect_out_shape(0, shape);
  std::vector<int64_t> ia = broadcast_index_map(a.shape, shape);
  std::vector<int64_t> ib = broadcast_index_map(b.shape, shape);
  Value &y = k.out(0);
  for (size_t i = 0; i < y.data.size(); ++i) y.data[i] = f(a.data[ia[i]], b.data[ib[i]]);
}

}  // namespace

void kernel_Add(const KernelArgs &k) { binary(k, [](double a, double b) { return a + b; }); }
void kernel_Sub(const KernelArgs &k) { binary(k, [](double a, double b) { return a - b; }); }
void kernel_Mul(const KernelArgs &k) { binary(k, [](double a, double b) { return a * b; }); }

void kernel_Div(const KernelArgs &k) {
  if (is_integer(k.out(0).dtype)) {
    // Integer division truncates (C semantics, as ONNX runtimes do). C leaves x / 0 undefined; numpy gives 0, and
    // so do Mod and Cleave's kernels, so a run gives the same numbers in eval and in a bundle.
    binary(k, [](double a, double b) { return b == 0 ? 0.0 : std::trunc(a / b); });
  } else {
    binary(k, [](double a, double b) { return a / b; });
  }
}

void kernel_Pow(const KernelArgs &k) {
  // The result has the base's dtype; an integer result of an integer power is exact in double below 2^53.
  bool int_out = is_integer(k.out(0).dtype);
  binary(k, [int_out](double a, double b) {
    double r = std::pow(a, b);
    return int_out ? std::trunc(r) : r;
  });
}

void kernel_Sqrt(const KernelArgs &k) { unary(k, [](double x) { return std::sqrt(x); }); }
void kernel_Neg(const KernelArgs &k) { unary(k, [](double x) { return -x; }); }
void kernel_Exp(const KernelArgs &k) { unary(k, [](double x) { return std::exp(x); }); }
void kernel_Log(const KernelArgs &k) { unary(k, [](double x) { return std::log(x); }); }
void kernel_Erf(const KernelArgs &k) { unary(k, [](double x) { return std::erf(x); }); }
void kernel_Relu(const KernelArgs &k) { unary(k, [](double x) { return x <= 0 ? 0.0 : x; }); }  // NaN stays NaN
void kernel_Sigmoid(const KernelArgs &k) { unary(k, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }); }
void kernel_Tanh(const KernelArgs &k) { unary(k, [](double x) { return std::tanh(x); }); }
void kernel_Identity(const KernelArgs &k) { unary(k, [](double x) { return x; }); }

// Trigonometric and hyperbolic functions: NaN outside their domains, as std:: gives it.
void kernel_Sin(const KernelArgs &k) { unary(k, [](double x) { return std::sin(x); }); }
void kernel_Cos(const KernelArgs &k) { unary(k, [](double x) { return std::cos(x); }); }
void kernel_Tan(const KernelArgs &k) { unary(k, [](double x) { return std::tan(x); }); }
void kernel_Asin(const KernelArgs &k) { unary(k, [](double x) { return std::asin(x); }); }
void kernel_Acos(const KernelArgs &k) { unary(k, [](double x) { return std::acos(x); }); }
void kernel_Atan(const KernelArgs &k) { unary(k, [](double x) { return std::atan(x); }); }
void kernel_Sinh(const KernelArgs &k) { unary(k, [](double x) { return std::sinh(x); }); }
void kernel_Cosh(const KernelArgs &k) { unary(k, [](double x) { return std::cosh(x); }); }
void kernel_Asinh(const KernelArgs &k) { unary(k, [](double x) { return std::asinh(x); }); }
void kernel_Acosh(const KernelArgs &k) { unary(k, [](double x) { return std::acosh(x); }); }
void kernel_Atanh(const KernelArgs &k) { unary(k, [](double x) { return std::atanh(x); }); }

void kernel_ReluGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return x <= 0 ? 0.0 : dy; });  // torch: NaN passes dY
}
void kernel_SigmoidGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double y) { return dy * y * (1.0 - y); });
}
void kernel_TanhGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double y) { return dy * (1.0 - y * y); });
}
void kernel_ErfGrad(const KernelArgs &k) {
  const double two_over_sqrt_pi = 2.0 / std::sqrt(M_PI);
  unary_grad(k, [&](double dy, double x) { return dy * two_over_sqrt_pi * std::exp(-x * x); });
}
void kernel_SqrtGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double y) { return dy / (2.0 * y); });
}

// torch's backward formulas (derivatives.yaml); TanGrad reads Y, the others X.
void kernel_SinGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return dy * std::cos(x); }); }
void kernel_CosGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return -dy * std::sin(x); }); }
void kernel_TanGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double y) { return dy * (1.0 + y * y); }); }
void kernel_AsinGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return dy / std::sqrt(1.0 - x * x); });
}
void kernel_AcosGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return -dy / std::sqrt(1.0 - x * x); });
}
void kernel_AtanGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return dy / (1.0 + x * x); }); }
void kernel_SinhGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return dy * std::cosh(x); }); }
void kernel_CoshGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return dy * std::sinh(x); }); }
void kernel_AsinhGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return dy / std::sqrt(x * x + 1.0); });
}
void kernel_AcoshGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return dy / std::sqrt(x * x - 1.0); });
}
void kernel_AtanhGrad(const KernelArgs &k) { unary_grad(k, [](double dy, double x) { return dy / (1.0 - x * x); }); }

void kernel_PowGrad(const KernelArgs &k) {
  // (dY, A, B) -> (dA?, dB?), both in the broadcast shape (autodiff reduces them to A's and B's shapes).
  const Value &dy = k.in(0);
  const Value &a = k.in(1);
  const Value &b = k.in(2);
  Shape shape = broadcast_shape(k, a.shape, b.shape);
  CLEAVE_CHECK(dy.shape == shape, k.label(), ": dY ", shape_str(dy.shape), " vs ", shape_str(shape));
  k.expect_out_shape(0, shape);
  k.expect_out_shape(1, shape);
  std::vector<int64_t> ia = broadcast_index_map(a.shape, shape);
  std::vector<int64_t> ib = broadcast_index_map(b.shape, shape);
  for (size_t i = 0; i < dy.data.size(); ++i) {
    double av = a.data[ia[i]], bv = b.data[ib[i]];
    if (k.has_out(0)) k.outs[0]->data[i] = dy.data[i] * bv * std::pow(av, bv - 1.0);
    if (k.has_out(1)) k.outs[1]->data[i] = dy.data[i] * std::pow(av, bv) * std::log(av);
  }
}

void kernel_Dropout(const KernelArgs &k) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  k.expect_out_shape(1, x.shape);
  double ratio = k.op.attr_float("ratio", 0.5);
  bool training = k.op.attr_int("training_mode", 0) != 0 && !k.ctx.inference;
  if (ratio < 0 || ratio >= 1) CLEAVE_USER_ERROR(k.label(), ": ratio ", ratio, " is not in [0, 1)");
  uint64_t seed = static_cast<uint64_t>(k.op.attr_int("seed", 0));
  Value &y = k.out(0);
  float ratio_f = static_cast<float>(ratio);
  double scale = 1.0 / (1.0 - ratio);
  for (size_t i = 0; i < x.data.size(); ++i) {
    bool keep = !training || ratio == 0 || dropout_keep(seed, k.ctx.step, static_cast<int64_t>(i), ratio_f);
    y.data[i] = keep ? (training ? x.data[i] * scale : x.data[i]) : 0.0;
    if (k.has_out(1)) k.outs[1]->data[i] = keep ? 1.0 : 0.0;
  }
}

void kernel_RandomLike(const KernelArgs &k) {
  k.expect_out_shape(0, k.in(0).shape);
  bool normal = k.op.attr_int("normal", 0) != 0;
  auto a = static_cast<float>(k.op.attr_float("a", 0.0)), b = static_cast<float>(k.op.attr_float("b", 1.0));
  auto seed = static_cast<uint64_t>(k.op.attr_int("seed", 0));
  // Keyed by the step, as Dropout; a validation pass (inference) draws with key 0, as the bundles' do.
  Value &y = k.out(0);
  for (size_t i = 0; i < y.data.size(); ++i)
    y.data[i] = rng_draw(normal, a, b, seed, k.ctx.inference ? 0 : k.ctx.step, static_cast<int64_t>(i));
}

void kernel_DropoutGrad(const KernelArgs &k) {
  // Same scale as the forward in training mode; a forward with ratio 0 (or inference) has an all-true mask and
  // autodiff gives the gradient ratio 0, so the scale is 1 there.
  double ratio = k.op.attr_float("ratio", 0.5);
  double scale = 1.0 / (1.0 - ratio);
  unary_grad(k, [scale](double dy, double mask) { return mask != 0 ? dy * scale : 0.0; });
}

}  // namespace cleave::interp
