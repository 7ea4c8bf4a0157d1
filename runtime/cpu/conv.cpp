// N-d convolution (groups, strides, asymmetric and negative pads, dilations) and its gradients: on oneDNN where the
// runtime has it (cpu/onednn.h: 1- to 3-d), else by im2col + GEMM here.
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
void im2col(const Geometry &g, const float *x, float *col) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      const int64_t *tap = &g.taps[static_cast<size_t>(kf * g.ny)];
      float *dst = col + (ci * g.nk + kf) * g.ny;
      const float *src = x + ci * g.nx;
      for (int64_t yf = 0; yf < g.ny; ++yf) dst[yf] = tap[yf] >= 0 ? src[tap[yf]] : 0.0f;
    }
}

/** The adjoint of im2col: dx += scatter of col. */
void col2im(const Geometry &g, const float *col, float *dx) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      const int64_t *tap = &g.taps[static_cast<size_t>(kf * g.ny)];
      const float *src = col + (ci * g.nk + kf) * g.ny;
      float *dst = dx + ci * g.nx;
      for (int64_t yf = 0; yf < g.ny; ++yf)
        if (tap[yf] >= 0) dst[tap[yf]] += src[yf];
    }
}

}  // namespace

void conv_forward(const ConvShape &s, const float *x, const float *w, const float *b, float *y) {
  host::check_conv_shape(s);
  if (detail::onednn::conv_forward(s, x, w, b, y)) return;
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::vector<float> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      im2col(g, x + (n * s.c + grp * g.cg) * g.nx, col.data());
      float *yg = y + (n * s.m + grp * g.mg) * g.ny;
      gemm(false, false, g.mg, g.ny, kdim, 1.0f, w + grp * g.mg * kdim, kdim, col.data(), g.ny, 0.0f, yg, g.ny);
      if (b)
        for (int64_t mi = 0; mi < g.mg; ++mi)
          for (int64_t yf = 0; yf < g.ny; ++yf) yg[mi * g.ny + yf] += b[grp * g.mg + mi];
    }
}

void conv_backward_data(const ConvShape &s, const float *dy, const float *w, float *dx) {
  host::check_conv_shape(s);
  if (detail::onednn::conv_backward_data(s, dy, w, dx)) return;
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::fill(dx, dx + s.n * s.c * g.nx, 0.0f);
  std::vector<float> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      // col [kdim, ny] = W_g^T [kdim, mg] x dY_g [mg, ny]
      gemm(true, false, kdim, g.ny, g.mg, 1.0f, w + grp * g.mg * kdim, kdim, dy + (n * s.m + grp * g.mg) * g.ny,
           g.ny, 0.0f, col.data(), g.ny);
      col2im(g, col.data(), dx + (n * s.c + grp * g.cg) * g.nx);
    }
}

void conv_backward_filter(const ConvShape &s, const float *dy, const float *x, float *dw) {
  host::check_conv_shape(s);
  if (detail::onednn::conv_backward_filter(s, dy, x, dw)) return;
  Geometry g = make_geometry(s);
  int64_t kdim = g.cg * g.nk;
  std::fill(dw, dw + s.m * kdim, 0.0f);
  std::vector<float> col(static_cast<size_t>(kdim * g.ny));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      im2col(g, x + (n * s.c + grp * g.cg) * g.nx, col.data());
      // dW_g [mg, kdim] += dY_g [mg, ny] x col^T [ny, kdim]
      gemm(false, true, g.mg, kdim, g.ny, 1.0f, dy + (n * s.m + grp * g.mg) * g.ny, g.ny, col.data(), g.ny, 1.0f,
           dw + grp * g.mg * kdim, kdim);
    }
}

void conv_backward_bias(const ConvShape &s, const float *dy, float *db) {
  int64_t ny = product(s.y);
  for (int64_t mi = 0; mi < s.m; ++mi) {
    double sum = 0;
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t yf = 0; yf < ny; ++yf) sum += dy[(n * s.m + mi) * ny + yf];
    db[mi] = static_cast<float>(sum);
  }
}

}  // namespace cleave::rt
