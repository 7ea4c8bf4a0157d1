// Data movement on the device: raw copies, broadcast and its adjoint, transpose, slice, concat/split, constant
// padding, gather, sum/mean/max reductions and region copy (Tofu's MultiFetch: one kernel over several boxes).
// Index arithmetic mirrors cpu/layout.cpp; every output element is written by one thread.
#include <algorithm>
#include <cstdint>

#include "common/index_kernels.h"
#include "common/shapes.h"
#include "common/strided_index.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::kColTile;
using detail::kMaxRank;
using detail::kRowLanes;
using detail::Small;
using detail::small;

/** Row-major strides of `shape`. */
Dims strides_of(const Dims &shape) {
  Dims st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}

/** out[o] = in[base + sum_d idx_d(o) * st[d]] over out_shape. */
template <typename T>
__global__ void strided_gather(int64_t n, Small shape, Small st, int64_t base, const T *in, T *out) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rem = o, off = base;
    for (int d = shape.n - 1; d >= 0; --d) {
      off += rem % shape[d] * st[d];
      rem /= shape[d];
    }
    out[o] = in[off];
  }
}

/** out[base + sum_d idx_d(o) * st[d]] = in[o] (distinct targets). */
template <typename T>
__global__ void strided_scatter(int64_t n, Small shape, Small st, int64_t base, const T *in, T *out) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rem = o, off = base;
    for (int d = shape.n - 1; d >= 0; --d) {
      off += rem % shape[d] * st[d];
      rem /= shape[d];
    }
    out[off] = in[o];
  }
}

// The same walks with 32-bit indices and magic-number division (common/strided_index.h), for n < 2^31.
template <typename T>
__global__ void strided_gather_fast(uint32_t n, hd::StridedIndex src, int64_t base, const T *in, T *out) {
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n; o += blockDim.x * gridDim.x)
    out[o] = in[base + src.offset(o)];
}

template <typename T>
__global__ void strided_copy_fast(uint32_t n, hd::StridedIndex src, int64_t src_base, hd::StridedIndex dst,
                                  int64_t dst_base, const T *in, T *out) {
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n; o += blockDim.x * gridDim.x)
    out[dst_base + dst.offset(o)] = in[src_base + src.offset(o)];
}

template <typename T>
__global__ void strided_copy(int64_t n, Small shape, Small src_st, int64_t src_base, Small dst_st, int64_t dst_base,
                             const T *in, T *out) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rem = o, from = src_base, to = dst_base;
    for (int d = shape.n - 1; d >= 0; --d) {
      from += rem % shape[d] * src_st[d];
      to += rem % shape[d] * dst_st[d];
      rem /= shape[d];
    }
    out[to] = in[from];
  }
}

template <typename T>
__global__ void strided_scatter_fast(uint32_t n, hd::StridedIndex dst, int64_t base, const T *in, T *out) {
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n; o += blockDim.x * gridDim.x)
    out[base + dst.offset(o)] = in[o];
}

