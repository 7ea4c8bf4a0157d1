// Max, average and global-average pooling and their gradients with cpu/pool.cpp's semantics: cuDNN's legacy pooling
// where it computes exactly that, kernels (one thread per output window walking its taps) for everything else.
// cuDNN (the cudnn_takes_* predicates; descriptors created and destroyed per call):
//  - max_pool_forward without indices over 1 or 3 spatial dims, avg_pool_forward and avg_pool_backward over 1-3, of a
//    whole op (no spatial block), with no dilation, symmetric pads smaller than the kernel, and the caller's output extent equal to
//    the floor formula (x + 2 pad - kernel) / stride + 1, so every window lies inside the padded input and holds an
//    element of X. count_include_pad maps to CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (the divisor is then the
//    window volume, as on the CPU), else to ..._EXCLUDE_PADDING (the taps inside X). Max forward propagates NaN
//    (CUDNN_PROPAGATE_NAN), as the CPU and the kernels below do (a window holding a NaN gives NaN, as in torch).
//  - global_avg_pool_forward/backward with the default divisor (the spatial size): one window over [nc, 1, spatial].
// Kernels:
//  - max_pool_backward, always: the CPU sends each dY to its window's first maximum, and cuDNN documents no tie rule
//    for cudnnPoolingBackward (ties are common: ReLU zeros); the kernel keeps the CPU's rule.
//  - max_pool_forward over 2-D windows of whole planes (with 32-bit window arithmetic, as max_pool_backward's there:
//    cuDNN's was slow), with indices (cuDNN returns none), ceil_mode windows running past the padded input, asymmetric
//    pads, dilations, more than 3 spatial dims, sizes beyond int, the spatial blocks of halo splits, and global
//    average pooling with another divisor (the partial means of a spatial block).
// CLEAVE_CUDNN_POOL_NORM=0 sends every call to the kernels (tests/gpu compares both paths with the CPU backend).
// Kernel gradients scatter with atomics (windows overlap), so their summation order varies between runs.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "common/shapes.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::Small;

/** PoolShape's geometry by value, blocks resolved (x_begin/y_begin 0 and x_full = x for a whole op). */
struct PoolGeom {
  int sp = 0;
  int64_t nc = 0, nx = 1, ny = 1, nk = 1;
  Small x, y, kernel, strides, pb, pe, dil, x_begin, y_begin, x_full;
  bool count_include_pad = false;
};

PoolGeom make_geom(const PoolShape &s) {
  size_t sp = s.x.size();
  host::check_pool_ranks(s);
  PoolGeom g;
  g.sp = static_cast<int>(sp);
  g.nc = s.nc;
  auto or_whole = [&](const Dims &v, const Dims &whole) { return v.empty() ? whole : v; };
  g.x = detail::small(s.x, "pool");
  g.y = detail::small(s.y, "pool");
  g.kernel = detail::small(s.kernel, "pool");
  g.strides = detail::small(s.strides, "pool");
  g.dil = detail::small(s.dilations, "pool");
  g.pb = detail::small(Dims(s.pads.begin(), s.pads.begin() + static_cast<int64_t>(sp)), "pool");
  g.pe = detail::small(Dims(s.pads.begin() + static_cast<int64_t>(sp), s.pads.end()), "pool");
  g.x_begin = detail::small(or_whole(s.x_begin, Dims(sp, 0)), "pool");
  g.y_begin = detail::small(or_whole(s.y_begin, Dims(sp, 0)), "pool");
  g.x_full = detail::small(or_whole(s.x_full, s.x), "pool");
  g.count_include_pad = s.count_include_pad;
  for (size_t d = 0; d < sp; ++d) {
    g.nx *= s.x[d];
    g.ny *= s.y[d];
    g.nk *= s.kernel[d];
  }
  return g;
}

