// GatherElements, ScatterElements and GatherND (rt.h), as the interpreter computes them (ir/interp/gather_ops.cpp);
// cuda/gather_ops.cu runs the same index arithmetic one element per thread.
#include <cstring>

#include "cleave/rt.h"
#include "common/shapes.h"

namespace cleave::rt {
namespace {

/** An index into a dim of `dim` elements, made non-negative; fail()s outside [-dim, dim). */
int64_t wrapped(int64_t g, int64_t dim, const char *what) {
  if (g < -dim || g >= dim)
    fail(std::string(what) + ": index " + std::to_string(g) + " is out of range [" + std::to_string(-dim) + ", " +
         std::to_string(dim) + ")");
  return g < 0 ? g + dim : g;
}

/** Calls f(data_flat, p) for every p of ind_shape: the data element at p's coordinates, p[axis] = indices[p]. */
template <typename F>
void for_each_element_index(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                            const char *what, F f) {
  host::check_elementwise_indices(data_shape, ind_shape, axis, what);
  size_t rank = data_shape.size(), a = static_cast<size_t>(axis);
  Dims st(rank, 1);
  for (size_t d = rank; d-- > 1;) st[d - 1] = st[d] * data_shape[d];
  int64_t n = 1;
  for (int64_t v : ind_shape) n *= v;
  Dims idx(rank, 0);
  for (int64_t p = 0; p < n; ++p) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (d == a ? wrapped(indices[p], data_shape[a], what) : idx[d]) * st[d];
    f(off, p);
    for (size_t d = rank; d-- > 0;) {  // next row-major coordinate of ind_shape
      if (++idx[d] < ind_shape[d]) break;
      idx[d] = 0;
    }
  }
}

/** Calls f(data_flat, y_flat) for every element gather_nd writes. */
template <typename F>
void for_each_gather_nd(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
                        F f) {
  host::GatherNdView v = host::gather_nd_view(data_shape, ind_shape, batch_dims);
  for (int64_t bt = 0; bt < v.batches * v.tuples; ++bt) {
    const int64_t *tuple = indices + bt * v.depth;
    int64_t off = 0;
    for (int64_t c = 0; c < v.depth; ++c)
      off = off * v.index_dims[static_cast<size_t>(c)] +
            wrapped(tuple[c], v.index_dims[static_cast<size_t>(c)], "gather_nd");
    int64_t src = (bt / v.tuples) * v.per_batch + off * v.slice;
    for (int64_t s = 0; s < v.slice; ++s) f(src + s, bt * v.slice + s);
  }
}

}  // namespace

void gather_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                     const real *data, real *y) {
  for_each_element_index(data_shape, ind_shape, axis, indices, "gather_elements",
                         [&](int64_t src, int64_t p) { y[p] = data[src]; });
}

void scatter_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                      const real *data, const real *updates, real *y, bool add) {
  int64_t n = 1;
  for (int64_t v : data_shape) n *= v;
  if (y != data) std::memcpy(y, data, static_cast<size_t>(n) * sizeof(real));
  for_each_element_index(data_shape, ind_shape, axis, indices, "scatter_elements", [&](int64_t dst, int64_t p) {
    y[dst] = add ? y[dst] + updates[p] : updates[p];
  });
}

void gather_nd(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
               const real *data, real *y) {
  for_each_gather_nd(data_shape, ind_shape, batch_dims, indices, [&](int64_t src, int64_t dst) { y[dst] = data[src]; });
}

void gather_nd_backward(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
                        const real *dy, real *ddata) {
  int64_t n = 1;
  for (int64_t v : data_shape) n *= v;
  std::memset(ddata, 0, static_cast<size_t>(n) * sizeof(real));
  for_each_gather_nd(data_shape, ind_shape, batch_dims, indices,
                     [&](int64_t src, int64_t dst) { ddata[src] += dy[dst]; });
}

}  // namespace cleave::rt
