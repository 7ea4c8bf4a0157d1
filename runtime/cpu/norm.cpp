// BatchNormalization (training and inference) and its gradient, whole or with the batch split over ranks; sum/mean
// reductions over axes. Per-channel statistics accumulate in double so results do not drift with the batch size.
// The whole-batch training forward and backward run on oneDNN where the runtime has it (its statistics: the batch
// mean and biased variance, as here); the running-statistics update with ONNX's momentum stays here.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cleave/rt.h"
#include "cpu/internal.h"
#include "cpu/onednn.h"

namespace cleave::rt {

void batch_norm_train_forward(int64_t n, int64_t c, int64_t d, const real *x, const real *scale, const real *bias,
                              real eps, real momentum, real *y, real *running_mean, real *running_var,
                              real *saved_mean, real *saved_invstd, bool unbiased) {
  std::vector<real> batch_mean(static_cast<size_t>(c)), batch_var(static_cast<size_t>(c));
  double count = static_cast<double>(n * d), var_scale = unbiased && count > 1 ? count / (count - 1) : 1.0;
  if (detail::onednn::batch_norm_train_forward(n, c, d, x, scale, bias, eps, y, batch_mean.data(), batch_var.data())) {
    double mom = momentum;
    for (int64_t ch = 0; ch < c; ++ch) {
      double mean = batch_mean[static_cast<size_t>(ch)], var = batch_var[static_cast<size_t>(ch)];
      if (running_mean) running_mean[ch] = static_cast<real>(mom * running_mean[ch] + (1 - mom) * mean);
      if (running_var) running_var[ch] = static_cast<real>(mom * running_var[ch] + (1 - mom) * var * var_scale);
      if (saved_mean) saved_mean[ch] = static_cast<real>(mean);
      if (saved_invstd) saved_invstd[ch] = static_cast<real>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    }
    return;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) sum += x[(i * c + ch) * d + j];
    double mean = sum / count, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double e = x[(i * c + ch) * d + j] - mean;
        sq += e * e;
      }
    double var = sq / count;  // biased, as ONNX's reference (and the normalisation torch applies)
    double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        y[e] = static_cast<real>(scale[ch] * (x[e] - mean) * invstd + bias[ch]);
      }
    double mom = momentum;
    if (running_mean) running_mean[ch] = static_cast<real>(mom * running_mean[ch] + (1 - mom) * mean);
    if (running_var) running_var[ch] = static_cast<real>(mom * running_var[ch] + (1 - mom) * var * var_scale);
    if (saved_mean) saved_mean[ch] = static_cast<real>(mean);
    if (saved_invstd) saved_invstd[ch] = static_cast<real>(invstd);
  }
}

void batch_norm_infer_forward(int64_t n, int64_t c, int64_t d, const real *x, const real *scale, const real *bias,
                              const real *mean, const real *var, real eps, real *y) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double invstd = 1.0 / std::sqrt(static_cast<double>(var[ch]) + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        y[e] = static_cast<real>(scale[ch] * (x[e] - mean[ch]) * invstd + bias[ch]);
      }
  }
}

void batch_norm_backward(int64_t n, int64_t c, int64_t d, const real *dy, const real *x, const real *scale,
                         const real *saved_mean, const real *saved_invstd, real *dx, real *dscale, real *dbias) {
  if (detail::onednn::batch_norm_backward(n, c, d, dy, x, scale, saved_mean, saved_invstd, dx, dscale, dbias)) return;
  // xhat = (x - mean) * invstd; dB = sum dY; dscale = sum dY * xhat; dX = scale * invstd / M * (M dY - dB - xhat dscale)
  double m = static_cast<double>(n * d);
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = saved_mean[ch], invstd = saved_invstd[ch];
    double db = 0, ds = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        db += dy[e];
        ds += dy[e] * (x[e] - mean) * invstd;
      }
    if (dx)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) {
          int64_t e = (i * c + ch) * d + j;
          double xhat = (x[e] - mean) * invstd;
          dx[e] = static_cast<real>(scale[ch] * invstd / m * (m * dy[e] - db - xhat * ds));
        }
    if (dscale) dscale[ch] = static_cast<real>(ds);
    if (dbias) dbias[ch] = static_cast<real>(db);
  }
}

void batch_norm_partial_stats(int64_t n, int64_t c, int64_t d, const real *x, const real *shift, real *stats) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = shift ? shift[ch] : 0.0, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        double e = x[(i * c + ch) * d + j] - s;
        sum += e;
        sq += e * e;
      }
    stats[ch] = static_cast<real>(sum);
    stats[c + ch] = static_cast<real>(sq);
  }
}

