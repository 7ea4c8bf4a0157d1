// runtime/common/strided_index.h, the index arithmetic of the CUDA backend's data-movement kernels, checked on the
// host (the same header-only code): the magic-number division against the division operator, coalesced walks
// against the walks they replace.
#include "runtime/common/strided_index.h"

#include <gtest/gtest.h>

#include <random>

namespace cleave::rt::hd {
namespace {

TEST(FastDivider, EqualsDivisionOnEdgesAndRandomPairs) {
  const uint32_t top = (uint32_t{1} << 31) - 1;
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 64, 768, 3072, 30522, 50257, 65535, 65536, 65537, top - 1, top};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % top);
  for (uint32_t d : divisors) {
    FastDivider f(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, top - 1, top};
    for (uint32_t k = 1; k < 4; ++k) ns.push_back(k * d > top || k * d / k != d ? top : k * d - 1);
    for (int i = 0; i < 2000; ++i) ns.push_back(rng() % (top + 1u));
    for (uint32_t n : ns) {
      if (n > top) continue;
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
}

/** The offsets of a row-major walk over `shape` at `strides`, element by element. */
std::vector<int64_t> walk(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      off += rem % shape[d] * strides[d];
      rem /= shape[d];
    }
    out.push_back(off);
  }
  return out;
}

std::vector<int64_t> walk_fast(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  StridedIndex s = make_strided_index(shape, strides);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(s.offset(static_cast<uint32_t>(i)));
  return out;
}

TEST(StridedIndex, CoalescedWalksEqualTheOriginal) {
  struct Case {
    std::vector<int64_t> shape, strides;
    size_t rank;  // after coalescing
  };
  std::vector<Case> cases = {
      {{32, 128, 7}, {0, 0, 1}, 2},             // a bias broadcast: [4096 rows of 7]
      {{4, 5, 6}, {30, 6, 1}, 1},               // contiguous: one dim
      {{5, 4, 6}, {6, 30, 1}, 3},               // transpose (1, 0, 2)
      {{6, 20}, {1, 6}, 2},                     // a 2-D transpose
      {{2, 1, 3, 1, 4}, {12, 99, 4, 99, 1}, 1}, // size-1 dims with any stride
      {{3, 4}, {-4, 1}, 2},                     // a reversed slice
      {{1, 1}, {5, 5}, 0},                      // one element
      {{2, 3, 4, 5}, {0, 20, 5, 1}, 2},         // a repeated contiguous block
  };
  for (const Case &c : cases) {
    std::vector<int64_t> sh = c.shape, st = c.strides;
    coalesce_dims(sh, st);
    EXPECT_EQ(sh.size(), c.rank);
    EXPECT_EQ(walk_fast(sh, st), walk(c.shape, c.strides));
  }
}

TEST(StridedIndex, FitsOnlyBelowTwoToThe31) {
  EXPECT_TRUE(fits_strided_index({4096, 30522}, 4096 * 30522));
  EXPECT_FALSE(fits_strided_index({int64_t{1} << 31}, int64_t{1} << 31));
  EXPECT_FALSE(fits_strided_index(std::vector<int64_t>(9, 2), 512));
}

}  // namespace
}  // namespace cleave::rt::hd
