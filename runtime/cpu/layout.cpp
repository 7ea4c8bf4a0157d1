// Data movement: broadcast and its adjoint, transpose, slice, concat/split, and region copy (Tofu's MultiFetch).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cleave/rt.h"
#include "cpu/internal.h"
#include "common/index_kernels.h"
#include "common/shapes.h"

namespace cleave::rt {
namespace {

int64_t product(const Dims &d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

/** For each dim of out_shape, the stride of the broadcast input (0 where it is repeated or absent). */
std::vector<int64_t> broadcast_strides(const Dims &in_shape, const Dims &out_shape) {
  size_t r = out_shape.size();
  if (in_shape.size() > r) fail("broadcast: input rank exceeds output rank");
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    size_t din = in_shape.size() - 1 - i, dout = r - 1 - i;
    if (in_shape[din] != out_shape[dout] && in_shape[din] != 1)
      fail("broadcast: dim " + std::to_string(in_shape[din]) + " does not broadcast to " +
           std::to_string(out_shape[dout]));
    st[dout] = in_shape[din] == 1 ? 0 : s;
    s *= in_shape[din];
  }
  return st;
}

/** Calls f(out_flat, in_flat) over out_shape with input strides `st`, in output order; the inner loop is written for
 *  the contiguous (stride 1) case apart, so the compiler vectorises it (and the repeated, stride 0, one). */
template <typename F>
void walk(const Dims &out_shape, const std::vector<int64_t> &st, F f) {
  detail::for_each_row(out_shape, st, [&](int64_t o, int64_t in, int64_t n, int64_t s) {
    if (s == 1)
      for (int64_t j = 0; j < n; ++j) f(o + j, in + j);
    else
      for (int64_t j = 0; j < n; ++j) f(o + j, in + j * s);
  });
}

/** y = x permuted, T-sized elements, for the walks where the input's innermost dim is not the output's: blocks of
 *  kTile x kTile over the two dims that are innermost in the output (`a`, input stride sa) and in the input (`b`,
 *  input stride 1), so both sides are read and written a cache line at a time. `out`/`ms` are merged (hd::coalesce_dims). */
template <typename T>
void transpose_tiled(const Dims &out, const std::vector<int64_t> &ms, size_t b, const T *x, T *y) {
  constexpr int64_t kTile = 32;
  size_t r = out.size(), a = r - 1;
  std::vector<int64_t> ost(r);
  int64_t s = 1;
  for (size_t d = r; d-- > 0;) {
    ost[d] = s;
    s *= out[d];
  }
  // The odometer runs over every dim but a and b.
  std::vector<int64_t> idx(r, 0);
  int64_t outer = product(out) / (out[a] * out[b]);
  int64_t o0 = 0, i0 = 0;
  for (int64_t it = 0; it < outer; ++it) {
    for (int64_t bb = 0; bb < out[b]; bb += kTile)
      for (int64_t aa = 0; aa < out[a]; aa += kTile) {
        int64_t be = std::min(out[b], bb + kTile), ae = std::min(out[a], aa + kTile);
        for (int64_t j = bb; j < be; ++j)
          for (int64_t i = aa; i < ae; ++i) y[o0 + j * ost[b] + i] = x[i0 + i * ms[a] + j];
      }
    for (size_t d = r; d-- > 0;) {
      if (d == a || d == b) continue;
      o0 += ost[d];
      i0 += ms[d];
      if (++idx[d] < out[d]) break;
      o0 -= ost[d] * idx[d];
      i0 -= ms[d] * idx[d];
      idx[d] = 0;
    }
  }
}

template <typename T>
void transpose_as(const Dims &out_shape, const std::vector<int64_t> &st, const T *x, T *y) {
  Dims out = out_shape;
  std::vector<int64_t> ms = st;
  hd::coalesce_dims(out, ms);
  size_t r = out.size();
  if (r >= 2 && ms[r - 1] != 1)
    for (size_t d = 0; d + 1 < r; ++d)
      if (ms[d] == 1) return transpose_tiled(out, ms, d, x, y);
  walk(out_shape, st, [&](int64_t o, int64_t i) { y[o] = x[i]; });
}

/** y[sum i[d] * ys[d]] = x[sum i[d] * xs[d]] over shape: rows of the innermost dim, an odometer over the others. */
template <typename T>
void copy_views(const Dims &shape, const Dims &xs, const Dims &ys, const void *from, void *to) {
  const T *x = static_cast<const T *>(from);
  T *y = static_cast<T *>(to);
  size_t r = shape.size();
  if (r == 0) {
    y[0] = x[0];
    return;
  }
  const int64_t inner = shape[r - 1], xi = xs[r - 1], yi = ys[r - 1];
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0, rows = product(shape) / inner; row < rows; ++row) {
    int64_t xo = 0, yo = 0;
    for (size_t d = 0; d + 1 < r; ++d) {
      xo += idx[d] * xs[d];
      yo += idx[d] * ys[d];
    }
    if (xi == 1 && yi == 1)
      for (int64_t j = 0; j < inner; ++j) y[yo + j] = x[xo + j];
    else
      for (int64_t j = 0; j < inner; ++j) y[yo + j * yi] = x[xo + j * xi];
    for (size_t d = r - 1; d-- > 0;)
      if (++idx[d] < shape[d]) break;
      else idx[d] = 0;
  }
}

}  // namespace

