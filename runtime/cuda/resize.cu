// Resize (nearest, linear, cubic) and its adjoint with cpu/resize.cpp's semantics. The taps are computed on the host
// (common/shapes.h) and copied to scratch; the forward writes each output once, the adjoint scatters into a double
// buffer with atomics (sums of a handful of taps) and rounds it to dX.
#include <vector>

#include "common/shapes.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::Small;

/** Per spatial dim d, the k taps of output o sit at [first[d] + o * k, + k) of the idx and w arrays. */
struct DeviceTaps {
  const int64_t *idx = nullptr;
  const double *w = nullptr;
  Small first;
  int k = 1;
};

/** The taps of `s` copied into scratch (valid until the next scratch() call). */
DeviceTaps upload_taps(const ResizeShape &s) {
  std::vector<host::ResizeTaps> taps = host::resize_taps(s);
  std::vector<int64_t> first, idx;
  std::vector<double> w;
  for (const host::ResizeTaps &t : taps) {
    first.push_back(static_cast<int64_t>(idx.size()));
    idx.insert(idx.end(), t.idx.begin(), t.idx.end());
    w.insert(w.end(), t.w.begin(), t.w.end());
  }
  size_t n = idx.size(), bytes = n * (sizeof(int64_t) + sizeof(double));
  auto *base = static_cast<char *>(detail::scratch(bytes > 0 ? bytes : 1));
  DeviceTaps d;
  auto *didx = reinterpret_cast<int64_t *>(base);
  auto *dw = reinterpret_cast<double *>(didx + n);
  if (n > 0) {
    detail::graph_unsafe("Resize copies its host-computed taps each call");
    CLEAVE_CUDA(cudaMemcpyAsync, didx, idx.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, compute_stream());
    CLEAVE_CUDA(cudaMemcpyAsync, dw, w.data(), n * sizeof(double), cudaMemcpyHostToDevice, compute_stream());
    detail::sync_compute();  // the host vectors go out of scope
  }
  d.idx = didx;
  d.w = dw;
  d.first = detail::small(first, "resize");
  d.k = taps.empty() ? 1 : taps[0].k;
  return d;
}

/** Output element yf of a plane: the input offset and weight of tap combination `combo` (one tap per dim, the last
 *  dim's the least significant digit, as cpu/resize.cpp counts them). */
__device__ double combo_tap(const DeviceTaps &t, Small x, Small y, int64_t yf, int combo, int64_t &off) {
  int sp = x.n;
  double w = 1;
  off = 0;
  int64_t stride = 1;
  for (int d = sp - 1; d >= 0; --d) {
    int64_t o = yf % y[d];
    yf /= y[d];
    int64_t j = t.first[d] + o * t.k + combo % t.k;
    combo /= t.k;
    off += t.idx[j] * stride;
    w *= t.w[j];
    stride *= x[d];
  }
  return w;
}

__global__ void resize_forward_kernel(int64_t total, int64_t nx, int64_t ny, int combos, DeviceTaps t, Small x,
                                      Small y, const float *in, float *out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t p = e / ny, yf = e % ny;
    double acc = 0;
    for (int c = 0; c < combos; ++c) {
      int64_t off = 0;
      double w = combo_tap(t, x, y, yf, c, off);
      acc += w * in[p * nx + off];
    }
    out[e] = static_cast<float>(acc);
  }
}

__global__ void resize_backward_kernel(int64_t total, int64_t nx, int64_t ny, int combos, DeviceTaps t, Small x,
                                       Small y, const float *dy, double *acc) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t p = e / ny, yf = e % ny;
    for (int c = 0; c < combos; ++c) {
      int64_t off = 0;
      double w = combo_tap(t, x, y, yf, c, off);
      atomicAdd(acc + p * nx + off, w * dy[e]);
    }
  }
}

__global__ void round_to_float(int64_t n, const double *in, float *out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = static_cast<float>(in[i]);
}

/** Tap combinations per output: k^sp, k from the taps (host::resize_taps). */
int tap_combos(const DeviceTaps &t, const ResizeShape &s) {
  int combos = 1;
  for (size_t d = 0; d < s.x.size(); ++d) combos *= t.k;
  return combos;
}

}  // namespace

void resize_forward(const ResizeShape &s, const float *x, float *y) {
  DeviceTaps t = upload_taps(s);
  int64_t nx = detail::product(s.x), ny = detail::product(s.y), total = s.planes * ny;
  int combos = tap_combos(t, s);
  if (total > 0)
    CLEAVE_LAUNCH(resize_forward_kernel, detail::grid_for(total), detail::kThreads, total, nx, ny, combos, t,
                  detail::small(s.x, "resize"), detail::small(s.y, "resize"), x, y);
}

void resize_backward(const ResizeShape &s, const float *dy, float *dx) {
  DeviceTaps t = upload_taps(s);
  int64_t nx = detail::product(s.x), ny = detail::product(s.y), total = s.planes * ny, nxs = s.planes * nx;
  int combos = tap_combos(t, s);
  if (nxs == 0) return;
  auto *acc = static_cast<double *>(detail::scratch2(static_cast<size_t>(nxs) * sizeof(double)));
  CLEAVE_CUDA(cudaMemsetAsync, acc, 0, static_cast<size_t>(nxs) * sizeof(double), compute_stream());
  if (total > 0)
    CLEAVE_LAUNCH(resize_backward_kernel, detail::grid_for(total), detail::kThreads, total, nx, ny, combos, t,
                  detail::small(s.x, "resize"), detail::small(s.y, "resize"), dy, acc);
  CLEAVE_LAUNCH(round_to_float, detail::grid_for(nxs), detail::kThreads, nxs, acc, dx);
}

}  // namespace cleave::rt