/** Whether some tap inside the input lies outside the X block (cpu/pool.cpp's `missing`); taps are separable by
 *  dim, so: every dim has an in-input tap and some dim has an in-input tap outside the block. */
bool missing_taps(const PoolGeom &g) {
  bool all_inside = true, some_missing = false;
  for (int d = 0; d < g.sp; ++d) {
    bool inside = false, missing = false;
    for (int64_t yi = 0; yi < g.y[d]; ++yi)
      for (int64_t ki = 0; ki < g.kernel[d]; ++ki) {
        int64_t xd = (g.y_begin[d] + yi) * g.strides[d] + ki * g.dil[d] - g.pb[d];
        if (xd < 0 || xd >= g.x_full[d]) continue;
        inside = true;
        int64_t xl = xd - g.x_begin[d];
        if (xl < 0 || xl >= g.x[d]) missing = true;
      }
    all_inside = all_inside && inside;
    some_missing = some_missing || missing;
  }
  return all_inside && some_missing && g.ny > 0;
}

/** Tap kf of window yf: its flat index in the X block (-1 outside the input or the block); `counts` says whether
 *  it counts towards the averaging divisor. */
__device__ int64_t tap(const PoolGeom &g, int64_t yf, int64_t kf, bool *counts) {
  int64_t off = 0;
  bool inside = true, in_padded = true, local = true;
  int64_t yr = yf, kr = kf;
  int64_t mult = 1;
  for (int d = g.sp - 1; d >= 0; --d) {
    int64_t yi = yr % g.y[d], ki = kr % g.kernel[d];
    yr /= g.y[d];
    kr /= g.kernel[d];
    int64_t xd = (g.y_begin[d] + yi) * g.strides[d] + ki * g.dil[d] - g.pb[d];
    inside = inside && xd >= 0 && xd < g.x_full[d];
    in_padded = in_padded && xd < g.x_full[d] + g.pe[d];
    int64_t xl = xd - g.x_begin[d];
    local = local && xl >= 0 && xl < g.x[d];
    off += xl * mult;
    mult *= g.x[d];
  }
  *counts = g.count_include_pad ? in_padded : inside;
  return inside && local ? off : -1;
}

/** The first maximum of window yf over plane x (flat X-block index), or -1. */
__device__ int64_t argmax(const PoolGeom &g, int64_t yf, const float *x) {
  int64_t best = -1;
  bool counts;
  for (int64_t kf = 0; kf < g.nk; ++kf) {
    int64_t t = tap(g, yf, kf, &counts);
    if (t >= 0 && (best < 0 || x[t] > x[best] || x[t] != x[t])) best = t;  // NaN wins, as on the CPU
  }
  return best;
}

#define CLEAVE_FOR_EACH(i, n)                                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

/** The flat index into the whole X (x_full) of flat index `local` into the X block, for p = 0. */
__device__ int64_t full_index(const PoolGeom &g, int64_t local) {
  int64_t off = 0, mult = 1;
  for (int d = g.sp - 1; d >= 0; --d) {
    off += (g.x_begin[d] + local % g.x[d]) * mult;
    local /= g.x[d];
    mult *= g.x_full[d];
  }
  return off;
}

__global__ void max_forward_kernel(PoolGeom g, const float *x, float *y, int64_t *indices, int64_t nx_full,
                                   int *error) {
  CLEAVE_FOR_EACH(e, g.nc * g.ny) {
    int64_t p = e / g.ny, yf = e % g.ny;
    int64_t best = argmax(g, yf, x + p * g.nx);
    if (best < 0) {
      *error = 1;
      continue;
    }
    y[e] = x[p * g.nx + best];
    if (indices) indices[e] = p * nx_full + full_index(g, best);  // indices address the whole X
  }
}

