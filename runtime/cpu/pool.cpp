// Max, average and global-average pooling (N-d) and their gradients. Output sizes come from the caller (ceil_mode
// decided there), so a window may run past the padded input: such positions are skipped. The kernels also run on
// spatial blocks of a larger op (PoolShape's block fields): the same global windows, read from or written to blocks.
// Whole max and average pools run on oneDNN where the runtime has it and the semantics agree (cpu/onednn.cpp's
// pool_geom); blocks, max pooling's indices and global average pooling stay here.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cleave/rt.h"
#include "common/shapes.h"
#include "cpu/onednn.h"

namespace cleave::rt {
namespace {

/** taps[yf * nk + kf] = flat spatial index into the X block, or -1 outside the input tensor or the block;
 *  count[yf] = the averaging divisor of window yf (positions inside the padded input with count_include_pad, else
 *  inside the whole input). `missing`: some tap inside the input lies outside the X block. */
struct Windows {
  int64_t nx = 1, ny = 1, nk = 1;
  std::vector<int64_t> taps, count;
  bool missing = false;
};

/** v[d], or `whole` when v is empty (a whole op). */
int64_t or_whole(const Dims &v, size_t d, int64_t whole) { return v.empty() ? whole : v[d]; }

Windows make_windows(const PoolShape &s) {
  size_t sp = s.x.size();
  host::check_pool_ranks(s);
  Windows w;
  for (size_t d = 0; d < sp; ++d) {
    w.nx *= s.x[d];
    w.ny *= s.y[d];
    w.nk *= s.kernel[d];
  }
  w.taps.assign(static_cast<size_t>(w.ny * w.nk), -1);
  w.count.assign(static_cast<size_t>(w.ny), 0);
  std::vector<int64_t> yi(sp, 0), ki(sp, 0);
  for (int64_t yf = 0; yf < w.ny; ++yf) {
    std::fill(ki.begin(), ki.end(), 0);
    for (int64_t kf = 0; kf < w.nk; ++kf) {
      bool inside = true, in_padded = true, local = true;
      int64_t off = 0;
      for (size_t d = 0; d < sp; ++d) {
        int64_t full = or_whole(s.x_full, d, s.x[d]);
        int64_t xd = (or_whole(s.y_begin, d, 0) + yi[d]) * s.strides[d] + ki[d] * s.dilations[d] - s.pads[d];
        inside = inside && xd >= 0 && xd < full;
        in_padded = in_padded && xd < full + s.pads[d + sp];
        int64_t xl = xd - or_whole(s.x_begin, d, 0);
        local = local && xl >= 0 && xl < s.x[d];
        off = off * s.x[d] + xl;
      }
      if (inside && local) w.taps[static_cast<size_t>(yf * w.nk + kf)] = off;
      if (inside && !local) w.missing = true;
      w.count[static_cast<size_t>(yf)] += s.count_include_pad ? in_padded : inside;
      for (size_t d = sp; d-- > 0;)
        if (++ki[d] < s.kernel[d]) break;
        else ki[d] = 0;
    }
    for (size_t d = sp; d-- > 0;)
      if (++yi[d] < s.y[d]) break;
      else yi[d] = 0;
  }
  return w;
}

void require_whole_windows(const Windows &w, const char *kernel) {
  if (w.missing) fail(std::string(kernel) + ": the X block lacks part of a window");
}

/** The first maximum of window yf over plane x (the last NaN if any, as torch's max_pool), or -1 if the window
 *  holds no element. */
int64_t argmax(const Windows &w, int64_t yf, const real *x) {
  int64_t best = -1;
  const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
  for (int64_t kf = 0; kf < w.nk; ++kf)
    if (tap[kf] >= 0 && (best < 0 || x[tap[kf]] > x[best] || std::isnan(x[tap[kf]]))) best = tap[kf];
  return best;
}

/** to_dx[i] = the flat index into the dX block of flat index i of the X block, or -1 outside it. */
std::vector<int64_t> x_to_dx(const PoolShape &s) {
  size_t sp = s.x.size();
  int64_t nx = 1;
  for (int64_t v : s.x) nx *= v;
  std::vector<int64_t> out(static_cast<size_t>(nx), -1), xi(sp, 0);
  for (int64_t i = 0; i < nx; ++i) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < sp; ++d) {
      int64_t rel = or_whole(s.x_begin, d, 0) + xi[d] - s.dx_begin[d];
      inside = inside && rel >= 0 && rel < s.dx[d];
      off = off * s.dx[d] + rel;
    }
    if (inside) out[static_cast<size_t>(i)] = off;
    for (size_t d = sp; d-- > 0;)
      if (++xi[d] < s.x[d]) break;
      else xi[d] = 0;
  }
  return out;
}

}  // namespace

