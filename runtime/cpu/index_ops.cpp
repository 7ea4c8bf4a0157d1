// ArgMax/ArgMin, TopK, CumSum and OneHot along one axis of [outer, len, inner] (rt.h), as the interpreter computes them
// (ir/interp/index_ops.cpp); the per-line and per-element bodies are common/index_kernels.h's, which
// cuda/index_ops.cu runs one line (or element) per thread.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "cleave/rt.h"
#include "common/index_kernels.h"

namespace cleave::rt {

void arg_extreme(int64_t outer, int64_t len, int64_t inner, const real *x, int64_t *y, bool min, bool last) {
  if (len < 1) fail("arg_extreme: empty axis");
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      y[o * inner + i] = hd::arg_extreme_line(x + o * len * inner + i, len, inner, min, last);
}

void top_k(int64_t outer, int64_t len, int64_t inner, const real *x, int64_t *y, int64_t k, bool largest) {
  if (k < 1 || k > len) fail("top_k: k outside [1, len]");
  // A partial sort of each line's positions, O(len log k): top_k_before is a strict total order, so the first k
  // positions are the ones the GPU's ranks (top_k_rank) put first.
  std::vector<int64_t> pos(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const real *row = x + o * len * inner + i;
      std::iota(pos.begin(), pos.end(), int64_t{0});
      std::partial_sort(pos.begin(), pos.begin() + k, pos.end(), [&](int64_t a, int64_t b) {
        return hd::top_k_before(row[a * inner], a, row[b * inner], b, largest);
      });
      for (int64_t r = 0; r < k; ++r) y[(o * k + r) * inner + i] = pos[static_cast<size_t>(r)];
    }
}

void cumsum(int64_t outer, int64_t len, int64_t inner, const real *x, real *y, bool exclusive, bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * len * inner + i;
      hd::cumsum_line(x + base, y + base, len, inner, exclusive, reverse);
    }
}

void one_hot(int64_t outer, int64_t depth, int64_t inner, const int64_t *indices, const void *values, void *y,
             size_t elem_size) {
  const auto *v = static_cast<const char *>(values);
  auto *out = static_cast<char *>(y);
  const auto size = static_cast<int64_t>(elem_size);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t at = indices[o * inner + i];
      for (int64_t j = 0; j < depth; ++j)
        std::memcpy(out + ((o * depth + j) * inner + i) * size, v + hd::one_hot_value(at, depth, j) * size,
                    elem_size);
    }
}

}  // namespace cleave::rt