/** to_dx: X-block flat index -> dX-block flat index (or -1), for max_pool_backward on a dX block. */
__device__ int64_t x_to_dx(const PoolGeom &g, Small dx_begin, Small dx, int64_t i) {
  int64_t off = 0, mult = 1;
  for (int d = g.sp - 1; d >= 0; --d) {
    int64_t xi = i % g.x[d];
    i /= g.x[d];
    int64_t rel = g.x_begin[d] + xi - dx_begin[d];
    if (rel < 0 || rel >= dx[d]) return -1;
    off += rel * mult;
    mult *= dx[d];
  }
  return off;
}

__global__ void max_backward_kernel(PoolGeom g, const float *dy, const float *x, float *dx, bool block,
                                    Small dx_begin, Small dx_shape, int64_t ndx) {
  CLEAVE_FOR_EACH(e, g.nc * g.ny) {
    int64_t p = e / g.ny, yf = e % g.ny;
    int64_t best = argmax(g, yf, x + p * g.nx);
    if (best < 0) continue;
    if (!block) {
      atomicAdd(&dx[p * g.nx + best], dy[e]);
      continue;
    }
    int64_t t = x_to_dx(g, dx_begin, dx_shape, best);
    if (t >= 0) atomicAdd(&dx[p * ndx + t], dy[e]);
  }
}

/** 2-D windows over X planes [h, w] whole (no X or dX block), with 32-bit index arithmetic. */
struct Pool2d {
  uint32_t n = 0, oh = 0, ow = 0, oy0 = 0, ox0 = 0;  // n windows of [oh, ow] planes, the first at (oy0, ox0)
  int h = 0, w = 0, kh = 0, kw = 0, sh = 0, sw = 0, dh = 0, dw = 0, ph = 0, pw = 0;
};

/** The first maximum of window e over its X plane (ky, then kx; a NaN wins, as on the CPU and in argmax above),
 *  as an index into the plane, or -1; `plane` is where the plane starts. 32-bit window arithmetic, without the general
 *  walk's 64-bit divisions for every tap. */
__device__ int argmax_2d(const Pool2d &g, uint32_t e, const float *x, int64_t *plane) {
  const uint32_t ox = e % g.ow, rest = e / g.ow, oy = rest % g.oh, p = rest / g.oh;
  *plane = static_cast<int64_t>(p) * g.h * g.w;
  const int y0 = static_cast<int>(g.oy0 + oy) * g.sh - g.ph, x0 = static_cast<int>(g.ox0 + ox) * g.sw - g.pw;
  int best = -1;
  for (int ky = 0; ky < g.kh; ++ky) {
    const int iy = y0 + ky * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (int kx = 0; kx < g.kw; ++kx) {
      const int ix = x0 + kx * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      const int t = iy * g.w + ix;
      const float v = x[*plane + t];
      if (best < 0 || v > x[*plane + best] || v != v) best = t;
    }
  }
  return best;
}

/** max_forward_kernel for Pool2d (indices address the whole X, which the plane is). */
__global__ void max_forward_2d_kernel(Pool2d g, const float *x, float *y, int64_t *indices, int *error) {
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < g.n; e += blockDim.x * gridDim.x) {
    int64_t plane = 0;
    const int best = argmax_2d(g, e, x, &plane);
    if (best < 0) {
      *error = 1;
      continue;
    }
    y[e] = x[plane + best];
    if (indices) indices[e] = plane + best;
  }
}

/** max_backward_kernel for Pool2d. */
__global__ void max_backward_2d_kernel(Pool2d g, const float *dy, const float *x, float *dx) {
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < g.n; e += blockDim.x * gridDim.x) {
    int64_t plane = 0;
    const int best = argmax_2d(g, e, x, &plane);
    if (best >= 0) atomicAdd(&dx[plane + best], dy[e]);
  }
}