void batch_norm_train_forward_from_stats(int64_t n, int64_t c, int64_t d, const real *x, const real *scale,
                                         const real *bias, const real *stats, const real *shift, int64_t count,
                                         real eps, real momentum, real *y, real *running_mean, real *running_var,
                                         real *saved_mean, real *saved_invstd, bool unbiased) {
  if (count <= 0) fail("batch_norm_train_forward_from_stats: count must be positive");
  double m = static_cast<double>(count), mom = momentum, var_scale = unbiased && m > 1 ? m / (m - 1) : 1.0;
  for (int64_t ch = 0; ch < c; ++ch) {
    double centred_mean = stats[ch] / m;
    double mean = centred_mean + (shift ? shift[ch] : 0.0);
    double var = std::max(0.0, stats[c + ch] / m - centred_mean * centred_mean);
    double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        y[e] = static_cast<real>(scale[ch] * (x[e] - mean) * invstd + bias[ch]);
      }
    if (running_mean) running_mean[ch] = static_cast<real>(mom * running_mean[ch] + (1 - mom) * mean);
    if (running_var) running_var[ch] = static_cast<real>(mom * running_var[ch] + (1 - mom) * var * var_scale);
    if (saved_mean) saved_mean[ch] = static_cast<real>(mean);
    if (saved_invstd) saved_invstd[ch] = static_cast<real>(invstd);
  }
}

void batch_norm_backward_partial_sums(int64_t n, int64_t c, int64_t d, const real *dy, const real *x,
                                      const real *saved_mean, const real *saved_invstd, real *sums) {
  for (int64_t ch = 0; ch < c; ++ch) {
    double db = 0, ds = 0, mean = saved_mean[ch], invstd = saved_invstd[ch];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        db += dy[e];
        ds += dy[e] * (x[e] - mean) * invstd;
      }
    sums[ch] = static_cast<real>(db);
    sums[c + ch] = static_cast<real>(ds);
  }
}

void batch_norm_backward_data_from_sums(int64_t n, int64_t c, int64_t d, const real *dy, const real *x,
                                        const real *scale, const real *saved_mean, const real *saved_invstd,
                                        const real *sums, int64_t count, real *dx) {
  double m = static_cast<double>(count);
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = saved_mean[ch], invstd = saved_invstd[ch], db = sums[ch], ds = sums[c + ch];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        int64_t e = (i * c + ch) * d + j;
        double xhat = (x[e] - mean) * invstd;
        dx[e] = static_cast<real>(scale[ch] * invstd / m * (m * dy[e] - db - xhat * ds));
      }
  }
}

void batch_norm_train_forward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const real *x,
                                     const real *scale, const real *bias, real eps, real momentum, real *y,
                                     real *running_mean, real *running_var, real *saved_mean, real *saved_invstd,
                                     bool unbiased) {
  if (count <= 0) fail("batch_norm_train_forward_synced: count must be positive");
  std::vector<real> stats(static_cast<size_t>(2 * c)), mean(static_cast<size_t>(c));
  batch_norm_partial_stats(n, c, d, x, nullptr, stats.data());
  all_reduce_sum(g, stats.data(), stats.data(), c);
  // Every member computes the same mean from the same all-reduced sums, so the shift agrees across ranks.
  for (int64_t ch = 0; ch < c; ++ch)
    mean[static_cast<size_t>(ch)] = static_cast<real>(stats[static_cast<size_t>(ch)] / static_cast<double>(count));
  batch_norm_partial_stats(n, c, d, x, mean.data(), stats.data());
  all_reduce_sum(g, stats.data(), stats.data(), 2 * c);
  batch_norm_train_forward_from_stats(n, c, d, x, scale, bias, stats.data(), mean.data(), count, eps, momentum, y,
                                      running_mean, running_var, saved_mean, saved_invstd, unbiased);
}

void batch_norm_backward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const real *dy,
                                const real *x, const real *scale, const real *saved_mean, const real *saved_invstd,
                                real *dx, real *dscale, real *dbias) {
  std::vector<real> sums(static_cast<size_t>(2 * c));
  batch_norm_backward_partial_sums(n, c, d, dy, x, saved_mean, saved_invstd, sums.data());
  all_reduce_sum(g, sums.data(), sums.data(), 2 * c);
  if (dx) batch_norm_backward_data_from_sums(n, c, d, dy, x, scale, saved_mean, saved_invstd, sums.data(), count, dx);
  if (dbias) std::copy(sums.begin(), sums.begin() + c, dbias);
  if (dscale) std::copy(sums.begin() + c, sums.end(), dscale);
}

void reduce(const Dims &x_shape, const Dims &axes, const real *x, real *y, bool mean) {
  detail::ReductionWalk walk(x_shape, axes, "reduce");
  std::vector<double> acc(static_cast<size_t>(walk.ny), 0.0);
  walk.each_row([&](int64_t f, int64_t o, int64_t n, int64_t s) {
    detail::accumulate_row(x + f, n, acc.data() + o, s);
  });
  double div = mean && walk.ny > 0 ? static_cast<double>(walk.nx / walk.ny) : 1.0;
  for (int64_t i = 0; i < walk.ny; ++i) y[i] = static_cast<real>(acc[static_cast<size_t>(i)] / div);
}

void reduce_mean(const Dims &x_shape, const Dims &axes, int64_t count, const real *x, real *y) {
  detail::ReductionWalk walk(x_shape, axes, "reduce_mean");
  std::vector<double> acc(static_cast<size_t>(walk.ny), 0.0);
  walk.each_row([&](int64_t f, int64_t o, int64_t n, int64_t s) {
    detail::accumulate_row(x + f, n, acc.data() + o, s);
  });
  double div = count > 0 ? static_cast<double>(count) : 1.0;
  for (int64_t i = 0; i < walk.ny; ++i) y[i] = static_cast<real>(acc[static_cast<size_t>(i)] / div);
}

}  // namespace cleave::rt
