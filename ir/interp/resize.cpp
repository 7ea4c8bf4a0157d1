// Resize (nearest, linear and cubic over the spatial dims, ONNX's coordinate transformations) and its gradient, the
// scatter-add of each output's weights back onto the input positions it read. In float64.
#include <algorithm>
#include <cmath>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** Output position o of one spatial dim reads the inputs idx[o][j] with weights w[o][j]. */
struct Taps {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
};

/** ONNX's x_original of output position o. `resized` is scale * in, a real number, as ONNX's reference computes it
 *  (with sizes given, scale = out / in, so it is the output length). */
double source_coord(const KernelArgs &k, const std::string &mode, int64_t o, double scale, int64_t in) {
  double x = static_cast<double>(o), resized = scale * static_cast<double>(in);
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return resized == 1 ? 0.0 : x * static_cast<double>(in - 1) / (resized - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  CLEAVE_USER_ERROR(k.label(), ": coordinate_transformation_mode \"", mode, "\" is not supported");
}

int64_t nearest_index(const KernelArgs &k, const std::string &mode, double x) {
  double f = std::floor(x);
  bool half = x == f + 0.5;
  if (mode == "floor") return static_cast<int64_t>(f);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "round_prefer_floor") return static_cast<int64_t>(half ? f : std::round(x));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(half ? f + 1 : std::round(x));
  CLEAVE_USER_ERROR(k.label(), ": nearest_mode \"", mode, "\" is not supported");
}

/** The four inputs around x with Keys' cubic weights (coefficient a), read with edge padding as ONNX's reference
 *  reads them; exclude_outside zeroes the taps outside [0, in) and renormalises the others. */
void cubic_taps(double x, int64_t in, double a, bool exclude_outside, std::vector<int64_t> &idx,
                std::vector<double> &w) {
  double f = std::floor(x), t = x - f;
  auto near = [a](double s) { return (a + 2) * s * s * s - (a + 3) * s * s + 1; };
  auto far = [a](double s) { return a * s * s * s - 5 * a * s * s + 8 * a * s - 4 * a; };
  double coeff[4] = {far(1 + t), near(t), near(1 - t), far(2 - t)}, kept = 0;
  for (int j = 0; j < 4; ++j) {
    auto i = static_cast<int64_t>(f) - 1 + j;
    if (exclude_outside && (i < 0 || i >= in)) coeff[j] = 0;
    kept += coeff[j];
    idx.push_back(std::clamp<int64_t>(i, 0, in - 1));
  }
  for (double c : coeff) w.push_back(exclude_outside ? c / kept : c);
}

Taps taps_of(const KernelArgs &k, int64_t in, int64_t out, double scale) {
  const Op &op = k.op;
  std::string ctm = op.attr_string("coordinate_transformation_mode");
  const std::string &mode = op.attr_string("mode");
  Taps t;
  for (int64_t o = 0; o < out; ++o) {
    double x = source_coord(k, ctm, o, scale, in);
    if (mode == "cubic") {
      t.idx.emplace_back();
      t.w.emplace_back();
      cubic_taps(x, in, op.attr_float("cubic_coeff_a", -0.75), op.attr_int("exclude_outside", 0) != 0,
                 t.idx.back(), t.w.back());
      continue;
    }
    if (mode == "nearest") {
      int64_t i = std::clamp<int64_t>(nearest_index(k, op.attr_string("nearest_mode"), x), 0, in - 1);
      t.idx.push_back({i});
      t.w.push_back({1.0});
      continue;
    }
    // Out-of-range coordinates read the edge (ONNX pads with edge values; torch clamps the source index).
    x = std::clamp(x, 0.0, static_cast<double>(in - 1));
    auto i0 = static_cast<int64_t>(std::floor(x));
    int64_t i1 = std::min(i0 + 1, in - 1);
    double w1 = x - static_cast<double>(i0);
    t.idx.push_back({i0, i1});
    t.w.push_back({1.0 - w1, w1});
  }
  return t;
}

/** Calls f(x_flat, y_flat, weight) for every (output, input tap) pair of the resize of `xs` to `ys`. */
template <typename F>
void for_each_tap(const KernelArgs &k, const Shape &xs, const Shape &ys, F f) {
  size_t sp = xs.size() - 2;
  std::vector<double> scales = k.op.attr_floats("scales");
  std::vector<Taps> taps;
  for (size_t d = 0; d < sp; ++d) taps.push_back(taps_of(k, xs[d + 2], ys[d + 2], scales[d + 2]));
  Shape xsp(xs.begin() + 2, xs.end()), ysp(ys.begin() + 2, ys.end());
  std::vector<int64_t> xstr = strides_of(xsp);
  int64_t nx = num_elements(xsp), ny = num_elements(ysp), planes = xs[0] * xs[1];
  std::vector<int64_t> yi, corner(sp);
  for (int64_t yf = 0; yf < ny; ++yf) {
    unravel(yf, ysp, yi);
    // Every combination of one tap per dim: the product of their weights.
    int64_t combos = 1;
    for (size_t d = 0; d < sp; ++d) combos *= static_cast<int64_t>(taps[d].idx[static_cast<size_t>(yi[d])].size());
    for (int64_t c = 0; c < combos; ++c) {
      int64_t rest = c, xoff = 0;
      double w = 1;
      for (size_t d = sp; d-- > 0;) {
        size_t o = static_cast<size_t>(yi[d]);
        auto n = static_cast<int64_t>(taps[d].idx[o].size());
        size_t j = static_cast<size_t>(rest % n);
        rest /= n;
        xoff += taps[d].idx[o][j] * xstr[d];
        w *= taps[d].w[o][j];
      }
      for (int64_t p = 0; p < planes; ++p) f(p * nx + xoff, p * ny + yf, w);
    }
  }
}

}  // namespace

void kernel_Resize(const KernelArgs &k) {
  const Value &x = k.in(0);
  Value &y = k.out(0);
  for_each_tap(k, x.shape, y.shape, [&](int64_t xf, int64_t yf, double w) {
    y.data[static_cast<size_t>(yf)] += w * x.data[static_cast<size_t>(xf)];
  });
}

void kernel_ResizeGrad(const KernelArgs &k) {
  const Value &dy = k.in(0);
  Value &dx = k.out(0);
  for_each_tap(k, dx.shape, dy.shape, [&](int64_t xf, int64_t yf, double w) {
    dx.data[static_cast<size_t>(xf)] += w * dy.data[static_cast<size_t>(yf)];
  });
}

}  // namespace cleave::interp