/** g as a Pool2d when its windows are 2-D over whole X planes and every index fits 32 bits (else false). */
bool as_pool2d(const PoolGeom &g, bool dx_block, Pool2d *out) {
  if (g.sp != 2 || dx_block || g.nc * g.ny >= (int64_t{1} << 31) || g.nc * g.nx >= (int64_t{1} << 31)) return false;
  for (int d = 0; d < 2; ++d) {
    const int64_t last_window = (g.y_begin[d] + g.y[d]) * std::max<int64_t>(1, g.strides[d]);
    if (g.x_begin[d] != 0 || g.x[d] != g.x_full[d] || last_window > INT_MAX / 4 ||
        g.kernel[d] * g.dil[d] > INT_MAX / 4 || g.pb[d] > INT_MAX / 4)
      return false;
  }
  out->n = static_cast<uint32_t>(g.nc * g.ny);
  out->oh = static_cast<uint32_t>(g.y[0]);
  out->ow = static_cast<uint32_t>(g.y[1]);
  out->oy0 = static_cast<uint32_t>(g.y_begin[0]);
  out->ox0 = static_cast<uint32_t>(g.y_begin[1]);
  out->h = static_cast<int>(g.x[0]);
  out->w = static_cast<int>(g.x[1]);
  out->kh = static_cast<int>(g.kernel[0]);
  out->kw = static_cast<int>(g.kernel[1]);
  out->sh = static_cast<int>(g.strides[0]);
  out->sw = static_cast<int>(g.strides[1]);
  out->dh = static_cast<int>(g.dil[0]);
  out->dw = static_cast<int>(g.dil[1]);
  out->ph = static_cast<int>(g.pb[0]);
  out->pw = static_cast<int>(g.pb[1]);
  return true;
}

/** Whether s's windows are 2-D over whole planes (as_pool2d): max pooling then runs max_forward_2d_kernel. */
bool takes_pool2d(const PoolShape &s) {
  Pool2d g2;
  return as_pool2d(make_geom(s), false, &g2);
}

__global__ void avg_forward_kernel(PoolGeom g, const float *x, float *y) {
  CLEAVE_FOR_EACH(e, g.nc * g.ny) {
    int64_t p = e / g.ny, yf = e % g.ny, count = 0;
    double sum = 0;
    bool counts;
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      int64_t t = tap(g, yf, kf, &counts);
      count += counts;
      if (t >= 0) sum += x[p * g.nx + t];
    }
    y[e] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
  }
}

__global__ void avg_backward_kernel(PoolGeom g, const float *dy, float *dx) {
  CLEAVE_FOR_EACH(e, g.nc * g.ny) {
    int64_t p = e / g.ny, yf = e % g.ny, count = 0;
    bool counts;
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      tap(g, yf, kf, &counts);
      count += counts;
    }
    if (count == 0) continue;
    float grad = dy[e] / static_cast<float>(count);
    for (int64_t kf = 0; kf < g.nk; ++kf) {
      int64_t t = tap(g, yf, kf, &counts);
      if (t >= 0) atomicAdd(&dx[p * g.nx + t], grad);
    }
  }
}

__global__ void global_avg_forward_kernel(int64_t nc, int64_t spatial, const float *x, float *y, double div) {
  __shared__ double shared[32];
  for (int64_t p = blockIdx.x; p < nc; p += gridDim.x) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < spatial; i += blockDim.x) sum += x[p * spatial + i];
    sum = detail::block_sum(sum, shared);
    if (threadIdx.x == 0) y[p] = static_cast<float>(sum / div);
  }
}

__global__ void global_avg_backward_kernel(int64_t nc, int64_t spatial, const float *dy, float *dx, float div) {
  CLEAVE_FOR_EACH(e, nc * spatial) dx[e] = dy[e / spatial] / div;
}

// ---------------------------------------------------------------- cuDNN

/** cuDNN's descriptors for one pooling op over [nc, 1, spatial...]: a 1-d op is 2-d with a leading extent of 1. */
struct CudnnPool {
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;

