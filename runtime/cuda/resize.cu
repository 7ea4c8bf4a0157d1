// Resize (nearest, linear) and its adjoint with cpu/resize.cpp's semantics. The taps are computed on the host
// (common/shapes.h) and copied to scratch; the forward writes each output once, the adjoint scatters into a double
// buffer with atomics (sums of a handful of taps) and rounds it to dX.
#include <vector>

#include "common/shapes.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::Small;

/** Per spatial dim d, the taps of output o sit at [first[d] + o] of the i0, i1 and w1 arrays. */
struct DeviceTaps {
  const int64_t *i0 = nullptr, *i1 = nullptr;
  const double *w1 = nullptr;
  Small first;
};

/** The taps of `s` copied into scratch (valid until the next scratch() call). */
DeviceTaps upload_taps(const ResizeShape &s) {
  std::vector<host::ResizeTaps> taps = host::resize_taps(s);
  std::vector<int64_t> first;
  std::vector<int64_t> i0, i1;
  std::vector<double> w1;
  for (const host::ResizeTaps &t : taps) {
    first.push_back(static_cast<int64_t>(i0.size()));
    i0.insert(i0.end(), t.i0.begin(), t.i0.end());
    i1.insert(i1.end(), t.i1.begin(), t.i1.end());
    w1.insert(w1.end(), t.w1.begin(), t.w1.end());
  }
  size_t n = i0.size(), bytes = n * (2 * sizeof(int64_t) + sizeof(double));
  auto *base = static_cast<char *>(detail::scratch(bytes > 0 ? bytes : 1));
  DeviceTaps d;
  auto *di0 = reinterpret_cast<int64_t *>(base);
  auto *di1 = di0 + n;
  auto *dw1 = reinterpret_cast<double *>(di1 + n);
  if (n > 0) {
    detail::graph_unsafe("Resize copies its host-computed taps each call");
    CLEAVE_CUDA(cudaMemcpyAsync, di0, i0.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, compute_stream());
    CLEAVE_CUDA(cudaMemcpyAsync, di1, i1.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, compute_stream());
    CLEAVE_CUDA(cudaMemcpyAsync, dw1, w1.data(), n * sizeof(double), cudaMemcpyHostToDevice, compute_stream());
    detail::sync_compute();  // the host vectors go out of scope
  }
  d.i0 = di0;
  d.i1 = di1;
  d.w1 = dw1;
  d.first = detail::small(first, "resize");
  return d;
}

/** Output element e (plane-major): the input offset and weight of corner `corner`. */
__device__ double corner_tap(const DeviceTaps &t, Small x, Small y, int64_t yf, int corner, int64_t &off) {
  int sp = x.n;
  double w = 1;
  off = 0;
  int64_t stride = 1;
  for (int d = sp - 1; d >= 0; --d) {
    int64_t o = yf % y[d];
    yf /= y[d];
    int64_t k = t.first[d] + o;
    bool hi = (corner >> (sp - 1 - d)) & 1;
    off += (hi ? t.i1[k] : t.i0[k]) * stride;
    w *= hi ? t.w1[k] : 1.0 - t.w1[k];
    stride *= x[d];
  }
  return w;
}

__global__ void resize_forward_kernel(int64_t total, int64_t nx, int64_t ny, int corners, DeviceTaps t, Small x,
                                      Small y, const float *in, float *out) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t p = e / ny, yf = e % ny;
    double acc = 0;
    for (int c = 0; c < corners; ++c) {
      int64_t off = 0;
      double w = corner_tap(t, x, y, yf, c, off);
      acc += w * in[p * nx + off];
    }
    out[e] = static_cast<float>(acc);
  }
}

__global__ void resize_backward_kernel(int64_t total, int64_t nx, int64_t ny, int corners, DeviceTaps t, Small x,
                                       Small y, const float *dy, double *acc) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t p = e / ny, yf = e % ny;
    for (int c = 0; c < corners; ++c) {
      int64_t off = 0;
      double w = corner_tap(t, x, y, yf, c, off);
      atomicAdd(acc + p * nx + off, w * dy[e]);
    }
  }
}

__global__ void round_to_float(int64_t n, const double *in, float *out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = static_cast<float>(in[i]);
}

}  // namespace

void resize_forward(const ResizeShape &s, const float *x, float *y) {
  DeviceTaps t = upload_taps(s);
  int64_t nx = detail::product(s.x), ny = detail::product(s.y), total = s.planes * ny;
  int corners = s.mode == ResizeMode::linear ? 1 << s.x.size() : 1;
  if (total > 0)
    CLEAVE_LAUNCH(resize_forward_kernel, detail::grid_for(total), detail::kThreads, total, nx, ny, corners, t,
                  detail::small(s.x, "resize"), detail::small(s.y, "resize"), x, y);
}

void resize_backward(const ResizeShape &s, const float *dy, float *dx) {
  DeviceTaps t = upload_taps(s);
  int64_t nx = detail::product(s.x), ny = detail::product(s.y), total = s.planes * ny, nxs = s.planes * nx;
  int corners = s.mode == ResizeMode::linear ? 1 << s.x.size() : 1;
  if (nxs == 0) return;
  auto *acc = static_cast<double *>(detail::scratch2(static_cast<size_t>(nxs) * sizeof(double)));
  CLEAVE_CUDA(cudaMemsetAsync, acc, 0, static_cast<size_t>(nxs) * sizeof(double), compute_stream());
  if (total > 0)
    CLEAVE_LAUNCH(resize_backward_kernel, detail::grid_for(total), detail::kThreads, total, nx, ny, corners, t,
                  detail::small(s.x, "resize"), detail::small(s.y, "resize"), dy, acc);
  CLEAVE_LAUNCH(round_to_float, detail::grid_for(nxs), detail::kThreads, nxs, acc, dx);
}

}  // namespace cleave::rt