// A batched 2-D transpose between two views: out[bdst(b) + p * dst_p + q] = in[bsrc(b) + p + q * src_q] through
// 32x32 tiles in shared memory, so both the reads (along p) and the writes (along q) are contiguous. Blocks of 32x8
// threads; z walks the batch.
constexpr int kTile = 32, kTileRows = 8;
template <typename T>
__global__ void transpose_tiles(uint32_t batch, int64_t rows, int64_t cols, int64_t src_q, int64_t dst_p,
                                hd::StridedIndex bsrc, hd::StridedIndex bdst, const T *in, T *out) {
  __shared__ T tile[kTile][kTile + 1];
  int64_t p0 = static_cast<int64_t>(blockIdx.y) * kTile, q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  for (uint32_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T *src = in + bsrc.offset(b);
    T *dst = out + bdst.offset(b);
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t p = p0 + threadIdx.x, q = q0 + j;
      if (p < rows && q < cols) tile[j][threadIdx.x] = src[p + q * src_q];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      int64_t p = p0 + j, q = q0 + threadIdx.x;
      if (p < rows && q < cols) dst[p * dst_p + q] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

/** A copy from one view to another through tiles when it is a batched transpose: a dim p contiguous in the source
 *  but not the destination, and a dim q the other way round (the other dims are the batch). False otherwise. */
template <typename T>
bool try_transpose_tiles(const Dims &shape, const Dims &xs, int64_t x_base, const Dims &ys, int64_t y_base,
                         const void *in, void *out) {
  size_t r = shape.size(), p = r, q = r;
  for (size_t d = 0; d < r; ++d) {
    if (xs[d] == 1 && ys[d] != 1 && p == r) p = d;
    if (ys[d] == 1 && xs[d] != 1 && q == r) q = d;
  }
  // Tiles of 32 by 32 pay for their barriers only where both dims fill a good part of one.
  if (p == r || q == r || shape[p] < 8 || shape[q] < 8) return false;
  Dims bshape, bxs, bys;
  for (size_t d = 0; d < r; ++d) {
    if (d == p || d == q) continue;
    bshape.push_back(shape[d]);
    bxs.push_back(xs[d]);
    bys.push_back(ys[d]);
  }
  int64_t batch = detail::product(bshape), rows = shape[p], cols = shape[q];
  if (!hd::fits_strided_index(bshape, batch) || (rows + kTile - 1) / kTile > 65535 ||
      (cols + kTile - 1) / kTile >= (int64_t{1} << 31))
    return false;
  dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile),
            static_cast<unsigned>(std::min<int64_t>(batch, 65535)));
  dim3 block(kTile, kTileRows);
  CLEAVE_LAUNCH(transpose_tiles<T>, grid, block, static_cast<uint32_t>(batch), rows, cols, xs[q], ys[p],
                hd::make_strided_index(bshape, bxs), hd::make_strided_index(bshape, bys),
                static_cast<const T *>(in) + x_base, static_cast<T *>(out) + y_base);
  return true;
}

/** try_transpose_tiles for a gather into a contiguous output, on the element size. */
bool try_transpose_tiles(const Dims &shape, const Dims &st, int64_t base, const void *in, void *out, size_t elem) {
  const Dims out_st = strides_of(shape);
  switch (elem) {
    case 1: return try_transpose_tiles<uint8_t>(shape, st, base, out_st, 0, in, out);
    case 2: return try_transpose_tiles<uint16_t>(shape, st, base, out_st, 0, in, out);
    case 4: return try_transpose_tiles<uint32_t>(shape, st, base, out_st, 0, in, out);
    case 8: return try_transpose_tiles<uint64_t>(shape, st, base, out_st, 0, in, out);
    default: return false;
  }
}

/** view_copy's launch for T-sized elements: through tiles where it is a batched transpose, else with 32-bit indices
 *  below 2^31 elements. */
template <typename T>
void copy_views(int64_t n, const Dims &shape, const Dims &xs, int64_t x_base, const Dims &ys, int64_t y_base,
                const void *x, void *y) {
  const T *in = static_cast<const T *>(x);
  T *out = static_cast<T *>(y);
  if (try_transpose_tiles<T>(shape, xs, x_base, ys, y_base, x, y)) return;
  unsigned g = detail::grid_for(n);
  if (hd::fits_strided_index(shape, n)) {
    CLEAVE_LAUNCH(strided_copy_fast<T>, g, detail::kThreads, static_cast<uint32_t>(n),
                  hd::make_strided_index(shape, xs), x_base, hd::make_strided_index(shape, ys), y_base, in, out);
    return;
  }
  CLEAVE_LAUNCH(strided_copy<T>, g, detail::kThreads, n, small(shape, "view_copy"), small(xs, "view_copy"), x_base,
                small(ys, "view_copy"), y_base, in, out);
}

/** Dispatches a strided gather on the element size (a size other than 1/2/4/8 becomes a trailing dim of bytes).
 *  The walk is coalesced first; below 2^31 elements it runs with 32-bit indices, as a tiled transpose where it is
 *  one. */