  CudnnPool(const PoolShape &s, cudnnPoolingMode_t mode) {
    size_t sp = s.x.size();
    std::vector<int> xd{static_cast<int>(s.nc), 1}, yd{static_cast<int>(s.nc), 1}, window, pad, stride;
    if (sp == 1) {
      xd.push_back(1);
      yd.push_back(1);
      window.push_back(1);
      pad.push_back(0);
      stride.push_back(1);
    }
    for (size_t d = 0; d < sp; ++d) {
      xd.push_back(static_cast<int>(s.x[d]));
      yd.push_back(static_cast<int>(s.y[d]));
      window.push_back(static_cast<int>(s.kernel[d]));
      pad.push_back(static_cast<int>(s.pads[d]));
      stride.push_back(static_cast<int>(s.strides[d]));
    }
    auto strides_of = [](const std::vector<int> &dims) {
      std::vector<int> st(dims.size(), 1);
      for (size_t i = dims.size() - 1; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
      return st;
    };
    int nd = static_cast<int>(xd.size());
    std::vector<int> xs = strides_of(xd), ys = strides_of(yd);
    CLEAVE_CUDNN(cudnnCreatePoolingDescriptor, &pool);
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &x);
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &y);
    CLEAVE_CUDNN(cudnnSetPoolingNdDescriptor, pool, mode, CUDNN_PROPAGATE_NAN, nd - 2, window.data(), pad.data(),
                 stride.data());
    CLEAVE_CUDNN(cudnnSetTensorNdDescriptor, x, CUDNN_DATA_FLOAT, nd, xd.data(), xs.data());
    CLEAVE_CUDNN(cudnnSetTensorNdDescriptor, y, CUDNN_DATA_FLOAT, nd, yd.data(), ys.data());
    std::vector<int> out(static_cast<size_t>(nd));
    CLEAVE_CUDNN(cudnnGetPoolingNdForwardOutputDim, pool, x, nd, out.data());
    if (out != yd) fail("pool: cuDNN's output shape differs from the caller's (internal error)");
  }
  ~CudnnPool() {
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, y);
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, x);
    CLEAVE_CUDNN(cudnnDestroyPoolingDescriptor, pool);
  }
  CudnnPool(const CudnnPool &) = delete;
  CudnnPool &operator=(const CudnnPool &) = delete;
};

cudnnPoolingMode_t avg_mode(const PoolShape &s) {
  return s.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                             : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
}

void cudnn_forward(const PoolShape &s, cudnnPoolingMode_t mode, const float *x, float *y) {
  CudnnPool d(s, mode);
  float one = 1.0f, zero = 0.0f;
  CLEAVE_CUDNN(cudnnPoolingForward, detail::cudnn(), d.pool, &one, d.x, x, &zero, d.y, y);
}

/** dX = the average pooling gradient of dY (beta 0: every element written). cudnnPoolingBackward takes X and Y too;
 *  averaging reads neither, so scratch of their sizes stands in for them (the caller's API has neither). False, with
 *  nothing written, where cuDNN refuses the shape (cuDNN 9 answers NOT_SUPPORTED for ResNet-50's global pooling at
 *  batch 64, 131072 rows of 49, while taking the forward): the caller runs the kernels then. */
bool cudnn_avg_backward(const PoolShape &s, const float *dy, float *dx) {
  // Refused shapes are remembered: later calls (a CUDA graph capture among them) go straight to the kernels.
  static std::set<std::vector<int64_t>> refused;
  std::vector<int64_t> key = {s.nc, s.count_include_pad};
  for (const Dims *d : {&s.x, &s.y, &s.kernel, &s.strides, &s.pads}) key.insert(key.end(), d->begin(), d->end());
  if (refused.count(key)) return false;
  CudnnPool d(s, avg_mode(s));
  const void *x = detail::scratch(static_cast<size_t>(s.nc * detail::product(s.x)) * sizeof(float));
  const void *y = detail::scratch2(static_cast<size_t>(s.nc * detail::product(s.y)) * sizeof(float));
  float one = 1.0f, zero = 0.0f;
  cudnnStatus_t status = cudnnPoolingBackward(  // cleave-unchecked: checked below, NOT_SUPPORTED being an answer
      detail::cudnn(), d.pool, &one, d.y, y, d.y, dy, d.x, x, &zero, d.x, dx);
  if (status == CUDNN_STATUS_NOT_SUPPORTED) {
    refused.insert(std::move(key));
    return false;
  }
  check_cudnn(status, "cudnnPoolingBackward", __FILE__, __LINE__);
  return true;
}