void copy(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void fill_bytes(void *dst, uint8_t value, int64_t bytes) {
  if (bytes > 0) std::memset(dst, value, static_cast<size_t>(bytes));
}

void broadcast(const Dims &in_shape, const Dims &out_shape, const real *x, real *y) {
  walk(out_shape, broadcast_strides(in_shape, out_shape), [&](int64_t o, int64_t i) { y[o] = x[i]; });
}

void reduce_to_shape(const Dims &in_shape, const Dims &out_shape, const real *x, real *y) {
  // The adjoint of broadcast(out_shape -> in_shape): accumulate in double, then round once.
  std::vector<double> acc(static_cast<size_t>(product(out_shape)), 0.0);
  walk(in_shape, broadcast_strides(out_shape, in_shape), [&](int64_t o, int64_t i) { acc[static_cast<size_t>(i)] += x[o]; });
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<real>(acc[i]);
}

void transpose(const Dims &shape, const Dims &perm, const real *x, real *y, size_t elem_size) {
  size_t r = shape.size();
  if (perm.size() != r) fail("transpose: perm rank differs from the shape's");
  std::vector<int64_t> in_st(r), st(r);
  Dims out(r);
  int64_t s = 1;
  for (size_t d = r; d-- > 0;) {
    in_st[d] = s;
    s *= shape[d];
  }
  std::vector<bool> seen(r, false);
  for (size_t d = 0; d < r; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(r) || seen[static_cast<size_t>(perm[d])])
      fail("transpose: perm is not a permutation");
    seen[static_cast<size_t>(perm[d])] = true;
    out[d] = shape[static_cast<size_t>(perm[d])];
    st[d] = in_st[static_cast<size_t>(perm[d])];
  }
  switch (elem_size) {
    case 1: return transpose_as(out, st, reinterpret_cast<const uint8_t *>(x), reinterpret_cast<uint8_t *>(y));
    case 2: return transpose_as(out, st, reinterpret_cast<const uint16_t *>(x), reinterpret_cast<uint16_t *>(y));
    case 4: return transpose_as(out, st, reinterpret_cast<const uint32_t *>(x), reinterpret_cast<uint32_t *>(y));
    case 8: return transpose_as(out, st, reinterpret_cast<const uint64_t *>(x), reinterpret_cast<uint64_t *>(y));
  }
  const char *src = reinterpret_cast<const char *>(x);
  char *dst = reinterpret_cast<char *>(y);
  walk(out, st, [&](int64_t o, int64_t i) { std::memcpy(dst + o * elem_size, src + i * elem_size, elem_size); });
}