void gather_bytes(Dims shape, Dims st, int64_t base, const void *in, void *out, size_t elem_size, const char *what) {
  int64_t n = detail::product(shape);
  if (n == 0) return;
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) {
    for (int64_t &s : st) s *= static_cast<int64_t>(elem_size);
    base *= static_cast<int64_t>(elem_size);
    shape.push_back(static_cast<int64_t>(elem_size));
    st.push_back(1);
    elem_size = 1;
    n *= static_cast<int64_t>(shape.back());
  }
  hd::coalesce_dims(shape, st);
  if (shape.size() == 1 && st[0] == 1) {  // one contiguous run
    copy(out, static_cast<const char *>(in) + base * static_cast<int64_t>(elem_size),
         n * static_cast<int64_t>(elem_size));
    return;
  }
  if (try_transpose_tiles(shape, st, base, in, out, elem_size)) return;
  if (hd::fits_strided_index(shape, n)) {
    hd::StridedIndex idx = hd::make_strided_index(shape, st);
    unsigned g = detail::grid_for(n);
    switch (elem_size) {
      case 1: CLEAVE_LAUNCH(strided_gather_fast<uint8_t>, g, detail::kThreads, static_cast<uint32_t>(n), idx, base, static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out)); break;
      case 2: CLEAVE_LAUNCH(strided_gather_fast<uint16_t>, g, detail::kThreads, static_cast<uint32_t>(n), idx, base, static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out)); break;
      case 4: CLEAVE_LAUNCH(strided_gather_fast<uint32_t>, g, detail::kThreads, static_cast<uint32_t>(n), idx, base, static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out)); break;
      default: CLEAVE_LAUNCH(strided_gather_fast<uint64_t>, g, detail::kThreads, static_cast<uint32_t>(n), idx, base, static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out)); break;
    }
    return;
  }
  Small sh = small(shape, what), ss = small(st, what);
  unsigned g = detail::grid_for(n);
  switch (elem_size) {
    case 1: CLEAVE_LAUNCH(strided_gather<uint8_t>, g, detail::kThreads, n, sh, ss, base, static_cast<const uint8_t *>(in), static_cast<uint8_t *>(out)); break;
    case 2: CLEAVE_LAUNCH(strided_gather<uint16_t>, g, detail::kThreads, n, sh, ss, base, static_cast<const uint16_t *>(in), static_cast<uint16_t *>(out)); break;
    case 4: CLEAVE_LAUNCH(strided_gather<uint32_t>, g, detail::kThreads, n, sh, ss, base, static_cast<const uint32_t *>(in), static_cast<uint32_t *>(out)); break;
    default: CLEAVE_LAUNCH(strided_gather<uint64_t>, g, detail::kThreads, n, sh, ss, base, static_cast<const uint64_t *>(in), static_cast<uint64_t *>(out)); break;
  }
}

/** For each dim of out_shape, the stride of the broadcast input (0 where it is repeated or absent). */
Dims broadcast_strides(const Dims &in_shape, const Dims &out_shape, const char *what) {
  size_t r = out_shape.size();
  if (in_shape.size() > r) fail(std::string(what) + ": input rank exceeds output rank");
  Dims st(r, 0);
  int64_t s = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    size_t din = in_shape.size() - 1 - i, dout = r - 1 - i;
    if (in_shape[din] != out_shape[dout] && in_shape[din] != 1)
      fail(std::string(what) + ": dim " + std::to_string(in_shape[din]) + " does not broadcast to " +
           std::to_string(out_shape[dout]));
    st[dout] = in_shape[din] == 1 ? 0 : s;
    s *= in_shape[din];
  }
  return st;
}

// Reductions: output o enumerates `kept` (row-major) at input strides kst; each block sums (or maxes) the `red`
// sub-space at strides rst, in double for sums.
__global__ void reduce_kernel(int64_t ny, Small kept, Small kst, int64_t nred, Small red, Small rst, const float *x,
                              float *y, double divisor) {
  __shared__ double shared[32];
  for (int64_t o = blockIdx.x; o < ny; o += gridDim.x) {
    int64_t rem = o, base = 0;
    for (int d = kept.n - 1; d >= 0; --d) {
      base += rem % kept[d] * kst[d];
      rem /= kept[d];
    }
    double acc = 0;
    for (int64_t r = threadIdx.x; r < nred; r += blockDim.x) {
      int64_t rr = r, off = base;
      for (int d = red.n - 1; d >= 0; --d) {
        off += rr % red[d] * rst[d];
        rr /= red[d];
      }
      acc += x[off];
    }
    acc = detail::block_sum(acc, shared);
    if (threadIdx.x == 0) y[o] = static_cast<float>(acc / divisor);
  }
}

__device__ inline float pick(float a, float b, bool min) {
  if (a != a) return a;
  if (b != b) return b;
  return min ? (b < a ? b : a) : (b > a ? b : a);
}

