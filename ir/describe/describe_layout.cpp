// Descriptions of the data-movement kinds: Reshape, Transpose, Expand, Concat, Split, Slice, Gather and the
// backward kinds that invert them (SliceGrad, GatherGrad).
#include <algorithm>

#include "ir/describe/ops_util.h"

namespace cleave::describe {

namespace {

/** Whether dims xd[i0, i1) of xs and yd[j0, j1) of ys (equal products) factor into common pieces: walking both from
 *  the outermost, the next piece is the smaller of what is left of the current dim on each side, and it must divide
 *  the larger. */
bool common_factors(const Shape &xs, const std::vector<size_t> &xd, size_t i0, size_t i1, const Shape &ys,
                    const std::vector<size_t> &yd, size_t j0, size_t j1) {
  size_t a = i0, c = j0;
  int64_t rx = xs[xd[a]], ry = ys[yd[c]];
  while (a < i1 && c < j1) {
    int64_t f = std::min(rx, ry);
    if (f <= 0 || std::max(rx, ry) % f != 0) return false;
    rx /= f;
    ry /= f;
    if (rx == 1 && ++a < i1) rx = xs[xd[a]];
    if (ry == 1 && ++c < j1) ry = ys[yd[c]];
  }
  return a == i1 && c == j1;
}

}  // namespace

Descs describe_Reshape(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0), &ys = b.out_shape();
  std::vector<Ix> xi(xs.size(), Ix(int64_t{0}));
  std::vector<Affine> yi(ys.size(), Affine(int64_t{0}));
  bool mixed = false;
  // Dims of size 1 are indexed by 0; the others fall into groups of consecutive dims with equal products. A group
  // with a single dim on either side is affine (the single dim is the row-major flattening of the other side).
  std::vector<size_t> xd, yd;
  for (size_t d = 0; d < xs.size(); ++d)
    if (xs[d] != 1) xd.push_back(d);
  for (size_t d = 0; d < ys.size(); ++d)
    if (ys[d] != 1) yd.push_back(d);
  size_t i = 0, j = 0, names = 0;
  while (i < xd.size() && j < yd.size()) {
    size_t i0 = i, j0 = j;
    int64_t px = xs[xd[i++]], py = ys[yd[j++]];
    while (px != py) {
      if (px < py && i < xd.size()) px *= xs[xd[i++]];
      else if (py < px && j < yd.size()) py *= ys[yd[j++]];
      else break;
    }
    if (px != py || px == 0) CLEAVE_USER_ERROR(op_label(op), ": cannot reshape ", shape_str(xs), " to ", shape_str(ys));
    if (j - j0 == 1) {  // one output dim = flattening of input dims i0..i
      Affine flat;
      for (size_t t = i0; t < i; ++t) {
        Var v = b.out(generic_name(names++), xs[xd[t]]);
        xi[xd[t]] = Ix(v);
        flat = flat * xs[xd[t]] + Affine(v);
      }
      yi[yd[j0]] = flat;
    } else if (i - i0 == 1) {  // one input dim = flattening of output dims j0..j
      Affine flat;
      for (size_t t = j0; t < j; ++t) {
        Var v = b.out(generic_name(names++), ys[yd[t]]);
        yi[yd[t]] = Affine(v);
        flat = flat * ys[yd[t]] + Affine(v);
      }
      xi[xd[i0]] = Ix(flat);
    } else if (common_factors(xs, xd, i0, i, ys, yd, j0, j)) {
      // A regrouping whose dims factor into common pieces, e.g. [B, H*D] -> [B*H, D] = [B, (H, D)] -> [(B, H), D]:
      // one var per piece, outermost first; each dim on either side is the row-major flattening of its pieces.
      size_t a = i0, c = j0;
      int64_t rx = xs[xd[a]], ry = ys[yd[c]];
      std::vector<Affine> fx(i - i0, Affine(int64_t{0})), fy(j - j0, Affine(int64_t{0}));
      while (a < i && c < j) {
        int64_t f = std::min(rx, ry);
        Var v = b.out(generic_name(names++), f);
        fx[a - i0] = fx[a - i0] * f + Affine(v);
        fy[c - j0] = fy[c - j0] * f + Affine(v);
        rx /= f;
        ry /= f;
        if (rx == 1 && ++a < i) rx = xs[xd[a]];
        if (ry == 1 && ++c < j) ry = ys[yd[c]];
      }
      for (size_t t = i0; t < i; ++t) xi[xd[t]] = Ix(fx[t - i0]);
      for (size_t t = j0; t < j; ++t) yi[yd[t]] = fy[t - j0];
    } else {  // regrouping without common pieces (e.g. [6,4] -> [4,6]): not affine, so opaque
      mixed = true;
      for (size_t t = j0; t < j; ++t) yi[yd[t]] = Affine(b.out(generic_name(names++), ys[yd[t]], true));
      for (size_t t = i0; t < i; ++t) xi[xd[t]] = Ix(b.internal(generic_name(names++), xs[xd[t]]));
    }
  }
  Operand x = b.in(0, "X");
  E body = x(xi);
  if (mixed) body = opaque("reshape", {body}, 0);
  return {std::move(b).build(yi, Reduce::none, body)};
}

