// N-d convolution (groups, strides, asymmetric and negative pads, dilations) and its gradients: on oneDNN where the
// runtime has it (cpu/onednn.h: 1- to 3-d), else by im2col + GEMM here. Kernel taps that read only padding are cut
// off first (live_taps).
#include <algorithm>
#include <vector>

#include "cleave/rt.h"
#include "common/shapes.h"
#include "cpu/onednn.h"

namespace cleave::rt {
namespace {

int64_t product(const Dims &d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

/** The geometry shared by the three kernels. taps[kf * ny + yf] = flat spatial index into X read by kernel
 *  position kf at output position yf, or -1 where that lands in the padding. */
struct Geometry {
  int64_t cg = 0, mg = 0, nx = 0, ny = 0, nk = 0;
  std::vector<int64_t> taps;
};

Geometry make_geometry(const ConvShape &s) {
  host::check_conv_shape(s);
  size_t sp = s.x.size();
  Geometry g;
  g.cg = s.c / s.group;
  g.mg = s.m / s.group;
  g.nx = product(s.x);
  g.ny = product(s.y);
  g.nk = product(s.w);
  g.taps.assign(static_cast<size_t>(g.nk * g.ny), -1);
  std::vector<int64_t> ki(sp, 0), yi(sp, 0);
  for (int64_t kf = 0; kf < g.nk; ++kf) {
    std::fill(yi.begin(), yi.end(), 0);
    for (int64_t yf = 0; yf < g.ny; ++yf) {
      int64_t off = 0;
      bool inside = true;
      for (size_t d = 0; d < sp; ++d) {
        int64_t xd = yi[d] * s.strides[d] + ki[d] * s.dilations[d] - s.pads[d];
        inside = inside && xd >= 0 && xd < s.x[d];
        off = off * s.x[d] + xd;
      }
      if (inside) g.taps[static_cast<size_t>(kf * g.ny + yf)] = off;
      for (size_t d = sp; d-- > 0;)  // advance the output multi-index
        if (++yi[d] < s.y[d]) break;
        else yi[d] = 0;
    }
    for (size_t d = sp; d-- > 0;)
      if (++ki[d] < s.w[d]) break;
      else ki[d] = 0;
  }
  return g;
}

/** col [cg * nk, ny] of the channels of one (sample, group) starting at x. */
void im2col(const Geometry &g, const real *x, real *col) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      const int64_t *tap = &g.taps[static_cast<size_t>(kf * g.ny)];
      real *dst = col + (ci * g.nk + kf) * g.ny;
      const real *src = x + ci * g.nx;
      for (int64_t yf = 0; yf < g.ny; ++yf) dst[yf] = tap[yf] >= 0 ? src[tap[yf]] : 0.0f;
    }
}

/** The adjoint of im2col: dx += scatter of col. */
void col2im(const Geometry &g, const real *col, real *dx) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      const int64_t *tap = &g.taps[static_cast<size_t>(kf * g.ny)];
      const real *src = col + (ci * g.nk + kf) * g.ny;
      real *dst = dx + ci * g.nx;
      for (int64_t yf = 0; yf < g.ny; ++yf)
        if (tap[yf] >= 0) dst[tap[yf]] += src[yf];
    }
}

/** A conv whose kernel is cut to the taps that read X somewhere. A tap whose every read lands in the padding only
 *  multiplies zeros: ImageNet nets run on 32x32 inputs apply 3x3 convs to 1x1 maps, where 8 of 9 taps are such, and
 *  reading their weights was most of those convs' time. Per spatial dim the taps kept are one interval [lo, hi)
 *  (tap k reads x = y * stride + k * dilation - pad_begin for y in [0, Y); a tap is cut when all of those lie below
 *  0 or all at or past X), and the cut conv reads the same inputs at the same outputs with pads moved by the taps cut
 *  (they may turn negative, which the kernels take). Only a NaN or infinite weight on a cut tap sees the difference:
 *  torch's 0 * NaN makes its outputs NaN. */
struct LiveTaps {
  bool cut = false;               // some tap is cut
  ConvShape shape;                // the cut conv
  detail::onednn::KernelBox box;  // where its kernel lies in whole kernel rows
  std::vector<int64_t> offsets;   // per kept tap (row-major over the cut kernel), its offset in a whole kernel row
  int64_t taps = 0;               // of a whole kernel row
};

LiveTaps live_taps(const ConvShape &s) {
  LiveTaps t;
  size_t sp = s.x.size();
  Dims lo(sp), hi(sp);
  for (size_t d = 0; d < sp; ++d) {
    lo[d] = s.w[d];
    hi[d] = 0;
    for (int64_t k = 0; k < s.w[d]; ++k) {
      int64_t first = k * s.dilations[d] - s.pads[d], last = first + (s.y[d] - 1) * s.strides[d];
      if (first < s.x[d] && last >= 0) {
        lo[d] = std::min(lo[d], k);
        hi[d] = std::max(hi[d], k + 1);
      }
    }
    if (lo[d] >= hi[d]) return t;  // every tap reads padding only: left to the kernels as it is
    t.cut = t.cut || hi[d] - lo[d] < s.w[d];
  }
  if (!t.cut) return t;
  t.shape = s;
  t.box = {s.w, lo};
  for (size_t d = 0; d < sp; ++d) {
    t.shape.w[d] = hi[d] - lo[d];
    t.shape.pads[d] = s.pads[d] - lo[d] * s.dilations[d];
    t.shape.pads[d + sp] = s.pads[d + sp] - (s.w[d] - hi[d]) * s.dilations[d];
  }
  t.taps = product(s.w);
  Dims k(sp, 0);
  for (int64_t n = product(t.shape.w); n-- > 0;) {
    int64_t off = 0;
    for (size_t d = 0; d < sp; ++d) off = off * s.w[d] + lo[d] + k[d];
    t.offsets.push_back(off);
    for (size_t d = sp; d-- > 0;)
      if (++k[d] < t.shape.w[d]) break;
      else k[d] = 0;
  }
  return t;
}

