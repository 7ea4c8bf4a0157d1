// ArgMax/ArgMin, CumSum and OneHot along one axis of [outer, len, inner] (rt.h), as the interpreter computes them
// (ir/interp/index_ops.cpp); cuda/index_ops.cu runs the same loops one line per thread.
#include <cmath>
#include <cstring>

#include "cleave/rt.h"

namespace cleave::rt {

void arg_extreme(int64_t outer, int64_t len, int64_t inner, const float *x, int64_t *y, bool min, bool last) {
  if (len < 1) fail("arg_extreme: empty axis");
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *row = x + o * len * inner + i;
      int64_t best = 0;
      float bv = row[0];
      for (int64_t j = 1; j < len; ++j) {
        float a = row[j * inner];
        bool better = std::isnan(bv) ? last && std::isnan(a)
                                     : std::isnan(a) || (min ? a < bv : a > bv) || (last && a == bv);
        if (better) {
          best = j;
          bv = a;
        }
      }
      y[o * inner + i] = best;
    }
}

void cumsum(int64_t outer, int64_t len, int64_t inner, const float *x, float *y, bool exclusive, bool reverse) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0;
      for (int64_t s = 0; s < len; ++s) {
        int64_t e = (o * len + (reverse ? len - 1 - s : s)) * inner + i;
        if (exclusive) {
          y[e] = static_cast<float>(acc);
          acc += x[e];
        } else {
          acc += x[e];
          y[e] = static_cast<float>(acc);
        }
      }
    }
}

void one_hot(int64_t outer, int64_t depth, int64_t inner, const int64_t *indices, const void *values, void *y,
             size_t elem_size) {
  const auto *v = static_cast<const char *>(values);
  auto *out = static_cast<char *>(y);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t at = indices[o * inner + i];
      if (at < 0) at += depth;
      for (int64_t j = 0; j < depth; ++j)
        std::memcpy(out + ((o * depth + j) * inner + i) * static_cast<int64_t>(elem_size),
                    v + (j == at ? elem_size : 0), elem_size);
    }
}

}  // namespace cleave::rt