__global__ void reduce_max_kernel(int64_t ny, Small kept, Small kst, int64_t nred, Small red, Small rst,
                                  const float *x, float *y, bool min) {
  __shared__ float shared[detail::kThreads];
  for (int64_t o = blockIdx.x; o < ny; o += gridDim.x) {
    int64_t rem = o, base = 0;
    for (int d = kept.n - 1; d >= 0; --d) {
      base += rem % kept[d] * kst[d];
      rem /= kept[d];
    }
    float acc = min ? INFINITY : -INFINITY;
    for (int64_t r = threadIdx.x; r < nred; r += blockDim.x) {
      int64_t rr = r, off = base;
      for (int d = red.n - 1; d >= 0; --d) {
        off += rr % red[d] * rst[d];
        rr /= red[d];
      }
      acc = pick(acc, x[off], min);
    }
    __syncthreads();
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] = pick(shared[threadIdx.x], shared[threadIdx.x + s], min);
      __syncthreads();
    }
    if (threadIdx.x == 0) y[o] = shared[0];
  }
}

/** Splits x_shape's dims into kept and reduced (reduced[d]), with their input strides. */
struct ReductionPlan {
  Dims kept, kst, red, rst;
  int64_t ny = 1, nred = 1;
};

ReductionPlan plan_reduction(const Dims &x_shape, const std::vector<bool> &reduced) {
  ReductionPlan p;
  Dims st = strides_of(x_shape);
  for (size_t d = 0; d < x_shape.size(); ++d) {
    if (reduced[d]) {
      p.red.push_back(x_shape[d]);
      p.rst.push_back(st[d]);
      p.nred *= x_shape[d];
    } else {
      p.kept.push_back(x_shape[d]);
      p.kst.push_back(st[d]);
      p.ny *= x_shape[d];
    }
  }
  return p;
}

/** The first pass of the column sums (internal.cuh) over rows at x's strides `red`. */
__global__ void reduce_columns_partial(int64_t cols, uint32_t nred, uint32_t chunk, hd::StridedIndex red,
                                       const float *x, double *partial) {
  __shared__ double lanes[kRowLanes][kColTile + 1];
  const int64_t k = blockIdx.x * static_cast<int64_t>(kColTile) + threadIdx.x;
  const uint32_t r0 = blockIdx.y * chunk, r1 = r0 + chunk < nred ? r0 + chunk : nred;
  double acc = 0;
  if (k < cols)
    for (uint32_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) acc += x[red.offset(r) + k];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || k >= cols) return;
  for (int j = 1; j < kRowLanes; ++j) acc += lanes[j][threadIdx.x];
  partial[blockIdx.y * cols + k] = acc;
}

__global__ void reduce_columns_final(int64_t cols, unsigned chunks, const double *partial, float *y, double divisor) {
  int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= cols) return;
  double acc = 0;
  for (unsigned c = 0; c < chunks; ++c) acc += partial[c * cols + k];
  y[k] = static_cast<float>(acc / divisor);
}

void launch_reduce(ReductionPlan p, const float *x, float *y, double divisor, const char *what) {
  if (p.ny == 0) return;
  hd::coalesce_dims(p.kept, p.kst);
  hd::coalesce_dims(p.red, p.rst);
  if (p.kept.size() == 1 && p.kst[0] == 1 && p.nred > 1 && hd::fits_strided_index(p.red, p.nred)) {
    const int64_t cols = p.ny;
    const detail::ColumnChunks c = detail::column_chunks(cols, p.nred);
    auto *partial = static_cast<double *>(detail::scratch(static_cast<size_t>(c.chunks * cols) * sizeof(double)));
    dim3 grid(static_cast<unsigned>(c.col_blocks), static_cast<unsigned>(c.chunks)), block(kColTile, kRowLanes);
    CLEAVE_LAUNCH(reduce_columns_partial, grid, block, cols, static_cast<uint32_t>(p.nred),
                  static_cast<uint32_t>(c.rows), hd::make_strided_index(p.red, p.rst), x, partial);
    detail::sum_column_partials(cols, c.chunks, partial, y, divisor);
    return;
  }
  CLEAVE_LAUNCH(reduce_kernel, detail::rows_grid(p.ny), detail::kThreads, p.ny, small(p.kept, what),
                small(p.kst, what), p.nred, small(p.red, what), small(p.rst, what), x, y, divisor);
}

std::vector<bool> axes_mask(const Dims &x_shape, const Dims &axes, const char *what) {
  std::vector<bool> reduced(x_shape.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(x_shape.size()))
      fail(std::string(what) + ": axis " + std::to_string(a) + " out of range");
    reduced[static_cast<size_t>(a)] = true;
  }
  return reduced;
}