/** Global average pooling of [nc, spatial] as one window over a 1-d op. */
PoolShape global_shape(int64_t nc, int64_t spatial) {
  PoolShape s;
  s.nc = nc;
  s.x = {spatial};
  s.y = {1};
  s.kernel = {spatial};
  s.strides = {1};
  s.pads = {0, 0};
  s.dilations = {1};
  return s;
}

/** Whether cuDNN's pooling windows are cpu/pool.cpp's: a whole op (no block fields) of 1-3 spatial dims, no
 *  dilation, symmetric pads below the kernel, the caller's output extent equal to the floor formula (so every window
 *  lies inside the padded input and holds an element of X), sizes within int; and cuDNN not switched off. */
bool cudnn_window_ok(const PoolShape &s) {
  if (!detail::cudnn_pool_norm_enabled()) return false;
  size_t sp = s.x.size();
  if (sp < 1 || sp > 3 || s.nc < 1 || s.nc > INT_MAX) return false;
  if (!(s.x_begin.empty() && s.y_begin.empty() && s.x_full.empty() && s.dx_begin.empty() && s.dx.empty()))
    return false;
  if (s.y.size() != sp || s.kernel.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    return false;
  int64_t nx = 1, ny = 1;
  for (size_t d = 0; d < sp; ++d) {
    int64_t x = s.x[d], k = s.kernel[d], st = s.strides[d], p = s.pads[d];
    if (s.dilations[d] != 1 || p != s.pads[d + sp] || p < 0 || p >= k || st < 1 || x < 1) return false;
    if (x > INT_MAX || k > INT_MAX || st > INT_MAX) return false;
    if (x + 2 * p < k || s.y[d] != (x + 2 * p - k) / st + 1) return false;
    nx *= x;
    ny *= s.y[d];
  }
  return s.nc * nx <= INT_MAX && s.nc * ny <= INT_MAX;
}

}  // namespace

bool detail::cudnn_pool_norm_enabled() {
  static const bool enabled = [] {
    const char *env = std::getenv("CLEAVE_CUDNN_POOL_NORM");
    return !(env && std::string(env) == "0");
  }();
  return enabled;
}

bool detail::cudnn_takes_max_pool_forward(const PoolShape &s, bool indices) {
  // 2-D windows over whole planes run max_forward_2d_kernel: cuDNN's NCHW max pooling read ResNet-50's first
  // pooling at a third of a TB/s on an H200.
  return !indices && cudnn_window_ok(s) && !takes_pool2d(s);
}

bool detail::cudnn_takes_avg_pool(const PoolShape &s) { return cudnn_window_ok(s); }

bool detail::cudnn_takes_global_avg_pool(int64_t nc, int64_t spatial, int64_t divisor) {
  return (divisor <= 0 || divisor == spatial) && cudnn_window_ok(global_shape(nc, spatial));
}

