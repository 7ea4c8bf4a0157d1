// Host-side argument checks and index geometry shared by the cpu and cuda backends.
#include "common/shapes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace cleave::rt::host {

void check_conv_shape(const ConvShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.w.size() != sp || s.y.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    fail("conv: spatial ranks of x, w, y, strides, dilations and pads (2 per dim) disagree");
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0)
    fail("conv: group " + std::to_string(s.group) + " does not divide channels " + std::to_string(s.c) + " -> " +
         std::to_string(s.m));
  for (size_t d = 0; d < sp; ++d) {
    // Floor division: the local pads of a block may be negative (rt.h).
    int64_t span = s.x[d] + s.pads[d] + s.pads[d + sp] - s.dilations[d] * (s.w[d] - 1) - 1;
    int64_t expect = (span >= 0 ? span / s.strides[d] : -((-span + s.strides[d] - 1) / s.strides[d])) + 1;
    if (s.y[d] != expect)
      fail("conv: output dim " + std::to_string(d) + " is " + std::to_string(s.y[d]) + ", expected " +
           std::to_string(expect));
  }
}

void check_pool_ranks(const PoolShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.y.size() != sp || s.kernel.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    fail("pool: spatial ranks of x, y, kernel, strides, dilations and pads (2 per dim) disagree");
  for (const Dims *v : {&s.x_begin, &s.y_begin, &s.x_full, &s.dx_begin, &s.dx})
    if (!v->empty() && v->size() != sp) fail("pool: a spatial block field has the wrong rank");
}

void gather_view(const Dims &shape, int64_t axis, int64_t &outer, int64_t &dim, int64_t &inner) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) fail("gather: axis out of range");
  outer = inner = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) < axis) outer *= shape[d];
    if (static_cast<int64_t>(d) > axis) inner *= shape[d];
  }
  dim = shape[static_cast<size_t>(axis)];
}

void check_view_copy(const Dims &shape, const Dims &strides, const Dims *y_strides) {
  if (strides.size() != shape.size() || (y_strides && y_strides->size() != shape.size()))
    fail("view_copy: strides and shape differ in rank");
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0 || strides[d] < 0 || (y_strides && (*y_strides)[d] < 0))
      fail("view_copy: negative size or stride in dim " + std::to_string(d));
}

int64_t slice_len(int64_t start, int64_t end, int64_t step) {
  if (step == 0) fail("slice: step 0");
  int64_t len = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
  return len > 0 ? len : 0;
}

void slice_geometry(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, Dims &out, Dims &st,
                    int64_t &base) {
  size_t r = shape.size();
  if (starts.size() != r || ends.size() != r || steps.size() != r) fail("slice: one start/end/step per dim expected");
  out.assign(r, 0);
  st.assign(r, 0);
  base = 0;
  int64_t s = 1;
  for (size_t d = r; d-- > 0;) {
    out[d] = slice_len(starts[d], ends[d], steps[d]);
    st[d] = s * steps[d];
    if (out[d] > 0) base += starts[d] * s;
    s *= shape[d];
  }
}