void max_pool_forward(const PoolShape &s, const real *x, real *y, int64_t *indices) {
  host::check_pool_ranks(s);
  if (!indices && detail::onednn::max_pool_forward(s, x, y)) return;
  Windows w = make_windows(s);
  require_whole_windows(w, "max_pool_forward");
  // Indices address the whole X (its x_full spatial dims): a block's position is shifted by x_begin.
  size_t sp = s.x.size();
  int64_t nx_full = 1;
  for (size_t d = 0; d < sp; ++d) nx_full *= or_whole(s.x_full, d, s.x[d]);
  auto full_index = [&](int64_t local) {
    int64_t off = 0, mult = 1;
    for (size_t d = sp; d-- > 0;) {
      off += (or_whole(s.x_begin, d, 0) + local % s.x[d]) * mult;
      local /= s.x[d];
      mult *= or_whole(s.x_full, d, s.x[d]);
    }
    return off;
  };
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t best = argmax(w, yf, x + p * w.nx);
      if (best < 0) fail("max_pool_forward: a pooling window lies entirely in the padding");
      y[p * w.ny + yf] = x[p * w.nx + best];
      if (indices) indices[p * w.ny + yf] = p * nx_full + full_index(best);
    }
}

void max_pool_backward(const PoolShape &s, const real *dy, const real *x, real *dx) {
  host::check_pool_ranks(s);
  if (detail::onednn::max_pool_backward(s, dy, x, dx)) return;
  Windows w = make_windows(s);
  require_whole_windows(w, "max_pool_backward");
  if (s.dx.empty() != s.dx_begin.empty()) fail("max_pool_backward: dx and dx_begin must be given together");
  if (s.dx.empty()) {
    std::fill(dx, dx + s.nc * w.nx, 0.0f);
    for (int64_t p = 0; p < s.nc; ++p)
      for (int64_t yf = 0; yf < w.ny; ++yf) {
        int64_t best = argmax(w, yf, x + p * w.nx);
        if (best >= 0) dx[p * w.nx + best] += dy[p * w.ny + yf];
      }
    return;
  }
  // A block of dX: the same windows and maxima, keeping the gradient that lands inside the block.
  std::vector<int64_t> to_dx = x_to_dx(s);
  int64_t ndx = 1;
  for (int64_t v : s.dx) ndx *= v;
  std::fill(dx, dx + s.nc * ndx, 0.0f);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t best = argmax(w, yf, x + p * w.nx);
      if (best >= 0 && to_dx[static_cast<size_t>(best)] >= 0)
        dx[p * ndx + to_dx[static_cast<size_t>(best)]] += dy[p * w.ny + yf];
    }
}

void avg_pool_forward(const PoolShape &s, const real *x, real *y) {
  host::check_pool_ranks(s);
  if (detail::onednn::avg_pool_forward(s, x, y)) return;
  Windows w = make_windows(s);
  require_whole_windows(w, "avg_pool_forward");
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
      double sum = 0;
      for (int64_t kf = 0; kf < w.nk; ++kf)
        if (tap[kf] >= 0) sum += x[p * w.nx + tap[kf]];
      int64_t count = w.count[static_cast<size_t>(yf)];
      y[p * w.ny + yf] = count > 0 ? static_cast<real>(sum / static_cast<double>(count)) : 0.0f;
    }
}

void avg_pool_backward(const PoolShape &s, const real *dy, real *dx) {
  host::check_pool_ranks(s);
  if (detail::onednn::avg_pool_backward(s, dy, dx)) return;
  Windows w = make_windows(s);
  std::fill(dx, dx + s.nc * w.nx, 0.0f);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t count = w.count[static_cast<size_t>(yf)];
      if (count == 0) continue;
      real g = dy[p * w.ny + yf] / static_cast<real>(count);
      const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
      for (int64_t kf = 0; kf < w.nk; ++kf)
        if (tap[kf] >= 0) dx[p * w.nx + tap[kf]] += g;
    }
}

void global_avg_pool_forward(int64_t nc, int64_t spatial, const real *x, real *y, int64_t divisor) {
  double div = static_cast<double>(divisor > 0 ? divisor : spatial);
  for (int64_t p = 0; p < nc; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < spatial; ++i) sum += x[p * spatial + i];
    y[p] = static_cast<real>(sum / div);
  }
}

void global_avg_pool_backward(int64_t nc, int64_t spatial, const real *dy, real *dx, int64_t divisor) {
  real div = static_cast<real>(divisor > 0 ? divisor : spatial);
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t i = 0; i < spatial; ++i) dx[p * spatial + i] = dy[p] / div;
}

}  // namespace cleave::rt
