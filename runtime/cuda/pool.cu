// Max, average and global-average pooling and their gradients as kernels with cpu/pool.cpp's semantics, spatial
// blocks included: one thread per output window walks its taps. Not cuDNN's pooling: it cannot express the windows
// that run past the padded input (ceil_mode), the spatial blocks of halo splits, or the first-maximum rule of the
// backward pass. Gradients scatter with atomics (windows overlap), so their summation order varies between runs.
#include <algorithm>
#include <string>

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
    if (t >= 0 && (best < 0 || x[t] > x[best])) best = t;
  }
  return best;
}

#define CLEAVE_FOR_EACH(i, n)                                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void max_forward_kernel(PoolGeom g, const float *x, float *y, int64_t *indices, int *error) {
  CLEAVE_FOR_EACH(e, g.nc * g.ny) {
    int64_t p = e / g.ny, yf = e % g.ny;
    int64_t best = argmax(g, yf, x + p * g.nx);
    if (best < 0) {
      *error = 1;
      continue;
    }
    y[e] = x[p * g.nx + best];
    if (indices) indices[e] = p * g.nx + best;
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

}  // namespace

void max_pool_forward(const PoolShape &s, const float *x, float *y, int64_t *indices) {
  PoolGeom g = make_geom(s);
  if (missing_taps(g)) fail("max_pool_forward: the X block lacks part of a window");
  if (indices && !(s.x_begin.empty() && s.y_begin.empty() && s.x_full.empty()))
    fail("max_pool_forward: indices of a spatial block are not supported");
  if (g.nc * g.ny == 0) return;
  CLEAVE_LAUNCH(max_forward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, x, y, indices,
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
  Small dx_begin = detail::small(block ? s.dx_begin : Dims(s.x.size(), 0), "max_pool_backward");
  Small dx_shape = detail::small(block ? s.dx : s.x, "max_pool_backward");
  CLEAVE_LAUNCH(max_backward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, dy, x, dx, block, dx_begin,
                dx_shape, ndx);
}

void avg_pool_forward(const PoolShape &s, const float *x, float *y) {
  PoolGeom g = make_geom(s);
  if (missing_taps(g)) fail("avg_pool_forward: the X block lacks part of a window");
  if (g.nc * g.ny == 0) return;
  CLEAVE_LAUNCH(avg_forward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, x, y);
}

void avg_pool_backward(const PoolShape &s, const float *dy, float *dx) {
  PoolGeom g = make_geom(s);
  fill_bytes(dx, 0, s.nc * g.nx * 4);
  if (g.nc * g.ny == 0) return;
  CLEAVE_LAUNCH(avg_backward_kernel, detail::grid_for(g.nc * g.ny), detail::kThreads, g, dy, dx);
}

void global_avg_pool_forward(int64_t nc, int64_t spatial, const float *x, float *y, int64_t divisor) {
  if (nc == 0) return;
  CLEAVE_LAUNCH(global_avg_forward_kernel, detail::rows_grid(nc), detail::kThreads, nc, spatial, x, y,
                static_cast<double>(divisor > 0 ? divisor : spatial));
}

void global_avg_pool_backward(int64_t nc, int64_t spatial, const float *dy, float *dx, int64_t divisor) {
  if (nc * spatial == 0) return;
  CLEAVE_LAUNCH(global_avg_backward_kernel, detail::grid_for(nc * spatial), detail::kThreads, nc, spatial, dy, dx,
                static_cast<float>(divisor > 0 ? divisor : spatial));
}

}  // namespace cleave::rt
