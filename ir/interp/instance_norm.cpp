// InstanceNormalization: per (n, c) plane, biased statistics over the spatial dims, then a per-channel scale and
// bias (torch.nn.InstanceNorm*d with affine=True); its gradient. In float64.
#include <cmath>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** X [N, C, spatial...] as planes: n*c planes of `size` elements each. */
struct Planes {
  int64_t n = 0, c = 0, size = 1;
};

Planes planes_of(const Shape &x) {
  Planes p;
  p.n = x[0];
  p.c = x[1];
  for (size_t d = 2; d < x.size(); ++d) p.size *= x[d];
  return p;
}

}  // namespace

void kernel_InstanceNormalization(const KernelArgs &k) {
  // (X, scale, B) -> (Y, mean?, invstd?); Y = (x - mean) * invstd * scale[c] + B[c], invstd = 1/sqrt(var + eps).
  const Value &x = k.in(0);
  Planes p = planes_of(x.shape);
  k.expect_out_shape(0, x.shape);
  double eps = k.op.attr_float("epsilon", 1e-5);
  const std::vector<double> &scale = k.in(1).data, &bias = k.in(2).data;
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    size_t c = static_cast<size_t>(plane % p.c);
    const double *row = x.data.data() + plane * p.size;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < p.size; ++i) sum += row[i];
    double mean = sum / static_cast<double>(p.size);
    for (int64_t i = 0; i < p.size; ++i) sq += (row[i] - mean) * (row[i] - mean);
    double invstd = 1.0 / std::sqrt(sq / static_cast<double>(p.size) + eps);
    for (int64_t i = 0; i < p.size; ++i)
      k.outs[0]->data[static_cast<size_t>(plane * p.size + i)] = (row[i] - mean) * invstd * scale[c] + bias[c];
    if (k.has_out(1)) k.outs[1]->data[static_cast<size_t>(plane)] = mean;
    if (k.has_out(2)) k.outs[2]->data[static_cast<size_t>(plane)] = invstd;
  }
}

void kernel_InstanceNormalizationGrad(const KernelArgs &k) {
  // (dY, X, scale, mean, invstd) -> (dX?, dscale?, dB?), per plane with g = dY * scale[c], xhat = (x - mean) * invstd:
  //   dX = invstd * (g - mean(g) - xhat * mean(g * xhat)); dscale[c] = sum dY * xhat, dB[c] = sum dY over n and space.
  const Value &dy = k.in(0);
  const Value &x = k.in(1);
  CLEAVE_CHECK(dy.shape == x.shape, k.label(), ": dY ", shape_str(dy.shape), " vs X ", shape_str(x.shape));
  Planes p = planes_of(x.shape);
  const std::vector<double> &scale = k.in(2).data, &mean = k.in(3).data, &invstd = k.in(4).data;
  double count = static_cast<double>(p.size);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    size_t c = static_cast<size_t>(plane % p.c), pl = static_cast<size_t>(plane);
    size_t base = static_cast<size_t>(plane * p.size);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < p.size; ++i) {
      size_t e = base + static_cast<size_t>(i);
      double xhat = (x.data[e] - mean[pl]) * invstd[pl];
      sg += dy.data[e] * scale[c];
      sgx += dy.data[e] * scale[c] * xhat;
      if (k.has_out(1)) k.outs[1]->data[c] += dy.data[e] * xhat;
      if (k.has_out(2)) k.outs[2]->data[c] += dy.data[e];
    }
    if (!k.has_out(0)) continue;
    for (int64_t i = 0; i < p.size; ++i) {
      size_t e = base + static_cast<size_t>(i);
      double xhat = (x.data[e] - mean[pl]) * invstd[pl];
      k.outs[0]->data[e] = invstd[pl] * (dy.data[e] * scale[c] - sg / count - xhat * sgx / count);
    }
  }
}

}  // namespace cleave::interp