void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y, size_t elem_size) {
  host::check_view_copy(shape, strides, nullptr);
  if (product(shape) == 0) return;
  const char *src = static_cast<const char *>(x) + offset * static_cast<int64_t>(elem_size);
  switch (elem_size) {
    case 1: return transpose_as(shape, strides, reinterpret_cast<const uint8_t *>(src), static_cast<uint8_t *>(y));
    case 2: return transpose_as(shape, strides, reinterpret_cast<const uint16_t *>(src), static_cast<uint16_t *>(y));
    case 4: return transpose_as(shape, strides, reinterpret_cast<const uint32_t *>(src), static_cast<uint32_t *>(y));
    case 8: return transpose_as(shape, strides, reinterpret_cast<const uint64_t *>(src), static_cast<uint64_t *>(y));
  }
  char *dst = static_cast<char *>(y);
  walk(shape, strides, [&](int64_t o, int64_t i) { std::memcpy(dst + o * elem_size, src + i * elem_size, elem_size); });
}

void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y, const Dims &y_strides,
               int64_t y_offset, size_t elem_size) {
  host::check_view_copy(shape, strides, &y_strides);
  if (product(shape) == 0) return;
  const char *src = static_cast<const char *>(x) + offset * static_cast<int64_t>(elem_size);
  char *dst = static_cast<char *>(y) + y_offset * static_cast<int64_t>(elem_size);
  switch (elem_size) {
    case 1: return copy_views<uint8_t>(shape, strides, y_strides, src, dst);
    case 2: return copy_views<uint16_t>(shape, strides, y_strides, src, dst);
    case 4: return copy_views<uint32_t>(shape, strides, y_strides, src, dst);
    case 8: return copy_views<uint64_t>(shape, strides, y_strides, src, dst);
  }
  // Other sizes: a trailing dim of bytes.
  Dims sh = shape, xb = strides, yb = y_strides;
  for (int64_t &v : xb) v *= static_cast<int64_t>(elem_size);
  for (int64_t &v : yb) v *= static_cast<int64_t>(elem_size);
  sh.push_back(static_cast<int64_t>(elem_size));
  xb.push_back(1);
  yb.push_back(1);
  copy_views<uint8_t>(sh, xb, yb, src, dst);
}

void slice(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const real *x, real *y) {
  Dims out;
  std::vector<int64_t> st;
  int64_t base = 0;
  host::slice_geometry(shape, starts, ends, steps, out, st, base);
  walk(out, st, [&](int64_t o, int64_t i) { y[o] = x[base + i]; });
}

void slice_backward(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const real *dy,
                    real *dx) {
  Dims out;
  std::vector<int64_t> st;
  int64_t base = 0;
  host::slice_geometry(shape, starts, ends, steps, out, st, base);
  std::memset(dx, 0, static_cast<size_t>(product(shape)) * sizeof(real));
  walk(out, st, [&](int64_t o, int64_t i) { dx[base + i] = dy[o]; });
}

void concat(const std::vector<const real *> &parts, const std::vector<Dims> &shapes, int64_t axis, real *y) {
  if (parts.size() != shapes.size() || parts.empty()) fail("concat: one shape per part expected");
  size_t a = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1, total = 0;
  for (size_t d = 0; d < shapes[0].size(); ++d) {
    if (d < a) outer *= shapes[0][d];
    if (d > a) inner *= shapes[0][d];
  }
  for (const Dims &s : shapes) total += s.at(a);
  int64_t off = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    int64_t chunk = shapes[p][a] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(y + o * total * inner + off, parts[p] + o * chunk, static_cast<size_t>(chunk) * sizeof(real));
    off += chunk;
  }
}

void split(const Dims &x_shape, int64_t axis, const Dims &sizes, const real *x, const std::vector<real *> &parts) {
  if (sizes.size() != parts.size()) fail("split: one size per part expected");
  size_t a = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < x_shape.size(); ++d) {
    if (d < a) outer *= x_shape[d];
    if (d > a) inner *= x_shape[d];
  }
  int64_t off = 0, total = x_shape.at(a);
  for (size_t p = 0; p < parts.size(); ++p) {
    int64_t chunk = sizes[p] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(parts[p] + o * chunk, x + o * total * inner + off, static_cast<size_t>(chunk) * sizeof(real));
    off += chunk;
  }
  if (off != total * inner) fail("split: sizes do not add up to the axis length");
}