void max_pool_forward(const PoolShape &s, const float *x, float *y, int64_t *indices) {
  PoolGeom g = make_geom(s);
  if (missing_taps(g)) fail("max_pool_forward: the X block lacks part of a window");
  if (g.nc * g.ny == 0) return;
  Pool2d g2;
  if (as_pool2d(g, false, &g2)) {
    CLEAVE_LAUNCH(max_forward_2d_kernel, detail::grid_for(g2.n), detail::kThreads, g2, x, y, indices,
                  detail::error_flag());
    detail::check_error_flag("max_pool_forward: a pooling window lies entirely in the padding");
    return;
  }
  if (detail::cudnn_takes_max_pool_forward(s, indices))
    return cudnn_forward(s, CUDNN_POOLING_MAX_DETERMINISTIC, x, y);
  int64_t nx_full = detail::product(s.x_full.empty() ? s.x : s.x_full);
  CLEAVE_LAUNCH(max_forward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, x, y, indices, nx_full,
                detail::error_flag());
  detail::check_error_flag("max_pool_forward: a pooling window lies entirely in the padding");
}

void max_pool_backward(const PoolShape &s, const float *dy, const float *x, float *dx) {
  PoolGeom g = make_geom(s);
  if (missing_taps(g)) fail("max_pool_backward: the X block lacks part of a window");
  if (s.dx.empty() != s.dx_begin.empty()) fail("max_pool_backward: dx and dx_begin must be given together");
  bool block = !s.dx.empty();
  int64_t ndx = block ? detail::product(s.dx) : g.nx;
  fill_bytes(dx, 0, s.nc * ndx * 4);
  if (g.nc * g.ny == 0) return;
  Pool2d g2;
  if (as_pool2d(g, block, &g2)) {
    CLEAVE_LAUNCH(max_backward_2d_kernel, detail::grid_for(g2.n), detail::kThreads, g2, dy, x, dx);
    return;
  }
  Small dx_begin = detail::small(block ? s.dx_begin : Dims(s.x.size(), 0), "max_pool_backward");
  Small dx_shape = detail::small(block ? s.dx : s.x, "max_pool_backward");
  CLEAVE_LAUNCH(max_backward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, dy, x, dx, block, dx_begin,
                dx_shape, ndx);
}

void avg_pool_forward(const PoolShape &s, const float *x, float *y) {
  PoolGeom g = make_geom(s);
  if (missing_taps(g)) fail("avg_pool_forward: the X block lacks part of a window");
  if (g.nc * g.ny == 0) return;
  if (detail::cudnn_takes_avg_pool(s)) return cudnn_forward(s, avg_mode(s), x, y);
  CLEAVE_LAUNCH(avg_forward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, x, y);
}

void avg_pool_backward(const PoolShape &s, const float *dy, float *dx) {
  PoolGeom g = make_geom(s);
  if (g.nc * g.ny > 0 && detail::cudnn_takes_avg_pool(s) && cudnn_avg_backward(s, dy, dx)) return;
  fill_bytes(dx, 0, s.nc * g.nx * 4);
  if (g.nc * g.ny == 0) return;
  CLEAVE_LAUNCH(avg_backward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, dy, dx);
}

void global_avg_pool_forward(int64_t nc, int64_t spatial, const float *x, float *y, int64_t divisor) {
  if (nc == 0) return;
  if (detail::cudnn_takes_global_avg_pool(nc, spatial, divisor))
    return cudnn_forward(global_shape(nc, spatial), CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, x, y);
  CLEAVE_LAUNCH(global_avg_forward_kernel, detail::rows_grid(nc), detail::kThreads, nc, spatial, x, y,
                static_cast<double>(divisor > 0 ? divisor : spatial));
}

void global_avg_pool_backward(int64_t nc, int64_t spatial, const float *dy, float *dx, int64_t divisor) {
  if (nc * spatial == 0) return;
  if (detail::cudnn_takes_global_avg_pool(nc, spatial, divisor) &&
      cudnn_avg_backward(global_shape(nc, spatial), dy, dx))
    return;
  CLEAVE_LAUNCH(global_avg_backward_kernel, detail::grid_for(nc * spatial), detail::kThreads, nc, spatial, dy, dx,
                static_cast<float>(divisor > 0 ? divisor : spatial));
}

}  // namespace cleave::rt
