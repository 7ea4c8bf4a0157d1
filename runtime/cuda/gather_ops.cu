// GatherElements, ScatterElements and GatherND with cpu/gather_ops.cpp's semantics, one element (of indices or of the
// output) per thread. Scatters add with atomics, so the order of additions to one target varies between runs; an
// index out of range sets the error flag, which the host turns into fail().
#include <cstdint>

#include "common/shapes.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::Small;
using detail::small;

__device__ inline int64_t wrapped(int64_t g, int64_t dim, int *error) {
  if (g < -dim || g >= dim) {
    *error = 1;
    return -1;
  }
  return g < 0 ? g + dim : g;
}

/** The data offset of element p of indices (shape `ind`, data strides `st`), its axis coordinate replaced by the
 *  index; -1 when the index is out of range. */
__device__ inline int64_t element_offset(int64_t p, const Small &ind, const Small &st, int axis, int64_t dim,
                                         const int64_t *indices, int *error) {
  int64_t rem = p, off = 0;
  for (int d = ind.n - 1; d >= 0; --d) {
    int64_t c = rem % ind[d];
    rem /= ind[d];
    if (d == axis) {
      c = wrapped(indices[p], dim, error);
      if (c < 0) return -1;
    }
    off += c * st[d];
  }
  return off;
}

__global__ void gather_elements_kernel(int64_t n, Small ind, Small st, int axis, int64_t dim, const int64_t *indices,
                                       const float *data, float *y, int *error) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t off = element_offset(p, ind, st, axis, dim, indices, error);
    y[p] = off < 0 ? 0.0f : data[off];
  }
}

__global__ void scatter_elements_kernel(int64_t n, Small ind, Small st, int axis, int64_t dim, const int64_t *indices,
                                        const float *updates, float *y, bool add, int *error) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t off = element_offset(p, ind, st, axis, dim, indices, error);
    if (off < 0) continue;
    if (add) atomicAdd(&y[off], updates[p]);
    else y[off] = updates[p];
  }
}

/** The flat data offset of the slice that output element e reads (gather_nd's view), or -1. */
__device__ inline int64_t nd_offset(int64_t e, int64_t tuples, int64_t slice, int64_t per_batch, const Small &dims,
                                    const int64_t *indices, int *error) {
  int64_t bt = e / slice;
  const int64_t *tuple = indices + bt * dims.n;
  int64_t off = 0;
  for (int c = 0; c < dims.n; ++c) {
    int64_t i = wrapped(tuple[c], dims[c], error);
    if (i < 0) return -1;
    off = off * dims[c] + i;
  }
  return (bt / tuples) * per_batch + off * slice + e % slice;
}

__global__ void gather_nd_kernel(int64_t n, int64_t tuples, int64_t slice, int64_t per_batch, Small dims,
                                 const int64_t *indices, const float *data, float *y, int *error) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t src = nd_offset(e, tuples, slice, per_batch, dims, indices, error);
    y[e] = src < 0 ? 0.0f : data[src];
  }
}

__global__ void gather_nd_backward_kernel(int64_t n, int64_t tuples, int64_t slice, int64_t per_batch, Small dims,
                                          const int64_t *indices, const float *dy, float *ddata, int *error) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t dst = nd_offset(e, tuples, slice, per_batch, dims, indices, error);
    if (dst >= 0) atomicAdd(&ddata[dst], dy[e]);
  }
}

Dims strides_of(const Dims &shape) {
  Dims st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}

std::string range_message(const char *what, int64_t dim) {
  return std::string(what) + ": an index is out of range [" + std::to_string(-dim) + ", " + std::to_string(dim) + ")";
}

}  // namespace

void gather_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                     const float *data, float *y) {
  host::check_elementwise_indices(data_shape, ind_shape, axis, "gather_elements");
  int64_t n = detail::product(ind_shape), dim = data_shape[static_cast<size_t>(axis)];
  if (n == 0) return;
  CLEAVE_LAUNCH(gather_elements_kernel, detail::grid_for(n), detail::kThreads, n, small(ind_shape, "gather_elements"),
                small(strides_of(data_shape), "gather_elements"), static_cast<int>(axis), dim, indices, data, y,
                detail::error_flag());
  detail::check_error_flag(range_message("gather_elements", dim));
}

void scatter_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                      const float *data, const float *updates, float *y, bool add) {
  host::check_elementwise_indices(data_shape, ind_shape, axis, "scatter_elements");
  if (y != data) copy(y, data, detail::product(data_shape) * static_cast<int64_t>(sizeof(float)));
  int64_t n = detail::product(ind_shape), dim = data_shape[static_cast<size_t>(axis)];
  if (n == 0) return;
  CLEAVE_LAUNCH(scatter_elements_kernel, detail::grid_for(n), detail::kThreads, n,
                small(ind_shape, "scatter_elements"), small(strides_of(data_shape), "scatter_elements"),
                static_cast<int>(axis), dim, indices, updates, y, add, detail::error_flag());
  detail::check_error_flag(range_message("scatter_elements", dim));
}

void gather_nd(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
               const float *data, float *y) {
  host::GatherNdView v = host::gather_nd_view(data_shape, ind_shape, batch_dims);
  int64_t n = v.batches * v.tuples * v.slice;
  if (n == 0) return;
  CLEAVE_LAUNCH(gather_nd_kernel, detail::grid_for(n), detail::kThreads, n, v.tuples, v.slice, v.per_batch,
                small(v.index_dims, "gather_nd"), indices, data, y, detail::error_flag());
  detail::check_error_flag("gather_nd: an index is out of range of its dim");
}

void gather_nd_backward(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
                        const float *dy, float *ddata) {
  host::GatherNdView v = host::gather_nd_view(data_shape, ind_shape, batch_dims);
  fill_bytes(ddata, 0, detail::product(data_shape) * static_cast<int64_t>(sizeof(float)));
  int64_t n = v.batches * v.tuples * v.slice;
  if (n == 0) return;
  CLEAVE_LAUNCH(gather_nd_backward_kernel, detail::grid_for(n), detail::kThreads, n, v.tuples, v.slice, v.per_batch,
                small(v.index_dims, "gather_nd"), indices, dy, ddata, detail::error_flag());
  detail::check_error_flag("gather_nd: an index is out of range of its dim");
}

}  // namespace cleave::rt