namespace {

/** Calls f(local_row, j) for each index j: local_row in [0, dim) where this shard holds its row, else
 *  hd::kGatherElsewhere (negative). */
template <typename F>
void for_each_local_index(const int64_t *indices, int64_t num_indices, int64_t dim, int64_t global_dim,
                          int64_t index_base, F f) {
  for (int64_t j = 0; j < num_indices; ++j) {
    int64_t row = hd::gather_local_row(indices[j], global_dim, index_base, dim);
    if (row == hd::kGatherOutOfRange)
      fail("gather: index " + std::to_string(indices[j]) + " is out of range [" + std::to_string(-global_dim) + ", " +
           std::to_string(global_dim) + ")");
    f(row, j);
  }
}

}  // namespace

void gather(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices, const real *data,
            real *y, int64_t global_dim, int64_t index_base) {
  int64_t outer, dim, inner;
  host::gather_view(data_shape, axis, outer, dim, inner);
  for_each_local_index(indices, num_indices, dim, global_dim, index_base, [&](int64_t row, int64_t j) {
    for (int64_t o = 0; o < outer; ++o) {
      real *dst = y + (o * num_indices + j) * inner;
      if (row < 0) std::memset(dst, 0, static_cast<size_t>(inner) * sizeof(real));
      else std::memcpy(dst, data + (o * dim + row) * inner, static_cast<size_t>(inner) * sizeof(real));
    }
  });
}

void gather_backward(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices,
                     const real *dy, real *ddata, int64_t global_dim, int64_t index_base) {
  int64_t outer, dim, inner;
  host::gather_view(data_shape, axis, outer, dim, inner);
  std::memset(ddata, 0, static_cast<size_t>(outer * dim * inner) * sizeof(real));
  for_each_local_index(indices, num_indices, dim, global_dim, index_base, [&](int64_t row, int64_t j) {
    if (row < 0) return;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) ddata[(o * dim + row) * inner + i] += dy[(o * num_indices + j) * inner + i];
  });
}

void region_copy(const std::vector<Box> &boxes, void *dst, const Dims &dst_shape, size_t elem_size) {
  size_t r = dst_shape.size();
  char *out = static_cast<char *>(dst);
  for (const Box &b : boxes) {
    if (b.src_shape.size() != r || b.src_start.size() != r || b.extent.size() != r || b.dst_start.size() != r)
      fail("region_copy: a box's rank differs from the destination's");
    for (size_t d = 0; d < r; ++d)
      if (b.extent[d] < 0 || b.src_start[d] < 0 || b.src_start[d] + b.extent[d] > b.src_shape[d] ||
          b.dst_start[d] < 0 || b.dst_start[d] + b.extent[d] > dst_shape[d])
        fail("region_copy: box dim " + std::to_string(d) + " lies outside its source or the destination");
    if (r == 0) {
      std::memcpy(out, b.src, elem_size);
      continue;
    }
    // Copy contiguous runs of the innermost dim; walk the outer dims with an odometer.
    std::vector<int64_t> sst(r), dst_st(r);
    int64_t ss = 1, ds = 1;
    for (size_t d = r; d-- > 0;) {
      sst[d] = ss;
      dst_st[d] = ds;
      ss *= b.src_shape[d];
      ds *= dst_shape[d];
    }
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < r; ++d) rows *= b.extent[d];
    if (rows == 0 || b.extent[r - 1] == 0) continue;
    size_t run = static_cast<size_t>(b.extent[r - 1]) * elem_size;
    std::vector<int64_t> idx(r, 0);
    const char *src = static_cast<const char *>(b.src);
    for (int64_t row = 0; row < rows; ++row) {
      int64_t so = 0, dof = 0;
      for (size_t d = 0; d < r; ++d) {
        so += (b.src_start[d] + idx[d]) * sst[d];
        dof += (b.dst_start[d] + idx[d]) * dst_st[d];
      }
      std::memcpy(out + dof * static_cast<int64_t>(elem_size), src + so * static_cast<int64_t>(elem_size), run);
      for (size_t d = r - 1; d-- > 0;)
        if (++idx[d] < b.extent[d]) break;
        else idx[d] = 0;
    }
  }
}

}  // namespace cleave::rt