__global__ void pad_kernel(int64_t n, Small xs, Small ys, Small pads_begin, float value, const float *x, float *y) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
       o += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t rem = o, src = 0, xst = 1;
    bool inside = true;
    for (int d = ys.n - 1; d >= 0; --d) {
      int64_t i = rem % ys[d] - pads_begin[d];
      rem /= ys[d];
      inside = inside && i >= 0 && i < xs[d];
      src += i * xst;
      xst *= xs[d];
    }
    y[o] = inside ? x[src] : value;
  }
}

__global__ void gather_kernel(int64_t outer, int64_t num, int64_t inner, int64_t dim, const int64_t *indices,
                              const float *data, float *y, int64_t global_dim, int64_t index_base, int *error) {
  int64_t n = outer * num * inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % inner, j = e / inner % num, o = e / inner / num;
    int64_t row = hd::gather_local_row(indices[j], global_dim, index_base, dim);
    if (row == hd::kGatherOutOfRange) *error = 1;
    y[e] = row >= 0 ? data[(o * dim + row) * inner + i] : 0.0f;
  }
}

__global__ void gather_backward_kernel(int64_t outer, int64_t num, int64_t inner, int64_t dim,
                                       const int64_t *indices, const float *dy, float *ddata, int64_t global_dim,
                                       int64_t index_base, int *error) {
  int64_t n = outer * num * inner;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t i = e % inner, j = e / inner % num, o = e / inner / num;
    int64_t row = hd::gather_local_row(indices[j], global_dim, index_base, dim);
    if (row == hd::kGatherOutOfRange) *error = 1;
    // Repeated indices accumulate: atomics make the order of those additions (not the set) vary between runs.
    if (row >= 0) atomicAdd(&ddata[(o * dim + row) * inner + i], dy[e]);
  }
}

// Region copy: up to kBoxesPerLaunch boxes per launch, passed by value; thread e finds its box by the prefix sums.
constexpr int kBoxesPerLaunch = 12;
struct DeviceBox {
  const char *src = nullptr;
  int64_t src_base = 0, dst_base = 0, first = 0;  // first: the box's first element in the launch's numbering
  Small extent, src_st;
};
struct BoxBatch {
  DeviceBox box[kBoxesPerLaunch];
  int count = 0;
  int64_t total = 0;
  Small dst_st;
};

template <typename T>
__global__ void region_copy_kernel(BoxBatch batch, T *dst) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < batch.total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int b = 0;
    while (b + 1 < batch.count && batch.box[b + 1].first <= e) ++b;
    const DeviceBox &bx = batch.box[b];
    int64_t rem = e - bx.first, so = bx.src_base, dof = bx.dst_base;
    for (int d = bx.extent.n - 1; d >= 0; --d) {
      int64_t i = rem % bx.extent[d];
      rem /= bx.extent[d];
      so += i * bx.src_st[d];
      dof += i * batch.dst_st[d];
    }
    dst[dof] = reinterpret_cast<const T *>(bx.src)[so];
  }
}

void launch_boxes(const BoxBatch &batch, void *dst, size_t elem_size) {
  if (batch.total == 0) return;
  unsigned g = detail::grid_for(batch.total);
  switch (elem_size) {
    case 1: CLEAVE_LAUNCH(region_copy_kernel<uint8_t>, g, detail::kThreads, batch, static_cast<uint8_t *>(dst)); break;
    case 2: CLEAVE_LAUNCH(region_copy_kernel<uint16_t>, g, detail::kThreads, batch, static_cast<uint16_t *>(dst)); break;
    case 4: CLEAVE_LAUNCH(region_copy_kernel<uint32_t>, g, detail::kThreads, batch, static_cast<uint32_t *>(dst)); break;
    default: CLEAVE_LAUNCH(region_copy_kernel<uint64_t>, g, detail::kThreads, batch, static_cast<uint64_t *>(dst)); break;
  }
}

}  // namespace

detail::ColumnChunks detail::column_chunks(int64_t cols, int64_t rows) {
  ColumnChunks c;
  c.col_blocks = std::max<int64_t>(1, (cols + kColTile - 1) / kColTile);
  c.chunks = std::min<int64_t>({std::max<int64_t>(1, 2048 / c.col_blocks), 256, std::max<int64_t>(1, (rows + 7) / 8)});
  c.rows = std::max<int64_t>(1, (rows + c.chunks - 1) / c.chunks);
  c.chunks = std::max<int64_t>(1, (rows + c.rows - 1) / c.rows);
  return c;
}

