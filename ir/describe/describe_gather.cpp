// Descriptions of GatherElements, ScatterElements, GatherND and GatherNDGrad. A coordinate read from indices is a
// data-dependent index (Ix of an access, as Gather's): the dim it addresses is needed whole. Gathers are exact and
// every output var splits (each rank gathers from its block of indices). Scatters are written as gathers, Gather's
// gradient style: the target of each point is compared with the point's coordinate, summed over the scattered
// positions; the scattered dims are opaque, since a kernel writes whole lines of them.
#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** [idx == v or idx == v - dim]: a possibly negative index hits coordinate v of a dim of `dim` elements. */
E hits(const E &idx, Var v, int64_t dim) { return eq(idx, value_of(v)) + eq(idx, value_of(Affine(v) - dim)); }

}  // namespace

Descs describe_GatherElements(const Graph &g, const Op &op) {
  // Y[.., i, ..] = data[.., indices[.., i, ..], ..]
  Builder b(g, op, 0, "Y");
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand data = b.in(0, "data"), indices = b.in(1, "indices");
  std::vector<Ix> di = ix(v);
  di[axis] = indices(ix(v));
  return {std::move(b).build(idx(v), Reduce::none, data(di))};
}

Descs describe_ScatterElements(const Graph &g, const Op &op) {
  // Y[.., r, ..] = data[.., r, ..] + sum(j) (updates[.., j, ..] (- data[.., r, ..] without reduction))
  //                                          * [indices[.., j, ..] is r]
  // Without a reduction ONNX wants the targets distinct, so at most one j hits and the sum is that update's
  // difference from data. updates and indices may be smaller than data off the axis: the points they lack read 0.
  Builder b(g, op, 0, "Y");
  const Shape &s = b.out_shape();
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  bool add = op.has_attr("reduction") && op.attr_string("reduction") == "add";
  std::vector<Var> v;
  for (size_t d = 0; d < s.size(); ++d) v.push_back(b.out(generic_name(d), s[d], d == axis));
  Var j = b.sum(generic_name(s.size()), in_shape(g, op, 1)[axis], true);
  Operand data = b.in(0, "data"), indices = b.in(1, "indices"), updates = b.in(2, "updates");
  std::vector<Ix> ui = ix(v);
  ui[axis] = j;
  E upd = updates(ui);
  if (!add) upd = upd - data(ix(v));
  // A point indices lacks reads an index that hits nothing (its update reads 0 but data does not).
  E at = indices(ui, static_cast<double>(-s[axis] - 1));
  return {std::move(b).build(idx(v), Reduce::sum, upd * hits(at, v[axis], s[axis]), data(ix(v)) + reduced())};
}

namespace {

/** GatherND's dims: batch_dims b, index depth k (indices' last dim), index tuples' dims, data's sliced dims. */
struct NdDims {
  size_t b = 0, k = 0, tuple_dims = 0, rest = 0;
};
NdDims nd_dims(const Shape &data, const Shape &ind, const Op &op) {
  NdDims n;
  n.b = static_cast<size_t>(op.attr_int("batch_dims", 0));
  n.k = static_cast<size_t>(ind.back());
  n.tuple_dims = ind.size() - 1 - n.b;
  n.rest = data.size() - n.b - n.k;
  return n;
}

}  // namespace

Descs describe_GatherND(const Graph &g, const Op &op) {
  // Y[b.., t.., r..] = data[b.., indices[b.., t.., 0], .., indices[b.., t.., k-1], r..]
  Builder b(g, op, 0, "Y");
  const Shape &ds = in_shape(g, op, 0), &is = in_shape(g, op, 1);
  NdDims n = nd_dims(ds, is, op);
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand data = b.in(0, "data"), indices = b.in(1, "indices");
  std::vector<Ix> di;
  for (size_t d = 0; d < n.b; ++d) di.emplace_back(v[d]);
  for (size_t c = 0; c < n.k; ++c) {
    std::vector<Ix> ii(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n.b + n.tuple_dims));
    ii.emplace_back(static_cast<int64_t>(c));
    di.emplace_back(indices(ii));
  }
  for (size_t d = 0; d < n.rest; ++d) di.emplace_back(v[n.b + n.tuple_dims + d]);
  return {std::move(b).build(idx(v), Reduce::none, data(di))};
}

Descs describe_GatherNDGrad(const Graph &g, const Op &op) {
  // ddata[b.., x.., r..] = sum(t..) dY[b.., t.., r..] * prod(c) [indices[b.., t.., c] is x_c]; the indexed dims x are
  // opaque (the kernel scatters into whole ones), a split of the tuples t sums each rank's scatter.
  Builder b(g, op, 0, "ddata");
  const Shape &ds = b.out_shape(), &is = in_shape(g, op, 1);
  NdDims n = nd_dims(ds, is, op);
  std::vector<Var> v;
  for (size_t d = 0; d < ds.size(); ++d) v.push_back(b.out(generic_name(d), ds[d], d >= n.b && d < n.b + n.k));
  std::vector<Var> t;
  for (size_t d = 0; d < n.tuple_dims; ++d) t.push_back(b.sum(generic_name(ds.size() + d), is[n.b + d]));
  Operand dy = b.in(0, "dY"), indices = b.in(1, "indices");
  std::vector<Ix> yi, ii;
  for (size_t d = 0; d < n.b; ++d) yi.emplace_back(v[d]);
  for (Var tv : t) yi.emplace_back(tv);
  ii = yi;
  for (size_t d = 0; d < n.rest; ++d) yi.emplace_back(v[n.b + n.k + d]);
  E body = dy(yi);
  for (size_t c = 0; c < n.k; ++c) {
    std::vector<Ix> ic = ii;
    ic.emplace_back(static_cast<int64_t>(c));
    body = body * hits(indices(ic), v[n.b + c], ds[n.b + c]);
  }
  // One tuple per batch (indices of rank batch_dims + 1): nothing to sum over.
  return {std::move(b).build(idx(v), t.empty() ? Reduce::none : Reduce::sum, body)};
}

}  // namespace cleave::describe
