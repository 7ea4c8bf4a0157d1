// ConvTranspose: the convolution's data gradient (conv.cu) plus a per-channel bias, as cpu/conv_transpose.cpp.
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

__global__ void add_channel_bias(int64_t total, int64_t c, int64_t plane, const float *b, float *y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    y[i] += b[(i / plane) % c];
}

}  // namespace

void conv_transpose_forward(const ConvShape &s, const float *x, const float *w, const float *b, float *y) {
  conv_backward_data(s, x, w, y);
  if (!b) return;
  int64_t plane = detail::product(s.x), total = s.n * s.c * plane;
  if (total > 0) CLEAVE_LAUNCH(add_channel_bias, detail::grid_for(total), detail::kThreads, total, s.c, plane, b, y);
}

}  // namespace cleave::rt