void detail::sum_column_partials(int64_t cols, int64_t chunks, const double *partial, float *y, double divisor) {
  if (cols <= 0) return;
  CLEAVE_LAUNCH(reduce_columns_final, static_cast<unsigned>((cols + kThreads - 1) / kThreads), kThreads, cols,
                static_cast<unsigned>(chunks), partial, y, divisor);
}

void copy(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0)
    CLEAVE_CUDA(cudaMemcpyAsync, dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, compute_stream());
}

void fill_bytes(void *dst, uint8_t value, int64_t bytes) {
  if (bytes > 0) CLEAVE_CUDA(cudaMemsetAsync, dst, value, static_cast<size_t>(bytes), compute_stream());
}

void broadcast(const Dims &in_shape, const Dims &out_shape, const float *x, float *y) {
  gather_bytes(out_shape, broadcast_strides(in_shape, out_shape, "broadcast"), 0, x, y, 4, "broadcast");
}

void broadcast_bytes(const Dims &in_shape, const Dims &out_shape, const void *x, void *y, size_t elem_size) {
  gather_bytes(out_shape, broadcast_strides(in_shape, out_shape, "broadcast_bytes"), 0, x, y, elem_size,
               "broadcast_bytes");
}

void reduce_to_shape(const Dims &in_shape, const Dims &out_shape, const float *x, float *y) {
  broadcast_strides(out_shape, in_shape, "reduce_to_shape");  // checks that out_shape broadcasts to in_shape
  size_t lead = in_shape.size() - out_shape.size();
  std::vector<bool> reduced(in_shape.size(), false);
  for (size_t d = 0; d < in_shape.size(); ++d)
    reduced[d] = d < lead || (out_shape[d - lead] == 1 && in_shape[d] != 1);
  // Kept dims enumerate out_shape in order (its size-1 dims add nothing), so output o is y[o].
  launch_reduce(plan_reduction(in_shape, reduced), x, y, 1.0, "reduce_to_shape");
}

void reduce(const Dims &x_shape, const Dims &axes, const float *x, float *y, bool mean) {
  ReductionPlan p = plan_reduction(x_shape, axes_mask(x_shape, axes, "reduce"));
  launch_reduce(p, x, y, mean && p.nred > 0 ? static_cast<double>(p.nred) : 1.0, "reduce");
}

void reduce_mean(const Dims &x_shape, const Dims &axes, int64_t count, const float *x, float *y) {
  ReductionPlan p = plan_reduction(x_shape, axes_mask(x_shape, axes, "reduce_mean"));
  launch_reduce(p, x, y, count > 0 ? static_cast<double>(count) : 1.0, "reduce_mean");
}

void reduce_max(const Dims &x_shape, const Dims &axes, const float *x, float *y, bool min) {
  ReductionPlan p = plan_reduction(x_shape, axes_mask(x_shape, axes, "reduce_max"));
  if (p.ny == 0) return;
  CLEAVE_LAUNCH(reduce_max_kernel, detail::rows_grid(p.ny), detail::kThreads, p.ny, small(p.kept, "reduce_max"),
                small(p.kst, "reduce_max"), p.nred, small(p.red, "reduce_max"), small(p.rst, "reduce_max"), x, y, min);
}

void pad_constant(const Dims &x_shape, const Dims &pads, float value, const float *x, float *y) {
  size_t r = x_shape.size();
  if (pads.size() != 2 * r) fail("pad_constant: pads needs 2 values per dim");
  Dims ys(r), begins(pads.begin(), pads.begin() + static_cast<int64_t>(r));
  for (size_t d = 0; d < r; ++d) {
    ys[d] = x_shape[d] + pads[d] + pads[d + r];
    if (ys[d] < 0) fail("pad_constant: pads crop a dim below 0");
  }
  int64_t n = detail::product(ys);
  if (n == 0) return;
  CLEAVE_LAUNCH(pad_kernel, detail::grid_for(n), detail::kThreads, n, small(x_shape, "pad_constant"),
                small(ys, "pad_constant"), small(begins, "pad_constant"), value, x, y);
}

void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y, size_t elem_size) {
  host::check_view_copy(shape, strides, nullptr);
  gather_bytes(shape, strides, offset, x, y, elem_size, "view_copy");
}

