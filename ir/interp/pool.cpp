// MaxPool, AveragePool, GlobalAveragePool and their gradients. Output spatial sizes come from the graph (ceil_mode
// is already reflected there), so a window may run past the padded input: such positions are simply skipped.
#include <cmath>
#include <limits>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

struct PoolGeometry {
  int64_t nc = 0;  // N * C
  Shape x_spatial, y_spatial, k_spatial;
  std::vector<int64_t> strides, pads, dilations;  // pads: begins then ends
};

PoolGeometry make_geometry(const KernelArgs &k, const Shape &x, const Shape &y) {
  if (x.size() < 3 || y.size() != x.size() || x[0] != y[0] || x[1] != y[1])
    CLEAVE_USER_ERROR(k.label(), ": expects X and Y of equal rank >= 3 and equal N, C, got ", shape_str(x), " and ",
                      shape_str(y));
  size_t sp = x.size() - 2;
  PoolGeometry geo;
  geo.nc = x[0] * x[1];
  geo.x_spatial.assign(x.begin() + 2, x.end());
  geo.y_spatial.assign(y.begin() + 2, y.end());
  geo.k_spatial = k.op.attr_ints("kernel_shape");
  geo.strides = ints_or(k.op, "strides", sp, 1);
  geo.pads = ints_or(k.op, "pads", 2 * sp, 0);
  geo.dilations = ints_or(k.op, "dilations", sp, 1);
  if (geo.k_spatial.size() != sp || geo.strides.size() != sp || geo.pads.size() != 2 * sp ||
      geo.dilations.size() != sp)
    CLEAVE_USER_ERROR(k.label(), ": kernel_shape/strides/pads/dilations do not match ", sp, " spatial dims");
  return geo;
}

/** One kernel position of a window. */
struct Tap {
  int64_t x = 0;      // flat spatial index into X (valid only if inside)
  bool inside = false;   // within the unpadded input
  bool in_padded = false;  // within the padded input (for count_include_pad)
};

/** Calls f(y_flat_spatial, window) for every output position; the window lists all kernel positions. */
template <typename F>
void for_each_window(const PoolGeometry &geo, F f) {
  size_t sp = geo.x_spatial.size();
  int64_t ny = num_elements(geo.y_spatial), nk = num_elements(geo.k_spatial);
  std::vector<int64_t> xstr = strides_of(geo.x_spatial);
  std::vector<int64_t> yi, ki;
  std::vector<Tap> window(static_cast<size_t>(nk));
  for (int64_t yf = 0; yf < ny; ++yf) {
    unravel(yf, geo.y_spatial, yi);
    for (int64_t kf = 0; kf < nk; ++kf) {
      unravel(kf, geo.k_spatial, ki);
      Tap t;
      t.inside = t.in_padded = true;
      for (size_t d = 0; d < sp; ++d) {
        int64_t xd = yi[d] * geo.strides[d] + ki[d] * geo.dilations[d] - geo.pads[d];
        t.inside = t.inside && xd >= 0 && xd < geo.x_spatial[d];
        t.in_padded = t.in_padded && xd < geo.x_spatial[d] + geo.pads[d + sp];
        t.x += xd * xstr[d];
      }
      window[static_cast<size_t>(kf)] = t;
    }
    f(yf, window);
  }
}

/** Position (spatial flat index) of the first maximum of the window, or -1 if the window has no element. A NaN
 *  wins (the last one), as in torch's max_pool: `val > maxval || isnan(val)`. */
int64_t argmax_in(const double *x, const std::vector<Tap> &window) {
  int64_t best = -1;
  for (const Tap &t : window)
    if (t.inside && (best < 0 || x[t.x] > x[best] || std::isnan(x[t.x]))) best = t.x;
  return best;
}

/** Divisor of an average window. */
int64_t window_count(const std::vector<Tap> &window, bool include_pad) {
  int64_t c = 0;
  for (const Tap &t : window) c += include_pad ? t.in_padded : t.inside;
  return c;
}

}  // namespace

void kernel_MaxPool(const KernelArgs &k) {
  const Value &x = k.in(0);
  Value &y = k.out(0);
  PoolGeometry geo = make_geometry(k, x.shape, y.shape);
  k.expect_out_shape(1, y.shape);
  bool col_major = k.op.attr_int("storage_order", 0) != 0;
  int64_t nx = num_elements(geo.x_spatial), ny = num_elements(geo.y_spatial);
  // Indices are flat into X including the N, C offset; storage_order 1 numbers the spatial dims column-major.
  std::vector<int64_t> col_strides(geo.x_spatial.size(), 1);
  for (size_t d = 1; d < geo.x_spatial.size(); ++d) col_strides[d] = col_strides[d - 1] * geo.x_spatial[d - 1];
  std::vector<int64_t> xi;
  for (int64_t nc = 0; nc < geo.nc; ++nc) {
    const double *px = x.data.data() + nc * nx;
    for_each_window(geo, [&](int64_t yf, const std::vector<Tap> &window) {
      int64_t best = argmax_in(px, window);
      if (best < 0) CLEAVE_USER_ERROR(k.label(), ": a pooling window lies entirely in the padding");
      y.data[nc * ny + yf] = px[best];
      if (k.has_out(1)) {
        int64_t pos = best;
        if (col_major) {
          unravel(best, geo.x_spatial, xi);
          pos = 0;
          for (size_t d = 0; d < xi.size(); ++d) pos += xi[d] * col_strides[d];
        }
        k.outs[1]->data[nc * ny + yf] = static_cast<double>(nc * nx + pos);
      }
    });
  }
}