int64_t kernel_rows(const ConvShape &s) { return s.m * (s.c / s.group); }

/** The kept taps of each kernel row of w [m, c / group, taps...]. */
const real *cut_weights(const LiveTaps &t, const real *w) {
  thread_local std::vector<real> cut;
  int64_t rows = kernel_rows(t.shape), kept = static_cast<int64_t>(t.offsets.size());
  cut.resize(static_cast<size_t>(rows * kept));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < kept; ++i) cut[static_cast<size_t>(r * kept + i)] = w[r * t.taps + t.offsets[i]];
  return cut.data();
}

// Our kernels (im2col + GEMM), where oneDNN declines.

void im2col_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y) {
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::vector<real> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      im2col(g, x + (n * s.c + grp * g.cg) * g.nx, col.data());
      real *yg = y + (n * s.m + grp * g.mg) * g.ny;
      gemm(false, false, g.mg, g.ny, kdim, 1.0f, w + grp * g.mg * kdim, kdim, col.data(), g.ny, 0.0f, yg, g.ny);
      if (b)
        for (int64_t mi = 0; mi < g.mg; ++mi)
          for (int64_t yf = 0; yf < g.ny; ++yf) yg[mi * g.ny + yf] += b[grp * g.mg + mi];
    }
}

void im2col_backward_data(const ConvShape &s, const real *dy, const real *w, real *dx) {
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::fill(dx, dx + s.n * s.c * g.nx, 0.0f);
  std::vector<real> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      // col [kdim, ny] = W_g^T [kdim, mg] x dY_g [mg, ny]
      gemm(true, false, kdim, g.ny, g.mg, 1.0f, w + grp * g.mg * kdim, kdim, dy + (n * s.m + grp * g.mg) * g.ny,
           g.ny, 0.0f, col.data(), g.ny);
      col2im(g, col.data(), dx + (n * s.c + grp * g.cg) * g.nx);
    }
}

void im2col_backward_filter(const ConvShape &s, const real *dy, const real *x, real *dw) {
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::fill(dw, dw + s.m * kdim, 0.0f);
  std::vector<real> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      im2col(g, x + (n * s.c + grp * g.cg) * g.nx, col.data());
      // dW_g [mg, kdim] += dY_g [mg, ny] x col^T [ny, kdim]
      gemm(false, true, g.mg, kdim, g.ny, 1.0f, dy + (n * s.m + grp * g.mg) * g.ny, g.ny, col.data(), g.ny, 1.0f,
           dw + grp * g.mg * kdim, kdim);
    }
}

}  // namespace

// A cut conv runs on oneDNN reading and writing the kept taps in place (a strided view of W); ours copies them out.

void conv_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y) {
  host::check_conv_shape(s);
  LiveTaps t = live_taps(s);
  const ConvShape &run = t.cut ? t.shape : s;
  if (detail::onednn::conv_forward(run, x, w, b, y, t.box)) return;
  im2col_forward(run, x, t.cut ? cut_weights(t, w) : w, b, y);
}

void conv_backward_data(const ConvShape &s, const real *dy, const real *w, real *dx) {
  host::check_conv_shape(s);
  LiveTaps t = live_taps(s);
  const ConvShape &run = t.cut ? t.shape : s;
  if (detail::onednn::conv_backward_data(run, dy, w, dx, t.box)) return;
  im2col_backward_data(run, dy, t.cut ? cut_weights(t, w) : w, dx);
}

void conv_backward_filter(const ConvShape &s, const real *dy, const real *x, real *dw) {
  host::check_conv_shape(s);
  LiveTaps t = live_taps(s);
  if (!t.cut) {
    if (!detail::onednn::conv_backward_filter(s, dy, x, dw)) im2col_backward_filter(s, dy, x, dw);
    return;
  }
  int64_t rows = kernel_rows(s), kept = static_cast<int64_t>(t.offsets.size());
  std::fill(dw, dw + rows * t.taps, 0.0f);  // the cut taps' gradient
  if (detail::onednn::conv_backward_filter(t.shape, dy, x, dw, t.box)) return;
  thread_local std::vector<real> cut;
  cut.resize(static_cast<size_t>(rows * kept));
  im2col_backward_filter(t.shape, dy, x, cut.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < kept; ++i) dw[r * t.taps + t.offsets[i]] = cut[static_cast<size_t>(r * kept + i)];
}

void conv_backward_bias(const ConvShape &s, const real *dy, real *db) {
  int64_t ny = product(s.y);
  for (int64_t mi = 0; mi < s.m; ++mi) {
    double sum = 0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t yf = 0; yf < ny; ++yf) sum += dy[(n * s.m + mi) * ny + yf];
    db[mi] = static_cast<real>(sum);
  }
}

}  // namespace cleave::rt
