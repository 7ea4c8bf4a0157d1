// Mask and selection kernels: Where, Cast, comparisons, boolean logic, Reciprocal, variadic Max/Min,
// ReduceMax/ReduceMin and Pad (constant, edge and reflect modes). Booleans are held as 0/1.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** y[i] = f(values of every input at the element broadcast to i). */
template <typename F>
void broadcast_all(const KernelArgs &k, F f) {
  Shape shape = k.in(0).shape;
  for (size_t i = 1; i < k.ins.size(); ++i) shape = broadcast_shape(k, shape, k.in(i).shape);
  k.expect_out_shape(0, shape);
  std::vector<std::vector<int64_t>> maps;
  for (size_t i = 0; i < k.ins.size(); ++i) maps.push_back(broadcast_index_map(k.in(i).shape, shape));
  Value &y = k.out(0);
  std::vector<double> args(k.ins.size());
  for (size_t o = 0; o < y.data.size(); ++o) {
    for (size_t i = 0; i < k.ins.size(); ++i) args[i] = k.in(i).data[static_cast<size_t>(maps[i][o])];
    y.data[o] = f(args);
  }
}

template <typename F>
void binary(const KernelArgs &k, F f) {
  broadcast_all(k, [&](const std::vector<double> &a) { return f(a[0], a[1]) ? 1.0 : 0.0; });
}

void reduce_extreme(const KernelArgs &k, bool max) {
  const Value &x = k.in(0);
  std::vector<int64_t> axes = k.op.attr_ints("axes");
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes) reduced[static_cast<size_t>(norm_axis(k, a, static_cast<int64_t>(x.shape.size())))] = true;
  bool keepdims = k.op.attr_int("keepdims", 1) != 0;
  Shape kept, out_shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d] || keepdims) out_shape.push_back(kept.back());
  }
  k.expect_out_shape(0, out_shape);
  Value &y = k.out(0);
  double init = max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  std::fill(y.data.begin(), y.data.end(), init);
  std::vector<int64_t> st = strides_of(kept), idx;
  for (int64_t f = 0; f < num_elements(x.shape); ++f) {
    unravel(f, x.shape, idx);
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d]) o += idx[d] * st[d];
    double v = x.data[static_cast<size_t>(f)];
    double &acc = y.data[static_cast<size_t>(o)];
    // NaN propagates, as numpy's max/min do.
    if (std::isnan(v) || (max ? v > acc : v < acc)) acc = v;
  }
}

}  // namespace

void kernel_Reciprocal(const KernelArgs &k) {
  broadcast_all(k, [](const std::vector<double> &a) { return 1.0 / a[0]; });
}

void kernel_Where(const KernelArgs &k) {
  broadcast_all(k, [](const std::vector<double> &a) { return a[0] != 0 ? a[1] : a[2]; });
}

void kernel_Cast(const KernelArgs &k) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  Value &y = k.out(0);
  DType to = y.dtype;
  for (size_t i = 0; i < x.data.size(); ++i) {
    double v = x.data[i];
    if (to == DType::boolean) {
      y.data[i] = v != 0 ? 1.0 : 0.0;
    } else if (is_integer(to)) {
      // Truncation toward zero (C++ and numpy's astype; run_op wraps to the width); NaN and inf are the model's
      // error.
      if (!std::isfinite(v)) CLEAVE_USER_ERROR(k.label(), ": cannot cast ", v, " to an integer");
      y.data[i] = std::trunc(v);
    } else {
      y.data[i] = v;  // run_op rounds f32, f16 and bf16 results to nearest even
    }
  }
}

void kernel_Equal(const KernelArgs &k) { binary(k, [](double a, double b) { return a == b; }); }
void kernel_Less(const KernelArgs &k) { binary(k, [](double a, double b) { return a < b; }); }
void kernel_Greater(const KernelArgs &k) { binary(k, [](double a, double b) { return a > b; }); }
void kernel_LessOrEqual(const KernelArgs &k) { binary(k, [](double a, double b) { return a <= b; }); }
void kernel_GreaterOrEqual(const KernelArgs &k) { binary(k, [](double a, double b) { return a >= b; }); }
void kernel_And(const KernelArgs &k) { binary(k, [](double a, double b) { return a != 0 && b != 0; }); }
void kernel_Or(const KernelArgs &k) { binary(k, [](double a, double b) { return a != 0 || b != 0; }); }
void kernel_Xor(const KernelArgs &k) { binary(k, [](double a, double b) { return (a != 0) != (b != 0); }); }
void kernel_Not(const KernelArgs &k) {
  broadcast_all(k, [](const std::vector<double> &a) { return a[0] != 0 ? 0.0 : 1.0; });
}

void kernel_Max(const KernelArgs &k) {
  broadcast_all(k, [](const std::vector<double> &a) {
    double m = a[0];
    for (double v : a) m = std::isnan(v) || v > m ? v : m;
    return m;
  });
}
void kernel_Min(const KernelArgs &k) {
  broadcast_all(k, [](const std::vector<double> &a) {
    double m = a[0];
    for (double v : a) m = std::isnan(v) || v < m ? v : m;
    return m;
  });
}

void kernel_ReduceMax(const KernelArgs &k) { reduce_extreme(k, true); }
void kernel_ReduceMin(const KernelArgs &k) { reduce_extreme(k, false); }

void kernel_Pad(const KernelArgs &k) {
  const Value &x = k.in(0);
  std::vector<int64_t> pads = k.op.attr_ints("pads");
  size_t n = x.shape.size();
  if (pads.size() != 2 * n) CLEAVE_USER_ERROR(k.label(), ": pads has ", pads.size(), " values for rank ", n);
  Shape ys(n);
  for (size_t d = 0; d < n; ++d) ys[d] = x.shape[d] + pads[d] + pads[d + n];
  k.expect_out_shape(0, ys);
  // ONNX Pad modes (numpy.pad's): constant fills, edge repeats the border element, reflect mirrors about the
  // border element without repeating it (x[1], x[0], x[1], ...). Negative pads crop in every mode.
  std::string mode = k.op.has_attr("mode") ? k.op.attr_string("mode") : "constant";
  bool edge = mode == "edge", reflect = mode == "reflect";
  if (!edge && !reflect && mode != "constant") CLEAVE_USER_ERROR(k.label(), ": unknown mode \"", mode, "\"");
  double value = k.op.attr_float("value", 0.0);
  Value &y = k.out(0);
  std::vector<int64_t> xst = strides_of(x.shape), idx;
  for (int64_t o = 0; o < num_elements(ys); ++o) {
    unravel(o, ys, idx);
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < n && inside; ++d) {
      int64_t i = idx[d] - pads[d], len = x.shape[d];
      if (edge) {
        i = std::clamp<int64_t>(i, 0, len - 1);
      } else if (reflect) {
        // The shape rule bounds reflect pads by len - 1, so one mirror reaches a valid index.
        if (i < 0) i = -i;
        if (i >= len) i = 2 * (len - 1) - i;
      }
      inside = i >= 0 && i < len;
      src += i * xst[d];
    }
    y.data[static_cast<size_t>(o)] = inside ? x.data[static_cast<size_t>(src)] : value;
  }
}

}  // namespace cleave::interp