void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y, const Dims &y_strides,
               int64_t y_offset, size_t elem_size) {
  host::check_view_copy(shape, strides, &y_strides);
  int64_t n = detail::product(shape);
  if (n == 0) return;
  // Dims of extent 1 dropped, and a dim merged into the next where both views walk them as one.
  Dims sh, xs, ys;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!sh.empty() && xs.back() == strides[d] * shape[d] && ys.back() == y_strides[d] * shape[d]) {
      sh.back() *= shape[d];
      xs.back() = strides[d];
      ys.back() = y_strides[d];
      continue;
    }
    sh.push_back(shape[d]);
    xs.push_back(strides[d]);
    ys.push_back(y_strides[d]);
  }
  if (sh.empty()) {
    sh = {1};
    xs = {1};
    ys = {1};
  }
  if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) {
    for (size_t d = 0; d < sh.size(); ++d) {
      xs[d] *= static_cast<int64_t>(elem_size);
      ys[d] *= static_cast<int64_t>(elem_size);
    }
    offset *= static_cast<int64_t>(elem_size);
    y_offset *= static_cast<int64_t>(elem_size);
    sh.push_back(static_cast<int64_t>(elem_size));
    xs.push_back(1);
    ys.push_back(1);
    n *= static_cast<int64_t>(elem_size);
    elem_size = 1;
  }
  switch (elem_size) {
    case 1: return copy_views<uint8_t>(n, sh, xs, offset, ys, y_offset, x, y);
    case 2: return copy_views<uint16_t>(n, sh, xs, offset, ys, y_offset, x, y);
    case 4: return copy_views<uint32_t>(n, sh, xs, offset, ys, y_offset, x, y);
    default: return copy_views<uint64_t>(n, sh, xs, offset, ys, y_offset, x, y);
  }
}

void transpose(const Dims &shape, const Dims &perm, const float *x, float *y, size_t elem_size) {
  size_t r = shape.size();
  if (perm.size() != r) fail("transpose: perm rank differs from the shape's");
  Dims in_st = strides_of(shape), st(r), out(r);
  std::vector<bool> seen(r, false);
  for (size_t d = 0; d < r; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(r) || seen[static_cast<size_t>(perm[d])])
      fail("transpose: perm is not a permutation");
    seen[static_cast<size_t>(perm[d])] = true;
    out[d] = shape[static_cast<size_t>(perm[d])];
    st[d] = in_st[static_cast<size_t>(perm[d])];
  }
  gather_bytes(out, st, 0, x, y, elem_size, "transpose");
}

void slice(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const float *x, float *y) {
  Dims out, st;
  int64_t base = 0;
  host::slice_geometry(shape, starts, ends, steps, out, st, base);
  gather_bytes(out, st, base, x, y, 4, "slice");
}

void slice_backward(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const float *dy,
                    float *dx) {
  Dims out, st;
  int64_t base = 0;
  host::slice_geometry(shape, starts, ends, steps, out, st, base);
  fill_bytes(dx, 0, detail::product(shape) * 4);
  int64_t n = detail::product(out);
  if (n == 0) return;
  hd::coalesce_dims(out, st);
  if (hd::fits_strided_index(out, n)) {
    CLEAVE_LAUNCH(strided_scatter_fast<float>, detail::grid_for(n), detail::kThreads, static_cast<uint32_t>(n),
                  hd::make_strided_index(out, st), base, dy, dx);
    return;
  }
  CLEAVE_LAUNCH(strided_scatter<float>, detail::grid_for(n), detail::kThreads, n, small(out, "slice_backward"),
                small(st, "slice_backward"), base, dy, dx);
}

void concat(const std::vector<const float *> &parts, const std::vector<Dims> &shapes, int64_t axis, float *y) {
  if (parts.size() != shapes.size() || parts.empty()) fail("concat: one shape per part expected");
  Dims y_shape = shapes[0];
  size_t a = static_cast<size_t>(axis);
  if (a >= y_shape.size()) fail("concat: axis out of range");
  y_shape[a] = 0;
  for (const Dims &s : shapes) y_shape[a] += s.at(a);
  std::vector<Box> boxes;
  int64_t off = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    Box b;
    b.src = parts[p];
    b.src_shape = shapes[p];
    b.src_start.assign(shapes[p].size(), 0);
    b.extent = shapes[p];
    b.dst_start.assign(shapes[p].size(), 0);
    b.dst_start[a] = off;
    off += shapes[p][a];
    boxes.push_back(b);
  }
  region_copy(boxes, y, y_shape, 4);
}

