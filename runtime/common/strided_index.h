#pragma once
// Index arithmetic of the data-movement kernels (not part of the API). coalesce_dims rewrites a strided walk over
// fewer dims (size-1 dims dropped, neighbours that walk the source as one dim merged); both backends use it. On a
// GPU an element's row-major index taken apart into per-dim indices costs a division per dim, and a 64-bit division
// is a long software sequence: below 2^31 elements, StridedIndex divides by each fixed extent with a multiply-high
// and a shift, its magic number computed once on the host (Granlund and Montgomery, "Division by invariant integers
// using multiplication", 1994; the form torch's IntDivider uses). Header-only and CLEAVE_HD, so the CPU tests check
// the same code the kernels run.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cleave/rng.h"  // CLEAVE_HD

namespace cleave::rt::hd {

/** n / divisor for a fixed divisor in [1, 2^31) and dividends n in [0, 2^31). */
struct FastDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;

  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  CLEAVE_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    uint32_t t = __umulhi(n, magic);
#else
    uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (t + n) >> shift;  // t <= n < 2^31: no overflow
  }
};

/** The largest rank a StridedIndex holds (the CUDA backend's kMaxRank). */
constexpr int kStridedMaxRank = 8;

/** Maps the row-major index i < 2^31 of an element of `extent` to sum_d i_d * stride[d]. */
struct StridedIndex {
  FastDivider extent[kStridedMaxRank];
  int64_t stride[kStridedMaxRank] = {};
  int rank = 0;

  CLEAVE_HD int64_t offset(uint32_t i) const {
    int64_t off = 0;
    for (int d = rank - 1; d > 0; --d) {
      uint32_t q = extent[d].div(i);
      off += static_cast<int64_t>(i - q * extent[d].divisor) * stride[d];
      i = q;
    }
    return rank > 0 ? off + static_cast<int64_t>(i) * stride[0] : off;
  }
};

/** A walk over `shape` in row-major order reading at `strides`, with the same walk in fewer dims: dims of extent 1
 *  dropped, and dim d merged into d + 1 where strides[d] == strides[d + 1] * shape[d + 1]. An empty shape (rank 0
 *  or every extent 1) stays one element. */
inline void coalesce_dims(std::vector<int64_t> &shape, std::vector<int64_t> &strides) {
  std::vector<int64_t> sh, st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!sh.empty() && st.back() == strides[d] * shape[d]) {
      sh.back() *= shape[d];
      st.back() = strides[d];
    } else {
      sh.push_back(shape[d]);
      st.push_back(strides[d]);
    }
  }
  shape = sh;
  strides = st;
}

/** Whether a walk of n elements over `shape` fits StridedIndex: rank <= kStridedMaxRank, n and every extent below
 *  2^31. */
inline bool fits_strided_index(const std::vector<int64_t> &shape, int64_t n) {
  if (shape.size() > static_cast<size_t>(kStridedMaxRank) || n >= (int64_t{1} << 31)) return false;
  for (int64_t e : shape)
    if (e >= (int64_t{1} << 31)) return false;
  return true;
}

inline StridedIndex make_strided_index(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  StridedIndex s;
  s.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    s.extent[d] = FastDivider(static_cast<uint32_t>(shape[d]));
    s.stride[d] = strides[d];
  }
  return s;
}

}  // namespace cleave::rt::hd