namespace {

/** ONNX's x_original of output position o (resized = scale * in, a real number, as ONNX's reference computes it). */
double source_coord(ResizeCoord coord, int64_t o, double scale, int64_t in) {
  double x = static_cast<double>(o), resized = scale * static_cast<double>(in);
  switch (coord) {
    case ResizeCoord::half_pixel: return (x + 0.5) / scale - 0.5;
    case ResizeCoord::pytorch_half_pixel: return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::align_corners: return resized == 1 ? 0.0 : x * static_cast<double>(in - 1) / (resized - 1);
    case ResizeCoord::asymmetric: return x / scale;
    case ResizeCoord::tf_half_pixel_for_nn: return (x + 0.5) / scale;
  }
  return x;
}

int64_t nearest_index(ResizeNearest mode, double x) {
  double f = std::floor(x);
  bool half = x == f + 0.5;
  switch (mode) {
    case ResizeNearest::floor: return static_cast<int64_t>(f);
    case ResizeNearest::ceil: return static_cast<int64_t>(std::ceil(x));
    case ResizeNearest::round_prefer_floor: return static_cast<int64_t>(half ? f : std::round(x));
    case ResizeNearest::round_prefer_ceil: return static_cast<int64_t>(half ? f + 1 : std::round(x));
  }
  return static_cast<int64_t>(f);
}

/** Keys' cubic convolution weights of the taps at floor(x) - 1 .. floor(x) + 2 for t = x - floor(x), with ONNX's
 *  cubic_coeff_a `a` (torch's bicubic: -0.75). */
std::array<double, 4> cubic_weights(double t, double a) {
  auto near = [a](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };      // |s| <= 1
  auto far = [a](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };  // 1 < |s| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

}  // namespace

std::vector<ResizeTaps> resize_taps(const ResizeShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.y.size() != sp || s.scales.size() != sp) fail("resize: spatial ranks of x, y and scales disagree");
  std::vector<ResizeTaps> taps(sp);
  for (size_t d = 0; d < sp; ++d) {
    if (s.x[d] < 1 || s.y[d] < 0 || !(s.scales[d] > 0)) fail("resize: empty input or non-positive scale");
    ResizeTaps &t = taps[d];
    t.k = s.mode == ResizeMode::nearest ? 1 : s.mode == ResizeMode::linear ? 2 : 4;
    int64_t last = s.x[d] - 1;
    for (int64_t o = 0; o < s.y[d]; ++o) {
      double x = source_coord(s.coord, o, s.scales[d], s.x[d]);
      if (s.mode == ResizeMode::nearest) {
        t.idx.push_back(std::clamp<int64_t>(nearest_index(s.nearest, x), 0, last));
        t.w.push_back(1.0);
        continue;
      }
      if (s.mode == ResizeMode::linear) {
        x = std::clamp(x, 0.0, static_cast<double>(last));
        auto i0 = static_cast<int64_t>(std::floor(x));
        t.idx.insert(t.idx.end(), {i0, std::min(i0 + 1, last)});
        t.w.insert(t.w.end(), {1.0 - (x - static_cast<double>(i0)), x - static_cast<double>(i0)});
        continue;
      }
      // Cubic: the four inputs around x, read with edge padding (ONNX's reference; torch clamps the index alike);
      // exclude_outside drops the taps outside the input and renormalises the rest.
      double f = std::floor(x);
      auto i0 = static_cast<int64_t>(f);
      std::array<double, 4> w = cubic_weights(x - f, s.cubic_a);
      double kept = 0;
      for (int j = 0; j < 4; ++j) {
        int64_t i = i0 - 1 + j;
        if (s.exclude_outside && (i < 0 || i > last)) w[static_cast<size_t>(j)] = 0;
        kept += w[static_cast<size_t>(j)];
      }
      for (int j = 0; j < 4; ++j) {
        t.idx.push_back(std::clamp<int64_t>(i0 - 1 + j, 0, last));
        t.w.push_back(s.exclude_outside ? w[static_cast<size_t>(j)] / kept : w[static_cast<size_t>(j)]);
      }
    }
  }
  return taps;
}

void check_elementwise_indices(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const char *what) {
  if (ind_shape.size() != data_shape.size() || data_shape.empty())
    fail(std::string(what) + ": indices and data differ in rank");
  if (axis < 0 || axis >= static_cast<int64_t>(data_shape.size())) fail(std::string(what) + ": axis out of range");
  for (size_t d = 0; d < data_shape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ind_shape[d] > data_shape[d])
      fail(std::string(what) + ": indices exceed data on dim " + std::to_string(d));
}

GatherNdView gather_nd_view(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims) {
  GatherNdView v;
  size_t b = static_cast<size_t>(batch_dims), q = ind_shape.size();
  if (batch_dims < 0 || q == 0 || b >= q || b >= data_shape.size()) fail("gather_nd: batch_dims out of range");
  v.depth = ind_shape[q - 1];
  if (v.depth < 1 || b + static_cast<size_t>(v.depth) > data_shape.size()) fail("gather_nd: index tuples too long");
  for (size_t d = 0; d < b; ++d) {
    if (data_shape[d] != ind_shape[d]) fail("gather_nd: batch dims of data and indices differ");
    v.batches *= data_shape[d];
  }
  for (size_t d = b; d + 1 < q; ++d) v.tuples *= ind_shape[d];
  for (size_t d = b; d < data_shape.size(); ++d) {
    v.per_batch *= data_shape[d];
    if (d < b + static_cast<size_t>(v.depth)) v.index_dims.push_back(data_shape[d]);
    else v.slice *= data_shape[d];
  }
  return v;
}

}  // namespace cleave::rt::host
