// LayerNormalization over rows of [outer, inner] and its gradient: on oneDNN where the runtime has it, else these
// loops, whose statistics accumulate in double.
#include <cmath>
#include <vector>

#include "cleave/rt.h"
#include "cpu/onednn.h"

namespace cleave::rt {

void layer_norm_forward(int64_t outer, int64_t inner, const real *x, const real *scale, const real *bias, real eps,
                        real *y, real *mean, real *invstd) {
  if (inner <= 0) fail("layer_norm_forward: empty normalised dims");
  if (detail::onednn::layer_norm_forward(outer, inner, x, scale, bias, eps, y, mean, invstd)) return;
  for (int64_t r = 0; r < outer; ++r) {
    const real *row = x + r * inner;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < inner; ++i) sum += row[i];
    double m = sum / static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) sq += (row[i] - m) * (row[i] - m);
    double is = 1.0 / std::sqrt(sq / static_cast<double>(inner) + static_cast<double>(eps));
    // Normalise with the rounded statistics the backward pass will read, so both passes agree.
    real mf = static_cast<real>(m), isf = static_cast<real>(is);
    for (int64_t i = 0; i < inner; ++i)
      y[r * inner + i] = (row[i] - mf) * isf * scale[i] + (bias ? bias[i] : 0.0f);
    if (mean) mean[r] = mf;
    if (invstd) invstd[r] = isf;
  }
}

void layer_norm_backward(int64_t outer, int64_t inner, const real *dy, const real *x, const real *scale,
                         const real *mean, const real *invstd, real *dx, real *dscale, real *dbias) {
  bool dx_done = dx && detail::onednn::layer_norm_backward_data(outer, inner, dy, x, scale, mean, invstd, dx);
  std::vector<double> ds(dscale ? static_cast<size_t>(inner) : 0, 0.0), db(dbias ? static_cast<size_t>(inner) : 0, 0.0);
  const double n = static_cast<double>(inner);
  for (int64_t r = 0; r < outer; ++r) {
    const real *xr = x + r * inner, *dyr = dy + r * inner;
    const double m = mean[r], is = invstd[r];
    // dscale and dbias: a column sum per element, which the compiler vectorises across the row.
    if (dscale)
      for (int64_t i = 0; i < inner; ++i) ds[static_cast<size_t>(i)] += dyr[i] * ((xr[i] - m) * is);
    if (dbias)
      for (int64_t i = 0; i < inner; ++i) db[static_cast<size_t>(i)] += dyr[i];
    if (!dx || dx_done) continue;
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < inner; ++i) {
      double xhat = (static_cast<double>(xr[i]) - m) * is;
      double g = static_cast<double>(dyr[i]) * scale[i];
      sg += g;
      sgx += g * xhat;
    }
    for (int64_t i = 0; i < inner; ++i) {
      double xhat = (static_cast<double>(xr[i]) - m) * is;
      double g = static_cast<double>(dyr[i]) * scale[i];
      dx[r * inner + i] = static_cast<real>(is * (g - sg / n - xhat * sgx / n));
    }
  }
  for (int64_t i = 0; i < inner; ++i) {
    if (dscale) dscale[i] = static_cast<real>(ds[static_cast<size_t>(i)]);
    if (dbias) dbias[i] = static_cast<real>(db[static_cast<size_t>(i)]);
  }
}

}  // namespace cleave::rt
