// Conv (N-d, groups, strides, pads, dilations), its two gradients and ConvTranspose (a Conv's data gradient plus a
// bias). All of them share one loop nest over the
// (output position, kernel position) pairs whose input position lies inside the unpadded input.
#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

struct ConvGeometry {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Shape x_spatial, y_spatial, k_spatial;
  std::vector<int64_t> strides, pads, dilations;  // pads: begins then ends
};

/** x: [N, C, xs...], w: [M, C/group, ks...], y: [N, M, ys...]; the shapes are all known by each caller. */
ConvGeometry make_geometry(const KernelArgs &k, const Shape &x, const Shape &w, const Shape &y) {
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
    CLEAVE_USER_ERROR(k.label(), ": expects X, W and Y of equal rank >= 3, got ", shape_str(x), ", ", shape_str(w),
                      ", ", shape_str(y));
  size_t sp = x.size() - 2;
  ConvGeometry geo;
  geo.n = x[0];
  geo.c = x[1];
  geo.m = w[0];
  geo.group = k.op.attr_int("group", 1);
  geo.x_spatial.assign(x.begin() + 2, x.end());
  geo.y_spatial.assign(y.begin() + 2, y.end());
  geo.k_spatial.assign(w.begin() + 2, w.end());
  geo.strides = ints_or(k.op, "strides", sp, 1);
  geo.pads = ints_or(k.op, "pads", 2 * sp, 0);
  geo.dilations = ints_or(k.op, "dilations", sp, 1);
  if (geo.strides.size() != sp || geo.pads.size() != 2 * sp || geo.dilations.size() != sp)
    CLEAVE_USER_ERROR(k.label(), ": strides/pads/dilations do not match ", sp, " spatial dims");
  if (geo.group < 1 || geo.c % geo.group != 0 || geo.m % geo.group != 0 || w[1] != geo.c / geo.group)
    CLEAVE_USER_ERROR(k.label(), ": group ", geo.group, " does not fit X ", shape_str(x), " and W ", shape_str(w));
  CLEAVE_CHECK(y[0] == geo.n && y[1] == geo.m, k.label(), ": Y ", shape_str(y));
  for (size_t d = 0; d < sp; ++d) {
    int64_t eff = geo.dilations[d] * (geo.k_spatial[d] - 1) + 1;
    int64_t expect = (geo.x_spatial[d] + geo.pads[d] + geo.pads[d + sp] - eff) / geo.strides[d] + 1;
    CLEAVE_CHECK(geo.y_spatial[d] == expect, k.label(), ": spatial dim ", d, " is ", geo.y_spatial[d],
                 ", expected ", expect);
  }
  return geo;
}

/** Calls f(x_flat, w_flat, y_flat) for every contributing triple. */
template <typename F>
void for_each_tap(const ConvGeometry &geo, F f) {
  size_t sp = geo.x_spatial.size();
  int64_t cg = geo.c / geo.group, mg = geo.m / geo.group;
  int64_t ny = num_elements(geo.y_spatial), nk = num_elements(geo.k_spatial), nx = num_elements(geo.x_spatial);
  std::vector<int64_t> xstr = strides_of(geo.x_spatial);
  std::vector<int64_t> yi, ki;
  for (int64_t n = 0; n < geo.n; ++n)
    for (int64_t m = 0; m < geo.m; ++m) {
      int64_t g = m / mg;
      for (int64_t yf = 0; yf < ny; ++yf) {
        unravel(yf, geo.y_spatial, yi);
        int64_t y_flat = (n * geo.m + m) * ny + yf;
        for (int64_t kf = 0; kf < nk; ++kf) {
          unravel(kf, geo.k_spatial, ki);
          int64_t xoff = 0;
          bool inside = true;
          for (size_t d = 0; d < sp && inside; ++d) {
            int64_t xd = yi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads[d];
            inside = xd >= 0 && xd < geo.x_spatial[d];
            xoff += xd * xstr[d];
          }
          if (!inside) continue;
          for (int64_t ci = 0; ci < cg; ++ci) {
            int64_t x_flat = (n * geo.c + g * cg + ci) * nx + xoff;
            int64_t w_flat = (m * cg + ci) * nk + kf;
            f(x_flat, w_flat, y_flat);
          }
        }
      }
    }
}

}  // namespace

void kernel_Conv(const KernelArgs &k) {
  const Value &x = k.in(0);
  const Value &w = k.in(1);
  Value &y = k.out(0);
  ConvGeometry geo = make_geometry(k, x.shape, w.shape, y.shape);
  for_each_tap(geo, [&](int64_t xf, int64_t wf, int64_t yf) { y.data[yf] += x.data[xf] * w.data[wf]; });
  if (k.has_in(2)) {
    const Value &b = k.in(2);
    if (b.shape != Shape{geo.m}) CLEAVE_USER_ERROR(k.label(), ": bias shape ", shape_str(b.shape), " is not [", geo.m, "]");
    int64_t ny = num_elements(geo.y_spatial);
    for (size_t i = 0; i < y.data.size(); ++i) y.data[i] += b.data[(static_cast<int64_t>(i) / ny) % geo.m];
  }
}

void kernel_ConvGradData(const KernelArgs &k) {
  // (dY, W) -> dX: dX[x] = sum over taps reading x of dY[y] * W[w].
  const Value &dy = k.in(0);
  const Value &w = k.in(1);
  Value &dx = k.out(0);
  ConvGeometry geo = make_geometry(k, dx.shape, w.shape, dy.shape);
  for_each_tap(geo, [&](int64_t xf, int64_t wf, int64_t yf) { dx.data[xf] += dy.data[yf] * w.data[wf]; });
}

void kernel_ConvGradFilter(const KernelArgs &k) {
  // (dY, X) -> dW: dW[w] = sum over taps using w of dY[y] * X[x].
  const Value &dy = k.in(0);
  const Value &x = k.in(1);
  Value &dw = k.out(0);
  ConvGeometry geo = make_geometry(k, x.shape, dw.shape, dy.shape);
  for_each_tap(geo, [&](int64_t xf, int64_t wf, int64_t yf) { dw.data[wf] += dy.data[yf] * x.data[xf]; });
}

void kernel_ConvTranspose(const KernelArgs &k) {
  // (X, W, B?) -> Y: Y is the dX of a Conv with W whose output is X; output_padding only lengthens Y (its tail rows
  // receive no tap), so the shared geometry check holds.
  const Value &x = k.in(0);
  const Value &w = k.in(1);
  Value &y = k.out(0);
  ConvGeometry geo = make_geometry(k, y.shape, w.shape, x.shape);
  for_each_tap(geo, [&](int64_t yf, int64_t wf, int64_t xf) { y.data[yf] += x.data[xf] * w.data[wf]; });
  if (k.has_in(2)) {
    const Value &b = k.in(2);
    if (b.shape != Shape{geo.c}) CLEAVE_USER_ERROR(k.label(), ": bias shape ", shape_str(b.shape), " is not [", geo.c, "]");
    int64_t ny = num_elements(geo.x_spatial);
    for (size_t i = 0; i < y.data.size(); ++i) y.data[i] += b.data[(static_cast<int64_t>(i) / ny) % geo.c];
  }
}

}  // namespace cleave::interp
