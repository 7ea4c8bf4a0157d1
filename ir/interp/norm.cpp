// BatchNormalization (inference and training mode) and its gradient; ReduceMean and ReduceSum.
#include <cmath>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** X [N, C, d...] viewed as [N, C, D]. */
struct ChannelView {
  int64_t n = 0, c = 0, d = 1;
  int64_t at(int64_t ni, int64_t ci, int64_t di) const { return (ni * c + ci) * d + di; }
  double count() const { return static_cast<double>(n * d); }
};

ChannelView channel_view(const KernelArgs &k, const Shape &x) {
  if (x.size() < 2) CLEAVE_USER_ERROR(k.label(), ": X must have rank >= 2, got ", shape_str(x));
  ChannelView v;
  v.n = x[0];
  v.c = x[1];
  v.d = v.n * v.c == 0 ? 0 : num_elements(x) / (v.n * v.c);
  return v;
}

void check_per_channel(const KernelArgs &k, size_t input, int64_t c) {
  if (k.in(input).shape != Shape{c})
    CLEAVE_USER_ERROR(k.label(), ": input ", input, " has shape ", shape_str(k.in(input).shape), ", expected [", c,
                      "]");
}

template <bool kMean>
void reduce(const KernelArgs &k) {
  const Value &x = k.in(0);
  int64_t rank = static_cast<int64_t>(x.shape.size());
  std::vector<bool> reduced(x.shape.size(), !k.op.has_attr("axes"));  // no axes: reduce everything
  if (k.op.has_attr("axes"))
    for (int64_t a : k.op.attr_ints("axes")) reduced[static_cast<size_t>(norm_axis(k, a, rank))] = true;
  bool keepdims = k.op.attr_int("keepdims", 1) != 0;
  Shape kept_shape, out_shape;  // kept_shape: reduced dims as 1
  for (size_t d = 0; d < x.shape.size(); ++d) {
    kept_shape.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d] || keepdims) out_shape.push_back(kept_shape.back());
  }
  k.expect_out_shape(0, out_shape);
  Value &y = k.out(0);
  std::vector<int64_t> kept_strides = strides_of(kept_shape);
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < num_elements(x.shape); ++f) {
    unravel(f, x.shape, idx);
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d]) o += idx[d] * kept_strides[d];
    y.data[o] += x.data[f];
  }
  if (kMean) {
    int64_t nx = num_elements(x.shape), ny = num_elements(kept_shape);
    double count = static_cast<double>(ny == 0 ? 0 : nx / ny);
    for (double &v : y.data) v /= count;
  }
}

}  // namespace

void kernel_BatchNormalization(const KernelArgs &k) {
  // (X, scale, B, mean, var) -> (Y, running_mean?, running_var?, saved_mean?, saved_invstd?)
  const Value &x = k.in(0);
  ChannelView v = channel_view(k, x.shape);
  for (size_t i = 1; i <= 4; ++i) check_per_channel(k, i, v.c);
  k.expect_out_shape(0, x.shape);
  for (size_t i = 1; i <= 4; ++i) k.expect_out_shape(i, Shape{v.c});
  double eps = k.op.attr_float("epsilon", 1e-5);
  double momentum = k.op.attr_float("momentum", 0.9);
  // torch's running variance takes the batch's unbiased variance (unbiased_running_var: a model torch exported).
  double var_scale = k.op.attr_int("unbiased_running_var", 0) != 0 && v.count() > 1 ? v.count() / (v.count() - 1.0) : 1.0;
  bool training = k.op.attr_int("training_mode", 0) != 0 && !k.ctx.inference;
  const std::vector<double> &scale = k.in(1).data, &bias = k.in(2).data;
  const std::vector<double> &run_mean = k.in(3).data, &run_var = k.in(4).data;
  Value &y = k.out(0);
  for (int64_t c = 0; c < v.c; ++c) {
    double mean = run_mean[c], var = run_var[c];
    if (training) {
      // Batch statistics with the biased variance, as ONNX's reference (and the normalisation torch applies).
      double sum = 0;
      for (int64_t n = 0; n < v.n; ++n)
        for (int64_t d = 0; d < v.d; ++d) sum += x.data[v.at(n, c, d)];
      mean = sum / v.count();
      double sq = 0;
      for (int64_t n = 0; n < v.n; ++n)
        for (int64_t d = 0; d < v.d; ++d) sq += (x.data[v.at(n, c, d)] - mean) * (x.data[v.at(n, c, d)] - mean);
      var = sq / v.count();
    }
    double invstd = 1.0 / std::sqrt(var + eps);
    for (int64_t n = 0; n < v.n; ++n)
      for (int64_t d = 0; d < v.d; ++d)
        y.data[v.at(n, c, d)] = scale[c] * (x.data[v.at(n, c, d)] - mean) * invstd + bias[c];
    // Inference mode passes the running statistics through unchanged.
    double new_mean = training ? momentum * run_mean[c] + (1 - momentum) * mean : run_mean[c];
    double new_var = training ? momentum * run_var[c] + (1 - momentum) * var * var_scale : run_var[c];
    if (k.has_out(1)) k.outs[1]->data[c] = new_mean;
    if (k.has_out(2)) k.outs[2]->data[c] = new_var;
    if (k.has_out(3)) k.outs[3]->data[c] = mean;
    if (k.has_out(4)) k.outs[4]->data[c] = invstd;
  }
}

void kernel_BatchNormalizationGrad(const KernelArgs &k) {
  // (dY, X, scale, saved_mean, saved_invstd) -> (dX?, dscale?, dB?) for training-mode batch statistics:
  //   xhat = (x - mean) * invstd, dB = sum dY, dscale = sum dY * xhat,
  //   dX = scale * invstd / M * (M * dY - dB - xhat * dscale), M = N * D.
  const Value &dy = k.in(0);
  const Value &x = k.in(1);
  ChannelView v = channel_view(k, x.shape);
  CLEAVE_CHECK(dy.shape == x.shape, k.label(), ": dY ", shape_str(dy.shape), " vs X ", shape_str(x.shape));
  for (size_t i = 2; i <= 4; ++i) check_per_channel(k, i, v.c);
  k.expect_out_shape(0, x.shape);
  k.expect_out_shape(1, Shape{v.c});
  k.expect_out_shape(2, Shape{v.c});
  const std::vector<double> &scale = k.in(2).data, &mean = k.in(3).data, &invstd = k.in(4).data;
  double m = v.count();
  for (int64_t c = 0; c < v.c; ++c) {
    double dbias = 0, dscale = 0;
    for (int64_t n = 0; n < v.n; ++n)
      for (int64_t d = 0; d < v.d; ++d) {
        double xhat = (x.data[v.at(n, c, d)] - mean[c]) * invstd[c];
        dbias += dy.data[v.at(n, c, d)];
        dscale += dy.data[v.at(n, c, d)] * xhat;
      }
    if (k.has_out(0))
      for (int64_t n = 0; n < v.n; ++n)
        for (int64_t d = 0; d < v.d; ++d) {
          double xhat = (x.data[v.at(n, c, d)] - mean[c]) * invstd[c];
          k.outs[0]->data[v.at(n, c, d)] = scale[c] * invstd[c] / m * (m * dy.data[v.at(n, c, d)] - dbias - xhat * dscale);
        }
    if (k.has_out(1)) k.outs[1]->data[c] = dscale;
    if (k.has_out(2)) k.outs[2]->data[c] = dbias;
  }
}

void kernel_ReduceMean(const KernelArgs &k) { reduce<true>(k); }
void kernel_ReduceSum(const KernelArgs &k) { reduce<false>(k); }

}  // namespace cleave::interp
