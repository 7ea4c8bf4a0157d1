// LayerNormalization over the trailing dims [axis, rank) and its gradient, in float64.
#include <cmath>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** X viewed as [outer, inner] with inner = product of the normalised dims. */
struct RowView {
  int64_t outer = 0, inner = 1;
};

RowView row_view(const KernelArgs &k, const Shape &x) {
  int64_t axis = norm_axis(k, k.op.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  RowView v;
  for (size_t d = static_cast<size_t>(axis); d < x.size(); ++d) v.inner *= x[d];
  v.outer = v.inner == 0 ? 0 : num_elements(x) / v.inner;
  return v;
}

}  // namespace

void kernel_LayerNormalization(const KernelArgs &k) {
  // (X, scale, B?) -> (Y, mean?, invstd?): ONNX's biased variance, as torch.nn.LayerNorm.
  const Value &x = k.in(0);
  RowView v = row_view(k, x.shape);
  k.expect_out_shape(0, x.shape);
  double eps = k.op.attr_float("epsilon", 1e-5);
  const std::vector<double> &scale = k.in(1).data;
  const std::vector<double> *bias = k.has_in(2) ? &k.in(2).data : nullptr;
  CLEAVE_CHECK(static_cast<int64_t>(scale.size()) == v.inner, k.label(), ": scale size");
  for (int64_t r = 0; r < v.outer; ++r) {
    const double *row = x.data.data() + r * v.inner;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < v.inner; ++i) sum += row[i];
    double mean = sum / static_cast<double>(v.inner);
    for (int64_t i = 0; i < v.inner; ++i) sq += (row[i] - mean) * (row[i] - mean);
    double invstd = 1.0 / std::sqrt(sq / static_cast<double>(v.inner) + eps);
    for (int64_t i = 0; i < v.inner; ++i)
      k.outs[0]->data[static_cast<size_t>(r * v.inner + i)] =
          (row[i] - mean) * invstd * scale[static_cast<size_t>(i)] + (bias ? (*bias)[static_cast<size_t>(i)] : 0.0);
    if (k.has_out(1)) k.outs[1]->data[static_cast<size_t>(r)] = mean;
    if (k.has_out(2)) k.outs[2]->data[static_cast<size_t>(r)] = invstd;
  }
}

void kernel_LayerNormalizationGrad(const KernelArgs &k) {
  // (dY, X, scale, mean, invstd) -> (dX?, dscale?, dB?), with g = dY * scale and xhat = (x - mean) * invstd:
  //   dX = invstd * (g - mean(g) - xhat * mean(g * xhat)) over each row; dscale = sum dY * xhat, dB = sum dY over rows.
  const Value &dy = k.in(0);
  const Value &x = k.in(1);
  RowView v = row_view(k, x.shape);
  CLEAVE_CHECK(dy.shape == x.shape, k.label(), ": dY ", shape_str(dy.shape), " vs X ", shape_str(x.shape));
  const std::vector<double> &scale = k.in(2).data, &mean = k.in(3).data, &invstd = k.in(4).data;
  double n = static_cast<double>(v.inner);
  for (int64_t r = 0; r < v.outer; ++r) {
    size_t base = static_cast<size_t>(r * v.inner);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < v.inner; ++i) {
      size_t e = base + static_cast<size_t>(i);
      double xhat = (x.data[e] - mean[static_cast<size_t>(r)]) * invstd[static_cast<size_t>(r)];
      double g = dy.data[e] * scale[static_cast<size_t>(i)];
      sg += g;
      sgx += g * xhat;
      if (k.has_out(1)) k.outs[1]->data[static_cast<size_t>(i)] += dy.data[e] * xhat;
      if (k.has_out(2)) k.outs[2]->data[static_cast<size_t>(i)] += dy.data[e];
    }
    if (!k.has_out(0)) continue;
    for (int64_t i = 0; i < v.inner; ++i) {
      size_t e = base + static_cast<size_t>(i);
      double xhat = (x.data[e] - mean[static_cast<size_t>(r)]) * invstd[static_cast<size_t>(r)];
      double g = dy.data[e] * scale[static_cast<size_t>(i)];
      k.outs[0]->data[e] = invstd[static_cast<size_t>(r)] * (g - sg / n - xhat * sgx / n);
    }
  }
}

}  // namespace cleave::interp
