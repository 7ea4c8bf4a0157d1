// InstanceNormalization over the planes of X [n, c, s] and its gradient; statistics accumulate in double.
#include <cmath>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt {

void instance_norm_forward(int64_t n, int64_t c, int64_t s, const real *x, const real *scale, const real *bias,
                           real eps, real *y, real *mean, real *invstd) {
  if (s <= 0) fail("instance_norm_forward: empty spatial dims");
  for (int64_t p = 0; p < n * c; ++p) {
    const real *row = x + p * s;
    int64_t ch = p % c;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < s; ++i) sum += row[i];
    double m = sum / static_cast<double>(s);
    for (int64_t i = 0; i < s; ++i) sq += (row[i] - m) * (row[i] - m);
    double is = 1.0 / std::sqrt(sq / static_cast<double>(s) + static_cast<double>(eps));
    // Normalise with the rounded statistics the backward pass will read, so both passes agree.
    real mf = static_cast<real>(m), isf = static_cast<real>(is);
    for (int64_t i = 0; i < s; ++i) y[p * s + i] = (row[i] - mf) * isf * scale[ch] + bias[ch];
    if (mean) mean[p] = mf;
    if (invstd) invstd[p] = isf;
  }
}

void instance_norm_backward(int64_t n, int64_t c, int64_t s, const real *dy, const real *x, const real *scale,
                            const real *mean, const real *invstd, real *dx, real *dscale, real *dbias) {
  std::vector<double> ds(static_cast<size_t>(c), 0.0), db(static_cast<size_t>(c), 0.0);
  const double count = static_cast<double>(s);
  for (int64_t p = 0; p < n * c; ++p) {
    const real *xr = x + p * s, *dyr = dy + p * s;
    auto ch = static_cast<size_t>(p % c);
    double m = mean[p], is = invstd[p];
    double sdy = 0, sdyx = 0;  // sums of dY and dY * xhat over the plane
    for (int64_t i = 0; i < s; ++i) {
      double xhat = (static_cast<double>(xr[i]) - m) * is;
      sdy += dyr[i];
      sdyx += dyr[i] * xhat;
    }
    ds[ch] += sdyx;
    db[ch] += sdy;
    if (!dx) continue;
    double g = scale[ch];
    for (int64_t i = 0; i < s; ++i) {
      double xhat = (static_cast<double>(xr[i]) - m) * is;
      dx[p * s + i] = static_cast<real>(is * g * (dyr[i] - sdy / count - xhat * sdyx / count));
    }
  }
  for (size_t ch = 0; ch < static_cast<size_t>(c); ++ch) {
    if (dscale) dscale[ch] = static_cast<real>(ds[ch]);
    if (dbias) dbias[ch] = static_cast<real>(db[ch]);
  }
}

}  // namespace cleave::rt
