#pragma once
// The per-element bodies of the index ops (ArgMax/ArgMin, TopK, CumSum, OneHot, Gather): cpu/ runs them in loops, cuda/
// one line or element per thread, so both backends compute the same thing (not part of the API). Header-only and
// CLEAVE_HD (cleave/rng.h): __host__ __device__ under nvcc.
#include <cmath>
#include <cstdint>

#include "cleave/rt.h"  // rt::real; CLEAVE_HD (cleave/rng.h)

namespace cleave::rt::hd {

CLEAVE_HD inline bool is_nan(real a) {
#if defined(__CUDA_ARCH__)
  return isnan(a);
#else
  return std::isnan(a);
#endif
}

/** ArgMax (ArgMin with `min`) of row[0], row[stride], ..., row[(len - 1) * stride], len >= 1: the first NaN wins
 *  (the last with `last`), else the first extreme (the last with `last`), as the interpreter picks. */
CLEAVE_HD inline int64_t arg_extreme_line(const real *row, int64_t len, int64_t stride, bool min, bool last) {
  int64_t best = 0;
  real bv = row[0];
  for (int64_t j = 1; j < len; ++j) {
    real a = row[j * stride];
    bool better = is_nan(bv) ? last && is_nan(a) : is_nan(a) || (min ? a < bv : a > bv) || (last && a == bv);
    if (better) {
      best = j;
      bv = a;
    }
  }
  return best;
}

/** Whether value a at position ia comes before value b at position ib under TopK's order: a larger value first for
 *  `largest`, a smaller one otherwise, NaN counting as the largest, equal values in position order. A strict total
 *  order over a line's (value, position) pairs. */
CLEAVE_HD inline bool top_k_before(real a, int64_t ia, real b, int64_t ib, bool largest) {
  bool a_nan = is_nan(a), b_nan = is_nan(b);
  bool equal = a_nan ? b_nan : !b_nan && a == b;
  if (equal) return ia < ib;
  return largest ? a_nan || (!b_nan && a > b) : !a_nan && (b_nan || a < b);
}

/** The rank of row[j * stride] in its line of len under top_k_before: how many elements come before it. Ranks are
 *  0 .. len - 1, each once. O(len): one thread per element on the GPU. */
CLEAVE_HD inline int64_t top_k_rank(const real *row, int64_t len, int64_t stride, int64_t j, bool largest) {
  real v = row[j * stride];
  int64_t rank = 0;
  for (int64_t m = 0; m < len; ++m) rank += m != j && top_k_before(row[m * stride], m, v, j, largest) ? 1 : 0;
  return rank;
}

/** CumSum of the line x[0], x[stride], ..., x[(len - 1) * stride] into y's same positions, accumulated in double;
 *  `exclusive` leaves out each element's own value, `reverse` sums from the end. */
CLEAVE_HD inline void cumsum_line(const real *x, real *y, int64_t len, int64_t stride, bool exclusive,
                                  bool reverse) {
  double acc = 0;
  for (int64_t s = 0; s < len; ++s) {
    int64_t e = (reverse ? len - 1 - s : s) * stride;
    if (exclusive) {
      y[e] = static_cast<real>(acc);
      acc += x[e];
    } else {
      acc += x[e];
      y[e] = static_cast<real>(acc);
    }
  }
}

/** Which of OneHot's two values (0: off, 1: on) position j of an axis of `depth` takes for index `at` (negative
 *  counts from the end; out of range: every position is off). */
CLEAVE_HD inline int one_hot_value(int64_t at, int64_t depth, int64_t j) {
  if (at < 0) at += depth;
  return j == at ? 1 : 0;
}

/** Gather's index g of an axis of global_dim, of which this shard holds rows [index_base, index_base + dim):
 *  the local row, kGatherElsewhere where another shard holds it, kGatherOutOfRange where g lies outside
 *  [-global_dim, global_dim). */
constexpr int64_t kGatherElsewhere = -1;
constexpr int64_t kGatherOutOfRange = -2;
CLEAVE_HD inline int64_t gather_local_row(int64_t g, int64_t global_dim, int64_t index_base, int64_t dim) {
  if (g < -global_dim || g >= global_dim) return kGatherOutOfRange;
  if (g < 0) g += global_dim;
  int64_t row = g - index_base;
  return row >= 0 && row < dim ? row : kGatherElsewhere;
}

}  // namespace cleave::rt::hd