void kernel_MaxPoolGrad(const KernelArgs &k) {
  // (dY, X) -> dX: each output's gradient goes to the first maximum of its window (the forward's argmax).
  const Value &dy = k.in(0);
  const Value &x = k.in(1);
  Value &dx = k.out(0);
  k.expect_out_shape(0, x.shape);
  PoolGeometry geo = make_geometry(k, x.shape, dy.shape);
  int64_t nx = num_elements(geo.x_spatial), ny = num_elements(geo.y_spatial);
  for (int64_t nc = 0; nc < geo.nc; ++nc) {
    const double *px = x.data.data() + nc * nx;
    for_each_window(geo, [&](int64_t yf, const std::vector<Tap> &window) {
      int64_t best = argmax_in(px, window);
      if (best >= 0) dx.data[nc * nx + best] += dy.data[nc * ny + yf];
    });
  }
}

void kernel_AveragePool(const KernelArgs &k) {
  const Value &x = k.in(0);
  Value &y = k.out(0);
  PoolGeometry geo = make_geometry(k, x.shape, y.shape);
  bool include_pad = k.op.attr_int("count_include_pad", 0) != 0;
  int64_t nx = num_elements(geo.x_spatial), ny = num_elements(geo.y_spatial);
  for (int64_t nc = 0; nc < geo.nc; ++nc) {
    const double *px = x.data.data() + nc * nx;
    for_each_window(geo, [&](int64_t yf, const std::vector<Tap> &window) {
      double sum = 0;
      for (const Tap &t : window)
        if (t.inside) sum += px[t.x];
      int64_t count = window_count(window, include_pad);
      y.data[nc * ny + yf] = count > 0 ? sum / static_cast<double>(count) : 0.0;
    });
  }
}

void kernel_AveragePoolGrad(const KernelArgs &k) {
  // (dY) -> dX: each output's gradient spread evenly over its window's real elements, divided by the forward's count.
  const Value &dy = k.in(0);
  Value &dx = k.out(0);
  PoolGeometry geo = make_geometry(k, dx.shape, dy.shape);
  bool include_pad = k.op.attr_int("count_include_pad", 0) != 0;
  int64_t nx = num_elements(geo.x_spatial), ny = num_elements(geo.y_spatial);
  for (int64_t nc = 0; nc < geo.nc; ++nc) {
    for_each_window(geo, [&](int64_t yf, const std::vector<Tap> &window) {
      int64_t count = window_count(window, include_pad);
      if (count == 0) return;
      double g = dy.data[nc * ny + yf] / static_cast<double>(count);
      for (const Tap &t : window)
        if (t.inside) dx.data[nc * nx + t.x] += g;
    });
  }
}

void kernel_GlobalAveragePool(const KernelArgs &k) {
  const Value &x = k.in(0);
  if (x.shape.size() < 2) CLEAVE_USER_ERROR(k.label(), ": expects rank >= 2, got ", shape_str(x.shape));
  Shape shape(x.shape.size(), 1);
  shape[0] = x.shape[0];
  shape[1] = x.shape[1];
  k.expect_out_shape(0, shape);
  int64_t nc = x.shape[0] * x.shape[1], nx = nc == 0 ? 0 : num_elements(x.shape) / nc;
  Value &y = k.out(0);
  for (int64_t i = 0; i < nc; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < nx; ++j) sum += x.data[i * nx + j];
    y.data[i] = sum / static_cast<double>(nx);
  }
}

void kernel_GlobalAveragePoolGrad(const KernelArgs &k) {
  const Value &dy = k.in(0);
  Value &dx = k.out(0);
  if (dx.shape.size() < 2 || dy.shape.size() != dx.shape.size())
    CLEAVE_USER_ERROR(k.label(), ": dY ", shape_str(dy.shape), " does not match dX ", shape_str(dx.shape));
  int64_t nc = dx.shape[0] * dx.shape[1], nx = nc == 0 ? 0 : num_elements(dx.shape) / nc;
  CLEAVE_CHECK(num_elements(dy.shape) == nc, k.label(), ": dY ", shape_str(dy.shape));
  for (int64_t i = 0; i < nc; ++i)
    for (int64_t j = 0; j < nx; ++j) dx.data[i * nx + j] = dy.data[i] / static_cast<double>(nx);
}

}  // namespace cleave::interp
