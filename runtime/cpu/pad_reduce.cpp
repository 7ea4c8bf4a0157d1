// Elementwise support for masks and selections: broadcast of any element size, constant padding and max/min
// reductions.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cleave/rt.h"
#include "cpu/internal.h"

namespace cleave::rt {

void broadcast_bytes(const Dims &in_shape, const Dims &out_shape, const void *x, void *y, size_t elem_size) {
  size_t r = out_shape.size();
  if (in_shape.size() > r) fail("broadcast_bytes: input rank exceeds output rank");
  // Input stride per output dim (0 where the input is repeated or absent).
  std::vector<int64_t> st(r, 0);
  int64_t s = 1, n = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    size_t din = in_shape.size() - 1 - i, dout = r - 1 - i;
    if (in_shape[din] != out_shape[dout] && in_shape[din] != 1) fail("broadcast_bytes: shapes do not broadcast");
    st[dout] = in_shape[din] == 1 ? 0 : s;
    s *= in_shape[din];
  }
  for (int64_t d : out_shape) n *= d;
  const char *src = static_cast<const char *>(x);
  char *dst = static_cast<char *>(y);
  std::vector<int64_t> idx(r, 0);
  int64_t in = 0;
  for (int64_t o = 0; o < n; ++o) {
    std::memcpy(dst + o * static_cast<int64_t>(elem_size), src + in * static_cast<int64_t>(elem_size), elem_size);
    for (size_t d = r; d-- > 0;) {
      in += st[d];
      if (++idx[d] < out_shape[d]) break;
      in -= st[d] * idx[d];
      idx[d] = 0;
    }
  }
}

void pad_constant(const Dims &x_shape, const Dims &pads, real value, const real *x, real *y) {
  size_t r = x_shape.size();
  if (pads.size() != 2 * r) fail("pad_constant: pads needs 2 values per dim");
  Dims ys(r), xst(r, 1);
  int64_t n = 1;
  for (size_t d = r; d-- > 0;) {
    ys[d] = x_shape[d] + pads[d] + pads[d + r];
    if (ys[d] < 0) fail("pad_constant: pads crop a dim below 0");
    if (d + 1 < r) xst[d] = xst[d + 1] * x_shape[d + 1];
  }
  for (int64_t d : ys) n *= d;
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < n; ++o) {
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < r; ++d) {
      int64_t i = idx[d] - pads[d];
      inside = inside && i >= 0 && i < x_shape[d];
      src += i * xst[d];
    }
    y[o] = inside ? x[src] : value;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < ys[d]) break;
      idx[d] = 0;
    }
  }
}

void reduce_max(const Dims &x_shape, const Dims &axes, const real *x, real *y, bool min) {
  detail::ReductionWalk walk(x_shape, axes, "reduce_max");
  real init = min ? std::numeric_limits<real>::infinity() : -std::numeric_limits<real>::infinity();
  for (int64_t i = 0; i < walk.ny; ++i) y[i] = init;
  walk.each([&](int64_t f, int64_t o) {
    real v = x[f];
    if (std::isnan(v) || (min ? v < y[o] : v > y[o])) y[o] = v;
  });
}

}  // namespace cleave::rt
