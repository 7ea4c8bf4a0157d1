// ArgMax/ArgMin, TopK, CumSum and OneHot with cpu/index_ops.cpp's bodies (common/index_kernels.h): one thread per line
// along the axis (lines are short in the models these ops come from; the scan is sequential, accumulated in double,
// as on the CPU), TopK and one-hot one thread per element (TopK: the element's rank in its line).
#include "common/index_kernels.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

__global__ void arg_extreme_kernel(int64_t lines, int64_t len, int64_t inner, const float *x, int64_t *y, bool min,
                                   bool last) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[l] = hd::arg_extreme_line(x + (l / inner) * len * inner + l % inner, len, inner, min, last);
}

/** One thread per element: its rank in its line, written to the output where it is among the first k. */
__global__ void top_k_kernel(int64_t total, int64_t len, int64_t inner, const float *x, int64_t *y, int64_t k,
                             bool largest) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % inner, j = (e / inner) % len, o = e / (inner * len);
    int64_t r = hd::top_k_rank(x + o * len * inner + i, len, inner, j, largest);
    if (r < k) y[(o * k + r) * inner + i] = j;
  }
}

__global__ void cumsum_kernel(int64_t lines, int64_t len, int64_t inner, const float *x, float *y, bool exclusive,
                              bool reverse) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t base = (l / inner) * len * inner + l % inner;
    hd::cumsum_line(x + base, y + base, len, inner, exclusive, reverse);
  }
}

template <typename T>
__global__ void one_hot_kernel(int64_t total, int64_t depth, int64_t inner, const int64_t *indices, const T *values,
                               T *y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % inner, j = (e / inner) % depth, o = e / (inner * depth);
    y[e] = values[hd::one_hot_value(indices[o * inner + i], depth, j)];
  }
}

template <typename T>
void launch_one_hot(int64_t total, int64_t depth, int64_t inner, const int64_t *indices, const void *values, void *y) {
  CLEAVE_LAUNCH(one_hot_kernel<T>, detail::grid_for(total), detail::kThreads, total, depth, inner, indices,
                static_cast<const T *>(values), static_cast<T *>(y));
}

}  // namespace

void arg_extreme(int64_t outer, int64_t len, int64_t inner, const float *x, int64_t *y, bool min, bool last) {
  if (len < 1) fail("arg_extreme: empty axis");
  int64_t lines = outer * inner;
  if (lines > 0)
    CLEAVE_LAUNCH(arg_extreme_kernel, detail::grid_for(lines), detail::kThreads, lines, len, inner, x, y, min, last);
}

void top_k(int64_t outer, int64_t len, int64_t inner, const float *x, int64_t *y, int64_t k, bool largest) {
  if (k < 1 || k > len) fail("top_k: k outside [1, len]");
  int64_t total = outer * len * inner;
  if (total > 0)
    CLEAVE_LAUNCH(top_k_kernel, detail::grid_for(total), detail::kThreads, total, len, inner, x, y, k, largest);
}

void cumsum(int64_t outer, int64_t len, int64_t inner, const float *x, float *y, bool exclusive, bool reverse) {
  int64_t lines = outer * inner;
  if (lines > 0 && len > 0)
    CLEAVE_LAUNCH(cumsum_kernel, detail::grid_for(lines), detail::kThreads, lines, len, inner, x, y, exclusive,
                  reverse);
}

void one_hot(int64_t outer, int64_t depth, int64_t inner, const int64_t *indices, const void *values, void *y,
             size_t elem_size) {
  int64_t total = outer * depth * inner;
  if (total == 0) return;
  switch (elem_size) {
    case 1: launch_one_hot<uint8_t>(total, depth, inner, indices, values, y); break;
    case 4: launch_one_hot<uint32_t>(total, depth, inner, indices, values, y); break;
    case 8: launch_one_hot<uint64_t>(total, depth, inner, indices, values, y); break;
    default: fail("one_hot: elements of " + std::to_string(elem_size) + " bytes (1, 4 or 8 expected)");
  }
}

}  // namespace cleave::rt
