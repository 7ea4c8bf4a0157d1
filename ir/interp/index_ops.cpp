// Index and scan kernels: ArgMax/ArgMin, TopKIndices, CumSum, Mod, OneHot. Each works along one axis of a row-major
// tensor, seen as [outer, len, inner].
#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** [outer, len, inner] of `shape` around `axis`. */
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisView axis_view(const Shape &shape, size_t axis) {
  AxisView v;
  for (size_t d = 0; d < shape.size(); ++d) (d < axis ? v.outer : d == axis ? v.len : v.inner) *= shape[d];
  return v;
}

/** ArgMax (or ArgMin, `min`): the first (or, select_last_index, the last) position of the extreme along the axis. NaN
 *  counts as the extreme, as in numpy and torch: the first NaN wins (the last with select_last_index). */
void arg_extreme(const KernelArgs &k, bool min) {
  const Value &x = k.in(0);
  auto axis = static_cast<size_t>(k.op.attr_int("axis", 0));
  bool last = k.op.attr_int("select_last_index", 0) != 0;
  AxisView v = axis_view(x.shape, axis);
  Value &y = k.out(0);
  CLEAVE_CHECK(static_cast<int64_t>(y.data.size()) == v.outer * v.inner, k.label(), ": output size");
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      const double *row = x.data.data() + o * v.len * v.inner + i;
      int64_t best = 0;
      double bv = row[0];
      for (int64_t j = 1; j < v.len; ++j) {
        double a = row[j * v.inner];
        bool better = std::isnan(bv) ? last && std::isnan(a)
                                     : std::isnan(a) || (min ? a < bv : a > bv) || (last && a == bv);
        if (better) {
          best = j;
          bv = a;
        }
      }
      y.data[static_cast<size_t>(o * v.inner + i)] = static_cast<double>(best);
    }
}

}  // namespace

void kernel_ArgMax(const KernelArgs &k) { arg_extreme(k, false); }
void kernel_ArgMin(const KernelArgs &k) { arg_extreme(k, true); }

/** TopKIndices: a stable sort of each line's positions by value (descending for largest, NaN above every number),
 *  its first k. */
void kernel_TopKIndices(const KernelArgs &k) {
  const Value &x = k.in(0);
  auto axis = static_cast<size_t>(k.op.attr_int("axis"));
  int64_t top = k.op.attr_int("k");
  bool largest = k.op.attr_int("largest", 1) != 0;
  AxisView v = axis_view(x.shape, axis);
  Value &y = k.out(0);
  CLEAVE_CHECK(static_cast<int64_t>(y.data.size()) == v.outer * top * v.inner, k.label(), ": output size");
  std::vector<int64_t> pos(static_cast<size_t>(v.len));
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      const double *row = x.data.data() + o * v.len * v.inner + i;
      // a before b: a's value ranks first (NaN largest); equal values keep their order (stable_sort).
      auto before = [&](int64_t a, int64_t b) {
        double va = row[a * v.inner], vb = row[b * v.inner];
        if (std::isnan(va) || std::isnan(vb)) return largest ? std::isnan(va) && !std::isnan(vb)
                                                             : !std::isnan(va) && std::isnan(vb);
        return largest ? va > vb : va < vb;
      };
      for (int64_t j = 0; j < v.len; ++j) pos[static_cast<size_t>(j)] = j;
      std::stable_sort(pos.begin(), pos.end(), before);
      for (int64_t j = 0; j < top; ++j)
        y.data[static_cast<size_t>((o * top + j) * v.inner + i)] = static_cast<double>(pos[static_cast<size_t>(j)]);
    }
}

void kernel_CumSum(const KernelArgs &k) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  auto axis = static_cast<size_t>(k.op.attr_int("axis", 0));
  bool exclusive = k.op.attr_int("exclusive", 0) != 0, reverse = k.op.attr_int("reverse", 0) != 0;
  AxisView v = axis_view(x.shape, axis);
  Value &y = k.out(0);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double acc = 0;
      for (int64_t s = 0; s < v.len; ++s) {
        int64_t j = reverse ? v.len - 1 - s : s;
        auto e = static_cast<size_t>((o * v.len + j) * v.inner + i);
        if (exclusive) {
          y.data[e] = acc;
          acc += x.data[e];
        } else {
          acc += x.data[e];
          y.data[e] = acc;
        }
      }
    }
}

void kernel_Mod(const KernelArgs &k) {
  const Value &a = k.in(0), &b = k.in(1);
  Shape shape = broadcast_shape(k, a.shape, b.shape);
  k.expect_out_shape(0, shape);
  std::vector<int64_t> ma = broadcast_index_map(a.shape, shape), mb = broadcast_index_map(b.shape, shape);
  bool fmod = k.op.attr_int("fmod", 0) != 0, integer = !is_float(a.dtype);
  Value &y = k.out(0);
  for (size_t o = 0; o < y.data.size(); ++o) {
    double p = a.data[static_cast<size_t>(ma[o])], q = b.data[static_cast<size_t>(mb[o])];
    if (integer && q == 0) {
      y.data[o] = 0;  // C leaves x % 0 undefined; numpy gives 0, and so do Cleave's kernels
      continue;
    }
    // Both are exact on integers below 2^53 and on floats: fmod's result is representable.
    double r = std::fmod(p, q);
    if (!fmod && r != 0 && (r < 0) != (q < 0)) r += q;
    y.data[o] = r;
  }
}

void kernel_OneHot(const KernelArgs &k) {
  const Value &ind = k.in(0), &values = k.in(1);
  auto axis = static_cast<size_t>(k.op.attr_int("axis"));
  int64_t depth = k.op.attr_int("depth");
  Value &y = k.out(0);
  AxisView v = axis_view(y.shape, axis);
  CLEAVE_CHECK(v.len == depth && static_cast<int64_t>(ind.data.size()) == v.outer * v.inner, k.label(), ": shapes");
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      // Float indices truncate toward zero (ONNX casts them to int64); negative ones count from the end; an index
      // outside [-depth, depth) leaves the row off.
      double raw = ind.data[static_cast<size_t>(o * v.inner + i)];
      int64_t at = std::isfinite(raw) ? static_cast<int64_t>(std::trunc(raw)) : depth;
      if (at < 0) at += depth;
      for (int64_t j = 0; j < depth; ++j)
        y.data[static_cast<size_t>((o * depth + j) * v.inner + i)] = values.data[j == at ? 1 : 0];
    }
}

}  // namespace cleave::interp
