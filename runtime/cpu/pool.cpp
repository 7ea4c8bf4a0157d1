// Max, average and global-average pooling (N-d) and their gradients. Output sizes come from the caller (ceil_mode
// decided there), so a window may run past the padded input: such positions are skipped.
#include <algorithm>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt {
namespace {

/** taps[yf * nk + kf] = flat spatial index into X, or -1 outside the unpadded input; count[yf] = the averaging
 *  divisor of window yf (positions inside the padded input with count_include_pad, else inside X). */
struct Windows {
  int64_t nx = 1, ny = 1, nk = 1;
  std::vector<int64_t> taps, count;
};

Windows make_windows(const PoolShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.y.size() != sp || s.kernel.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    fail("pool: spatial ranks of x, y, kernel, strides, dilations and pads (2 per dim) disagree");
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
      bool inside = true, in_padded = true;
      int64_t off = 0;
      for (size_t d = 0; d < sp; ++d) {
        int64_t xd = yi[d] * s.strides[d] + ki[d] * s.dilations[d] - s.pads[d];
        inside = inside && xd >= 0 && xd < s.x[d];
        in_padded = in_padded && xd < s.x[d] + s.pads[d + sp];
        off = off * s.x[d] + xd;
      }
      if (inside) w.taps[static_cast<size_t>(yf * w.nk + kf)] = off;
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

/** The first maximum of window yf over plane x, or -1 if the window holds no element. */
int64_t argmax(const Windows &w, int64_t yf, const float *x) {
  int64_t best = -1;
  const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
  for (int64_t kf = 0; kf < w.nk; ++kf)
    if (tap[kf] >= 0 && (best < 0 || x[tap[kf]] > x[best])) best = tap[kf];
  return best;
}

}  // namespace

void max_pool_forward(const PoolShape &s, const float *x, float *y, int64_t *indices) {
  Windows w = make_windows(s);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t best = argmax(w, yf, x + p * w.nx);
      if (best < 0) fail("max_pool_forward: a pooling window lies entirely in the padding");
      y[p * w.ny + yf] = x[p * w.nx + best];
      if (indices) indices[p * w.ny + yf] = p * w.nx + best;
    }
}

void max_pool_backward(const PoolShape &s, const float *dy, const float *x, float *dx) {
  Windows w = make_windows(s);
  std::fill(dx, dx + s.nc * w.nx, 0.0f);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t best = argmax(w, yf, x + p * w.nx);
      if (best >= 0) dx[p * w.nx + best] += dy[p * w.ny + yf];
    }
}

void avg_pool_forward(const PoolShape &s, const float *x, float *y) {
  Windows w = make_windows(s);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
      double sum = 0;
      for (int64_t kf = 0; kf < w.nk; ++kf)
        if (tap[kf] >= 0) sum += x[p * w.nx + tap[kf]];
      int64_t count = w.count[static_cast<size_t>(yf)];
      y[p * w.ny + yf] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
    }
}

void avg_pool_backward(const PoolShape &s, const float *dy, float *dx) {
  Windows w = make_windows(s);
  std::fill(dx, dx + s.nc * w.nx, 0.0f);
  for (int64_t p = 0; p < s.nc; ++p)
    for (int64_t yf = 0; yf < w.ny; ++yf) {
      int64_t count = w.count[static_cast<size_t>(yf)];
      if (count == 0) continue;
      float g = dy[p * w.ny + yf] / static_cast<float>(count);
      const int64_t *tap = &w.taps[static_cast<size_t>(yf * w.nk)];
      for (int64_t kf = 0; kf < w.nk; ++kf)
        if (tap[kf] >= 0) dx[p * w.nx + tap[kf]] += g;
    }
}

void global_avg_pool_forward(int64_t nc, int64_t spatial, const float *x, float *y) {
  for (int64_t p = 0; p < nc; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < spatial; ++i) sum += x[p * spatial + i];
    y[p] = static_cast<float>(sum / static_cast<double>(spatial));
  }
}

void global_avg_pool_backward(int64_t nc, int64_t spatial, const float *dy, float *dx) {
  for (int64_t p = 0; p < nc; ++p)
    for (int64_t i = 0; i < spatial; ++i) dx[p * spatial + i] = dy[p] / static_cast<float>(spatial);
}

}  // namespace cleave::rt