void split(const Dims &x_shape, int64_t axis, const Dims &sizes, const float *x, const std::vector<float *> &parts) {
  if (sizes.size() != parts.size()) fail("split: one size per part expected");
  size_t a = static_cast<size_t>(axis);
  if (a >= x_shape.size()) fail("split: axis out of range");
  int64_t off = 0;
  for (int64_t s : sizes) off += s;
  if (off != x_shape[a]) fail("split: sizes do not add up to the axis length");
  off = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    Box b;
    b.src = x;
    b.src_shape = x_shape;
    b.src_start.assign(x_shape.size(), 0);
    b.src_start[a] = off;
    b.extent = x_shape;
    b.extent[a] = sizes[p];
    b.dst_start.assign(x_shape.size(), 0);
    region_copy({b}, parts[p], b.extent, 4);
    off += sizes[p];
  }
}

void gather(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices, const float *data,
            float *y, int64_t global_dim, int64_t index_base) {
  int64_t outer, dim, inner;
  host::gather_view(data_shape, axis, outer, dim, inner);
  int64_t n = outer * num_indices * inner;
  if (n == 0) return;
  CLEAVE_LAUNCH(gather_kernel, detail::grid_for(n), detail::kThreads, outer, num_indices, inner, dim, indices, data,
                y, global_dim, index_base, detail::error_flag());
  detail::check_error_flag("gather: an index is out of range [" + std::to_string(-global_dim) + ", " +
                           std::to_string(global_dim) + ")");
}

void gather_backward(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices,
                     const float *dy, float *ddata, int64_t global_dim, int64_t index_base) {
  int64_t outer, dim, inner;
  host::gather_view(data_shape, axis, outer, dim, inner);
  fill_bytes(ddata, 0, outer * dim * inner * 4);
  int64_t n = outer * num_indices * inner;
  if (n == 0) return;
  CLEAVE_LAUNCH(gather_backward_kernel, detail::grid_for(n), detail::kThreads, outer, num_indices, inner, dim,
                indices, dy, ddata, global_dim, index_base, detail::error_flag());
  detail::check_error_flag("gather: an index is out of range [" + std::to_string(-global_dim) + ", " +
                           std::to_string(global_dim) + ")");
}

void region_copy(const std::vector<Box> &boxes, void *dst, const Dims &dst_shape, size_t elem_size) {
  size_t r = dst_shape.size();
  // Element sizes other than 1/2/4/8 (and rank 0) become a trailing dim of bytes.
  bool bytewise = elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8;
  Dims dshape = dst_shape;
  if (bytewise || r == 0) dshape.push_back(static_cast<int64_t>(bytewise ? elem_size : 1));
  size_t unit = bytewise ? 1 : elem_size;
  BoxBatch batch;
  batch.dst_st = small(strides_of(dshape), "region_copy");
  for (const Box &b : boxes) {
    if (b.src_shape.size() != r || b.src_start.size() != r || b.extent.size() != r || b.dst_start.size() != r)
      fail("region_copy: a box's rank differs from the destination's");
    for (size_t d = 0; d < r; ++d)
      if (b.extent[d] < 0 || b.src_start[d] < 0 || b.src_start[d] + b.extent[d] > b.src_shape[d] ||
          b.dst_start[d] < 0 || b.dst_start[d] + b.extent[d] > dst_shape[d])
        fail("region_copy: box dim " + std::to_string(d) + " lies outside its source or the destination");
    Dims sshape = b.src_shape, extent = b.extent, sstart = b.src_start, dstart = b.dst_start;
    if (bytewise || r == 0) {
      int64_t tail = bytewise ? static_cast<int64_t>(elem_size) : 1;
      sshape.push_back(tail);
      extent.push_back(tail);
      sstart.push_back(0);
      dstart.push_back(0);
    }
    int64_t count = detail::product(extent);
    if (count == 0) continue;
    Dims sst = strides_of(sshape), dst_st = strides_of(dshape);
    DeviceBox db;
    db.src = static_cast<const char *>(b.src);
    for (size_t d = 0; d < sshape.size(); ++d) {
      db.src_base += sstart[d] * sst[d];
      db.dst_base += dstart[d] * dst_st[d];
    }
    db.extent = small(extent, "region_copy");
    db.src_st = small(sst, "region_copy");
    db.first = batch.total;
    batch.box[batch.count++] = db;
    batch.total += count;
    if (batch.count == kBoxesPerLaunch) {
      launch_boxes(batch, dst, unit);
      batch.count = 0;
      batch.total = 0;
    }
  }
  if (batch.count > 0) launch_boxes(batch, dst, unit);
}

}  // namespace cleave::rt
