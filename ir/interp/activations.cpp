// Activation and rounding kernels and their gradients. NaN propagates through the forward kernels as torch's do
// (a comparison with NaN is false, so each branch below is written to fall through to the NaN-carrying value), and
// the gradients take torch's branch at the boundaries and at NaN.
#include <cmath>

#include "ir/float16.h"
#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

double alpha(const KernelArgs &k, double def) { return k.op.attr_float("alpha", def); }
constexpr double kSeluAlpha = 1.67326319217681884765625, kSeluGamma = 1.05070102214813232421875;

}  // namespace

void kernel_Clip(const KernelArgs &k) {
  bool has_lo = k.op.has_attr("min"), has_hi = k.op.has_attr("max");
  double lo = has_lo ? k.op.attr_float("min") : 0, hi = has_hi ? k.op.attr_float("max") : 0;
  // min(max(x, lo), hi): NaN stays NaN; lo > hi gives hi (ONNX, torch.clamp).
  unary(k, [=](double x) {
    if (has_lo && x < lo) x = lo;
    if (has_hi && x > hi) x = hi;
    return x;
  });
}
void kernel_HardSigmoid(const KernelArgs &k) {
  double a = alpha(k, 0.2), b = k.op.attr_float("beta", 0.5);
  unary(k, [=](double x) {
    double t = a * x + b;
    return t <= 0 ? 0.0 : t >= 1 ? 1.0 : t;
  });
}
void kernel_HardSwish(const KernelArgs &k) {
  // torch's formula: x * min(max(x + 3, 0), 6) / 6.
  unary(k, [](double x) {
    double t = x + 3;
    t = t <= 0 ? 0.0 : t >= 6 ? 6.0 : t;
    return x * t / 6;
  });
}
void kernel_LeakyRelu(const KernelArgs &k) {
  double a = alpha(k, 0.01);
  unary(k, [=](double x) { return x > 0 ? x : x * a; });
}
void kernel_Elu(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary(k, [=](double x) { return x <= 0 ? a * std::expm1(x) : x; });
}
void kernel_Selu(const KernelArgs &k) {
  double a = alpha(k, kSeluAlpha), g = k.op.attr_float("gamma", kSeluGamma);
  unary(k, [=](double x) { return x <= 0 ? g * a * std::expm1(x) : g * x; });
}
void kernel_Celu(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary(k, [=](double x) { return x <= 0 ? a * std::expm1(x / a) : x; });
}
void kernel_PRelu(const KernelArgs &k) {
  const Value &x = k.in(0), &s = k.in(1);
  k.expect_out_shape(0, x.shape);
  std::vector<int64_t> is = broadcast_index_map(s.shape, x.shape);
  Value &y = k.out(0);
  for (size_t i = 0; i < y.data.size(); ++i) y.data[i] = x.data[i] > 0 ? x.data[i] : s.data[is[i]] * x.data[i];
}
void kernel_Softplus(const KernelArgs &k) {
  // log(1 + exp(x)) without overflow for large x.
  unary(k, [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); });
}
void kernel_Softsign(const KernelArgs &k) { unary(k, [](double x) { return x / (1 + std::fabs(x)); }); }
void kernel_ThresholdedRelu(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary(k, [=](double x) { return x <= a ? 0.0 : x; });  // NaN stays NaN, as torch.threshold
}
void kernel_Abs(const KernelArgs &k) { unary(k, [](double x) { return std::fabs(x); }); }
void kernel_Sign(const KernelArgs &k) { unary(k, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }); }
void kernel_Floor(const KernelArgs &k) { unary(k, [](double x) { return std::floor(x); }); }
void kernel_Ceil(const KernelArgs &k) { unary(k, [](double x) { return std::ceil(x); }); }
void kernel_Round(const KernelArgs &k) { unary(k, [](double x) { return std::nearbyint(x); }); }
void kernel_RoundToBf16(const KernelArgs &k) {
  unary(k, [](double x) { return double_from_bf16_bits(bf16_bits_from_double(x)); });
}
void kernel_RoundToFp16(const KernelArgs &k) {
  unary(k, [](double x) { return double_from_f16_bits(f16_bits_from_double(x)); });
}

void kernel_ClipGrad(const KernelArgs &k) {
  bool has_lo = k.op.has_attr("min"), has_hi = k.op.has_attr("max");
  double lo = has_lo ? k.op.attr_float("min") : 0, hi = has_hi ? k.op.attr_float("max") : 0;
  unary_grad(k, [=](double dy, double x) { return (has_lo && x <= lo) || (has_hi && x >= hi) ? 0.0 : dy; });
}
void kernel_HardSigmoidGrad(const KernelArgs &k) {
  double a = alpha(k, 0.2), b = k.op.attr_float("beta", 0.5);
  unary_grad(k, [=](double dy, double x) {
    double t = a * x + b;
    return t > 0 && t < 1 ? dy * a : 0.0;
  });
}
void kernel_Gelu(const KernelArgs &k) {
  unary(k, [](double x) { return x / 2 * (1 + std::erf(x / std::sqrt(2.0))); });
}
void kernel_GeluGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) {
    return dy * ((1 + std::erf(x / std::sqrt(2.0))) / 2 + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI));
  });
}
void kernel_HardSwishGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return x < -3 ? 0.0 : x <= 3 ? dy * (x / 3 + 0.5) : dy; });
}
void kernel_LeakyReluGrad(const KernelArgs &k) {
  double a = alpha(k, 0.01);
  unary_grad(k, [=](double dy, double x) { return x > 0 ? dy : dy * a; });
}
void kernel_EluGrad(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary_grad(k, [=](double dy, double x) { return x <= 0 ? dy * a * std::exp(x) : dy; });
}
void kernel_SeluGrad(const KernelArgs &k) {
  double a = alpha(k, kSeluAlpha), g = k.op.attr_float("gamma", kSeluGamma);
  unary_grad(k, [=](double dy, double x) { return x <= 0 ? dy * g * a * std::exp(x) : dy * g; });
}
void kernel_CeluGrad(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary_grad(k, [=](double dy, double x) { return x <= 0 ? dy * std::exp(x / a) : dy; });
}
void kernel_PReluGrad(const KernelArgs &k) {
  const Value &dy = k.in(0), &x = k.in(1), &s = k.in(2);
  CLEAVE_CHECK(dy.shape == x.shape, k.label(), ": ", shape_str(dy.shape), " vs ", shape_str(x.shape));
  k.expect_out_shape(0, x.shape);
  k.expect_out_shape(1, x.shape);
  std::vector<int64_t> is = broadcast_index_map(s.shape, x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    bool pos = x.data[i] > 0;
    if (k.has_out(0)) k.outs[0]->data[i] = pos ? dy.data[i] : s.data[is[i]] * dy.data[i];
    if (k.has_out(1)) k.outs[1]->data[i] = pos ? 0.0 : x.data[i] * dy.data[i];
  }
}
void kernel_SoftplusGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) { return dy / (1 + std::exp(-x)); });
}
void kernel_SoftsignGrad(const KernelArgs &k) {
  unary_grad(k, [](double dy, double x) {
    double d = 1 + std::fabs(x);
    return dy / (d * d);
  });
}
void kernel_ThresholdedReluGrad(const KernelArgs &k) {
  double a = alpha(k, 1.0);
  unary_grad(k, [=](double dy, double x) { return x <= a ? 0.0 : dy; });
}

}  // namespace cleave::interp