Descs describe_Transpose(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &ys = b.out_shape();
  size_t n = ys.size();
  std::vector<int64_t> perm(n);
  for (size_t d = 0; d < n; ++d) perm[d] = static_cast<int64_t>(n - 1 - d);
  perm = op.attr_ints("perm", perm);
  std::vector<Var> v = out_vars(b, ys);
  std::vector<Ix> xi(n, Ix(int64_t{0}));
  for (size_t d = 0; d < n; ++d) xi[static_cast<size_t>(perm[d])] = Ix(v[d]);
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, x(xi))};
}

Descs describe_Expand(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, x(bcast_ix(v, x.shape())))};
}

Descs describe_Concat(const Graph &g, const Op &op) {
  // Each input is read at the concat axis shifted by its offset; out of its range it reads 0, so the sum picks the
  // one input that covers each output position.
  Builder b(g, op, 0, "Y");
  size_t axis = static_cast<size_t>(op.attr_int("axis"));
  std::vector<Var> v = out_vars(b, b.out_shape());
  E body;
  int64_t offset = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    Operand x = b.in(static_cast<int>(i), "X" + std::to_string(i));
    std::vector<Ix> xi = ix(v);
    xi[axis] = Ix(v[axis] - offset);
    body = body ? body + x(xi) : x(xi);
    offset += x.shape()[axis];
  }
  return {std::move(b).build(idx(v), Reduce::none, body)};
}

Descs describe_Split(const Graph &g, const Op &op) {
  size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
  Descs out;
  int64_t offset = 0;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    std::string name = "Y" + std::to_string(o);
    CLEAVE_CHECK(has_out(op, o), "Split output ", o, " absent in ", op.name);
    Builder b(g, op, static_cast<int>(o), name);
    std::vector<Var> v = out_vars(b, b.out_shape());
    Operand x = b.in(0, "X");
    std::vector<Ix> xi = ix(v);
    xi[axis] = Ix(v[axis] + offset);
    offset += b.out_shape()[axis];
    out.push_back(std::move(b).build(idx(v), Reduce::none, x(xi)));
  }
  return out;
}

Descs describe_Slice(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  std::vector<SliceDim> dims = resolve_slice(op, in_shape(g, op, 0));
  std::vector<Var> v = out_vars(b, b.out_shape());
  std::vector<Ix> xi;
  for (size_t d = 0; d < dims.size(); ++d) xi.emplace_back(v[d] * dims[d].step + dims[d].start);
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, x(xi))};
}

Descs describe_SliceGrad(const Graph &g, const Op &op) {
  // dX[i] = dY[(i - start) / step] where exact and in range, else 0; a negative step as (start - i) / -step.
  Builder b(g, op, 0, "dX");
  std::vector<SliceDim> dims = resolve_slice(op, b.out_shape());
  std::vector<Var> v = out_vars(b, b.out_shape());
  std::vector<Ix> yi;
  for (size_t d = 0; d < dims.size(); ++d) {
    int64_t step = dims[d].step, start = dims[d].start;
    if (step == 1) yi.emplace_back(v[d] - start);
    else if (step > 0) yi.push_back(Ix::divided(v[d] - start, step));
    else yi.push_back(Ix::divided(Affine(start) - v[d], -step));
  }
  Operand dy = b.in(0, "dY");
  return {std::move(b).build(idx(v), Reduce::none, dy(yi))};
}

Descs describe_Gather(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
  const Shape &ds = in_shape(g, op, 0), &is = in_shape(g, op, 1);
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand data = b.in(0, "data"), indices = b.in(1, "indices");
  std::vector<Ix> ii(v.begin() + static_cast<int64_t>(axis), v.begin() + static_cast<int64_t>(axis + is.size()));
  std::vector<Ix> di;
  for (size_t d = 0; d < axis; ++d) di.emplace_back(v[d]);
  di.emplace_back(indices(ii));
  for (size_t d = axis + 1; d < ds.size(); ++d) di.emplace_back(v[d - 1 + is.size()]);
  return {std::move(b).build(idx(v), Reduce::none, data(di))};
}

Descs describe_GatherGrad(const Graph &g, const Op &op) {
  // Scatter-add as a gather: ddata[.., r, ..] = sum(j..) dY[.., j.., ..] * [indices[j..] == r (or r - dim)].
  Builder b(g, op, 0, "ddata");
  size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
  const Shape &ds = b.out_shape(), &is = in_shape(g, op, 1);
  std::vector<Var> v = out_vars(b, ds);
  std::vector<Var> j;
  for (size_t d = 0; d < is.size(); ++d) j.push_back(b.sum(generic_name(ds.size() + d), is[d]));
  Operand dy = b.in(0, "dY"), indices = b.in(1, "indices");
  std::vector<Ix> yi;
  for (size_t d = 0; d < axis; ++d) yi.emplace_back(v[d]);
  for (Var jv : j) yi.emplace_back(jv);
  for (size_t d = axis + 1; d < ds.size(); ++d) yi.emplace_back(v[d]);
  E id = indices(ix(j));
  E hit = eq(id, value_of(v[axis])) + eq(id, value_of(v[axis] - ds[axis]));
  // A scalar index (rank-0 indices) selects one row: nothing to sum over.
  return {std::move(b).build(idx(v), is.empty() ? Reduce::none : Reduce::sum, dy(yi) * hit)};
}

}  // namespace cleave::describe
