// ArgMax/ArgMin, CumSum and OneHot with cpu/index_ops.cpp's semantics: one thread per line along the axis (lines are
// short in the models these ops come from; the scan is sequential, accumulated in double, as on the CPU).
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

__global__ void arg_extreme_kernel(int64_t lines, int64_t len, int64_t inner, const float *x, int64_t *y, bool min,
                                   bool last) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float *row = x + (l / inner) * len * inner + l % inner;
    int64_t best = 0;
    float bv = row[0];
    for (int64_t j = 1; j < len; ++j) {
      float a = row[j * inner];
      bool better = isnan(bv) ? last && isnan(a) : isnan(a) || (min ? a < bv : a > bv) || (last && a == bv);
      if (better) {
        best = j;
        bv = a;
      }
    }
    y[l] = best;
  }
}

__global__ void cumsum_kernel(int64_t lines, int64_t len, int64_t inner, const float *x, float *y, bool exclusive,
                              bool reverse) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t base = (l / inner) * len * inner + l % inner;
    double acc = 0;
    for (int64_t s = 0; s < len; ++s) {
      int64_t e = base + (reverse ? len - 1 - s : s) * inner;
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

template <typename T>
__global__ void one_hot_kernel(int64_t total, int64_t depth, int64_t inner, const int64_t *indices, const T *values,
                               T *y) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % inner, j = (e / inner) % depth, o = e / (inner * depth);
    int64_t at = indices[o * inner + i];
    if (at < 0) at += depth;
    y[e] = values[j == at ? 1 : 0];
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
