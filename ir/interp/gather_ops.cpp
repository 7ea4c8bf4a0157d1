// Element-wise and N-d indexing: GatherElements, ScatterElements, GatherND and GatherNDGrad. Indices wrap once when
// negative (ONNX); one outside [-dim, dim) is a UserError naming the op, as for Gather.
#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** Calls f(data_flat, indices_flat) for every element of indices (of data's rank, no larger off `axis`): the element
 *  of data at the indices element's position with its coordinate on `axis` replaced by its value. */
template <typename F>
void for_each_element_index(const KernelArgs &k, const Shape &data, const Value &ind, int64_t axis, F f) {
  CLEAVE_CHECK(ind.shape.size() == data.size(), k.label(), ": ranks");
  std::vector<int64_t> strides = strides_of(data), idx;
  auto a = static_cast<size_t>(axis);
  for (size_t p = 0; p < ind.data.size(); ++p) {
    unravel(static_cast<int64_t>(p), ind.shape, idx);
    idx[a] = wrapped_index(k, ind.data[p], data[a]);
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d) src += idx[d] * strides[d];
    f(src, static_cast<int64_t>(p));
  }
}

/** GatherND's loop: calls f(data_flat, y_flat) for every element of the output, for data of shape `data`. */
template <typename F>
void for_each_gather_nd(const KernelArgs &k, const Shape &data, const Value &ind, F f) {
  auto b = static_cast<size_t>(k.op.attr_int("batch_dims", 0));
  auto q = ind.shape.size();
  CLEAVE_CHECK(q >= 1 && b < q && b < data.size(), k.label(), ": batch_dims");
  auto depth = static_cast<size_t>(ind.shape[q - 1]);
  CLEAVE_CHECK(b + depth <= data.size(), k.label(), ": index depth");
  int64_t batches = 1, tuples = 1, slice = 1, per_batch = 1;
  for (size_t d = 0; d < b; ++d) batches *= data[d];
  for (size_t d = b; d + 1 < q; ++d) tuples *= ind.shape[d];
  for (size_t d = b + depth; d < data.size(); ++d) slice *= data[d];
  for (size_t d = b; d < data.size(); ++d) per_batch *= data[d];
  for (int64_t bb = 0; bb < batches; ++bb)
    for (int64_t t = 0; t < tuples; ++t) {
      auto at = static_cast<size_t>((bb * tuples + t) * static_cast<int64_t>(depth));
      int64_t off = 0;
      for (size_t c = 0; c < depth; ++c) off = off * data[b + c] + wrapped_index(k, ind.data[at + c], data[b + c]);
      for (int64_t s = 0; s < slice; ++s) f(bb * per_batch + off * slice + s, (bb * tuples + t) * slice + s);
    }
}

}  // namespace

void kernel_GatherElements(const KernelArgs &k) {
  const Value &data = k.in(0), &ind = k.in(1);
  int64_t axis = norm_axis(k, k.op.attr_int("axis", 0), static_cast<int64_t>(data.shape.size()));
  k.expect_out_shape(0, ind.shape);
  Value &y = k.out(0);
  for_each_element_index(k, data.shape, ind, axis, [&](int64_t src, int64_t p) {
    y.data[static_cast<size_t>(p)] = data.data[static_cast<size_t>(src)];
  });
}

void kernel_ScatterElements(const KernelArgs &k) {
  // Y = data, then each update in indices' row-major order: a repeated index keeps the last update (none, as ONNX's
  // reference) or the sum of them all (add).
  const Value &data = k.in(0), &ind = k.in(1), &upd = k.in(2);
  int64_t axis = norm_axis(k, k.op.attr_int("axis", 0), static_cast<int64_t>(data.shape.size()));
  CLEAVE_CHECK(upd.shape == ind.shape, k.label(), ": updates ", shape_str(upd.shape));
  k.expect_out_shape(0, data.shape);
  bool add = k.op.has_attr("reduction") && k.op.attr_string("reduction") == "add";
  Value &y = k.out(0);
  y.data = data.data;
  for_each_element_index(k, data.shape, ind, axis, [&](int64_t dst, int64_t p) {
    double u = upd.data[static_cast<size_t>(p)];
    y.data[static_cast<size_t>(dst)] = add ? y.data[static_cast<size_t>(dst)] + u : u;
  });
}

void kernel_GatherND(const KernelArgs &k) {
  const Value &data = k.in(0), &ind = k.in(1);
  Value &y = k.out(0);
  for_each_gather_nd(k, data.shape, ind, [&](int64_t src, int64_t dst) {
    y.data[static_cast<size_t>(dst)] = data.data[static_cast<size_t>(src)];
  });
}

void kernel_GatherNDGrad(const KernelArgs &k) {
  // (dY, indices) -> ddata of data's shape (the output's): scatter-add, repeated index tuples accumulate.
  const Value &dy = k.in(0), &ind = k.in(1);
  Value &dd = k.out(0);
  for_each_gather_nd(k, dd.shape, ind, [&](int64_t src, int64_t dst) {
    dd.data[static_cast<size_t>(src)] += dy.data[static_cast<size_t>(dst)];
  });
}

}  // namespace cleave::interp
