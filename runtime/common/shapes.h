#pragma once
// Argument checks and index geometry every backend computes the same way on the host (not part of the API).
#include "cleave/rt.h"

namespace cleave::rt::host {

/** fail()s unless the conv's spatial ranks agree, group divides both channel counts, and every y[d] is the output
 *  extent of its window (floor division: a block's local pads may be negative, rt.h). */
void check_conv_shape(const ConvShape &s);
/** fail()s unless the pool's spatial ranks agree, spatial block fields included (empty = a whole op). */
void check_pool_ranks(const PoolShape &s);
/** Gather's data `shape` seen as [outer, dim, inner] around `axis`; fail()s on an axis out of range. */
void gather_view(const Dims &shape, int64_t axis, int64_t &outer, int64_t &dim, int64_t &inner);
/** fail()s unless view_copy's source strides and destination strides (y_strides, when not null) have shape's rank
 *  and no size or stride is negative. */
void check_view_copy(const Dims &shape, const Dims &strides, const Dims *y_strides);
/** The number of elements slice() takes on one dim; fail()s on step 0. */
int64_t slice_len(int64_t start, int64_t end, int64_t step);
/** Slice geometry: output shape, input strides per output dim, and the flat input offset of the first element. */
void slice_geometry(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, Dims &out, Dims &st,
                    int64_t &base);

/** One spatial dim of a resize: output o reads the `k` inputs idx[o * k + j] with weights w[o * k + j], j < k (k = 1
 *  for nearest, 2 for linear, 4 for cubic; indices already clamped to the edge). */
struct ResizeTaps {
  int k = 1;
  std::vector<int64_t> idx;
  std::vector<double> w;
};
/** The taps of every spatial dim of `s` (rt.h's ResizeShape); fail()s on inconsistent ranks or sizes. */
std::vector<ResizeTaps> resize_taps(const ResizeShape &s);

/** fail()s (naming `what`) unless ind_shape has data_shape's rank, axis is a dim of it and ind_shape is no larger off
 *  the axis (gather_elements, scatter_elements). */
void check_elementwise_indices(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const char *what);

/** gather_nd's geometry: `batches` walked together, `tuples` index tuples of `depth` coordinates per batch, each
 *  addressing a slice of `slice` elements among `per_batch` (data's elements per batch); index_dims = the `depth` dims
 *  the tuples index. fail()s on inconsistent shapes. */
struct GatherNdView {
  int64_t batches = 1, tuples = 1, depth = 0, slice = 1, per_batch = 1;
  Dims index_dims;
};
GatherNdView gather_nd_view(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims);

}  // namespace cleave::rt::host
