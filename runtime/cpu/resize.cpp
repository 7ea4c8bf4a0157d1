// Resize (nearest, linear, cubic) over the spatial dims of each plane and its adjoint, from the taps every backend
// computes alike (common/shapes.h).
#include <algorithm>
#include <vector>

#include "cleave/rt.h"
#include "common/shapes.h"

namespace cleave::rt {
namespace {

/** Calls f(x_offset, y_offset, weight) within one plane for every (output, tap) pair: the k^sp combinations of one
 *  tap per spatial dim (k = 1 nearest, 2 linear, 4 cubic), weighted by the product of their weights. */
template <typename F>
void for_each_tap(const ResizeShape &s, const std::vector<host::ResizeTaps> &taps, F f) {
  size_t sp = s.x.size();
  std::vector<int64_t> xstr(sp, 1);
  for (size_t d = sp - 1; d-- > 0;) xstr[d] = xstr[d + 1] * s.x[d + 1];
  int64_t ny = 1, combos = 1;
  for (int64_t d : s.y) ny *= d;
  for (const host::ResizeTaps &t : taps) combos *= t.k;
  std::vector<int64_t> o(sp);
  std::vector<size_t> tap(sp);
  for (int64_t yf = 0; yf < ny; ++yf) {
    int64_t rest = yf;
    for (size_t d = sp; d-- > 0;) {
      o[d] = rest % s.y[d];
      rest /= s.y[d];
    }
    for (int64_t c = 0; c < combos; ++c) {
      int64_t digits = c;  // the first spatial dim's tap is the most significant digit
      for (size_t d = sp; d-- > 0;) {
        tap[d] = static_cast<size_t>(o[d] * taps[d].k + digits % taps[d].k);
        digits /= taps[d].k;
      }
      int64_t off = 0;
      double w = 1;
      for (size_t d = 0; d < sp; ++d) {
        off += taps[d].idx[tap[d]] * xstr[d];
        w *= taps[d].w[tap[d]];
      }
      f(off, yf, w);
    }
  }
}

int64_t plane_size(const Dims &d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

}  // namespace

void resize_forward(const ResizeShape &s, const real *x, real *y) {
  std::vector<host::ResizeTaps> taps = host::resize_taps(s);
  int64_t nx = plane_size(s.x), ny = plane_size(s.y);
  std::vector<double> acc(static_cast<size_t>(ny));
  for (int64_t p = 0; p < s.planes; ++p) {
    const real *xp = x + p * nx;
    std::fill(acc.begin(), acc.end(), 0.0);
    for_each_tap(s, taps, [&](int64_t xo, int64_t yo, double w) { acc[static_cast<size_t>(yo)] += w * xp[xo]; });
    for (int64_t i = 0; i < ny; ++i) y[p * ny + i] = static_cast<real>(acc[static_cast<size_t>(i)]);
  }
}

void resize_backward(const ResizeShape &s, const real *dy, real *dx) {
  std::vector<host::ResizeTaps> taps = host::resize_taps(s);
  int64_t nx = plane_size(s.x), ny = plane_size(s.y);
  std::vector<double> acc(static_cast<size_t>(nx));
  for (int64_t p = 0; p < s.planes; ++p) {
    const real *dyp = dy + p * ny;
    std::fill(acc.begin(), acc.end(), 0.0);
    for_each_tap(s, taps, [&](int64_t xo, int64_t yo, double w) { acc[static_cast<size_t>(xo)] += w * dyp[yo]; });
    for (int64_t i = 0; i < nx; ++i) dx[p * nx + i] = static_cast<real>(acc[static_cast<size_t>(i)]);
  }
}

}  // namespace cleave::rt
