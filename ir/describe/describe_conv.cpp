// Descriptions of the windowed kinds: Conv, pools and their gradients. Windows are affine indexes
// (y*stride + ky*dilation - pad); out-of-range reads are the padding (0, or -inf for MaxPool). Gradients with
// respect to a window's input are written as gathers with an exact division by the stride (transposed windows).
#include <limits>

#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

struct ConvDims {
  int64_t group = 1, cg = 0, mg = 0;  // channels per group of X (cg) and of Y (mg)
  WindowGeometry geo;
  size_t sp = 0;
};

ConvDims conv_dims(const Op &op, const Shape &x, const Shape &w) {
  ConvDims c;
  c.group = op.attr_int("group", 1);
  c.cg = x[1] / c.group;
  c.mg = w[0] / c.group;
  c.geo = window_geometry(op, std::vector<int64_t>(w.begin() + 2, w.end()));
  c.sp = w.size() - 2;
  return c;
}

/** Window position of spatial dim d: o*stride + k*dilation - pad_begin. */
Affine window(const WindowGeometry &geo, size_t d, Var o, Var k) {
  return o * geo.strides[d] + k * geo.dilations[d] - geo.pads[d];
}

/** The output position of a window containing input position h at tap k: (h + pad - k*dilation) / stride. */
Ix transposed_window(const WindowGeometry &geo, size_t d, Var h, Var k) {
  Affine a = Affine(h) + geo.pads[d] - k * geo.dilations[d];
  return geo.strides[d] == 1 ? Ix(a) : Ix::divided(a, geo.strides[d]);
}

/** Channel index g*per + c, or c when there is one group. */
Affine grouped(bool has_groups, Var g, int64_t per, Var c) { return has_groups ? g * per + c : Affine(c); }

struct PoolDims {
  WindowGeometry geo;
  size_t sp = 0;
  int64_t taps = 1;
  /** Some window reaches past the padded input (ceil_mode): a count_include_pad divisor is not the kernel size. */
  bool overhang = false;
};

PoolDims pool_dims(const Op &op, const Shape &x, const Shape &y) {
  PoolDims p;
  p.geo = window_geometry(op, op.attr_ints("kernel_shape"));
  p.sp = x.size() - 2;
  for (size_t d = 0; d < p.sp; ++d) {
    p.taps *= p.geo.kernel[d];
    int64_t last = (y[d + 2] - 1) * p.geo.strides[d] + (p.geo.kernel[d] - 1) * p.geo.dilations[d] - p.geo.pads[d];
    if (last >= x[d + 2] + p.geo.pads[d + p.sp]) p.overhang = true;
  }
  return p;
}

}  // namespace

Descs describe_Conv(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0), &ws = in_shape(g, op, 1), &ys = b.out_shape();
  ConvDims c = conv_dims(op, xs, ws);
  bool groups = c.group > 1;
  std::vector<std::string> names = spatial_names(c.sp);
  Var n = b.out("b", ys[0]);
  Var gv = groups ? b.out("g", c.group) : Var{};
  Var co = b.out("co", groups ? c.mg : ws[0]);
  std::vector<Var> o, k;
  for (size_t d = 0; d < c.sp; ++d) o.push_back(b.out(names[d], ys[d + 2]));
  Var ci = b.sum("ci", c.cg);
  for (size_t d = 0; d < c.sp; ++d) k.push_back(b.sum("k" + names[d], ws[d + 2]));
  Operand x = b.in(0, "X"), w = b.in(1, "W");
  Affine co_full = grouped(groups, gv, c.mg, co);
  std::vector<Ix> xi{n, grouped(groups, gv, c.cg, ci)}, wi{co_full, ci};
  for (size_t d = 0; d < c.sp; ++d) {
    xi.emplace_back(window(c.geo, d, o[d], k[d]));
    wi.emplace_back(k[d]);
  }
  std::vector<Affine> yi{n, co_full};
  for (Var v : o) yi.emplace_back(v);
  E post;
  if (op.input(2) != kNoTensor) post = reduced() + b.in(2, "B")[{co_full}];
  return {std::move(b).build(yi, Reduce::sum, x(xi) * w(wi), post)};
}

namespace {

/** A Conv's data gradient: out[b, ci, h] = sum(co, k) in[b, co, (h + pad - k*dil) / s] * W[co, ci, k], for ConvGradData
 *  (in = dY, out = dX) and ConvTranspose (in = X, out = Y, with a bias; its vars named for its own channels: the
 *  output channel co is ConvGradData's ci). */
Description conv_data_gradient(const Graph &g, const Op &op, const char *in_name, const char *out_name, bool transpose) {
  Builder b(g, op, 0, out_name);
  const Shape &ws = in_shape(g, op, 1), &xs = b.out_shape();
  ConvDims c = conv_dims(op, xs, ws);
  bool groups = c.group > 1;
  std::vector<std::string> names = spatial_names(c.sp);
  Var n = b.out("b", xs[0]);
  Var gv = groups ? b.out("g", c.group) : Var{};
  Var ci = b.out(transpose ? "co" : "ci", c.cg);
  std::vector<Var> h, k;
  for (size_t d = 0; d < c.sp; ++d) h.push_back(b.out(names[d], xs[d + 2]));
  Var co = b.sum(transpose ? "ci" : "co", groups ? c.mg : ws[0]);
  for (size_t d = 0; d < c.sp; ++d) k.push_back(b.sum("k" + names[d], ws[d + 2]));
  Operand dy = b.in(0, in_name), w = b.in(1, "W");
  Affine co_full = grouped(groups, gv, c.mg, co);
  Affine ci_full = grouped(groups, gv, c.cg, ci);
  std::vector<Ix> yi{n, co_full}, wi{co_full, ci};
  for (size_t d = 0; d < c.sp; ++d) {
    yi.push_back(transposed_window(c.geo, d, h[d], k[d]));
    wi.emplace_back(k[d]);
  }
  std::vector<Affine> xi{n, ci_full};
  for (Var v : h) xi.emplace_back(v);
  E post;
  if (transpose && op.input(2) != kNoTensor) post = reduced() + b.in(2, "B")[{ci_full}];
  return std::move(b).build(xi, Reduce::sum, dy(yi) * w(wi), post);
}

}  // namespace

Descs describe_ConvGradData(const Graph &g, const Op &op) { return {conv_data_gradient(g, op, "dY", "dX", false)}; }

Descs describe_ConvTranspose(const Graph &g, const Op &op) { return {conv_data_gradient(g, op, "X", "Y", true)}; }

Descs describe_ConvGradFilter(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "dW");
  const Shape &ys = in_shape(g, op, 0), &xs = in_shape(g, op, 1), &ws = b.out_shape();
  ConvDims c = conv_dims(op, xs, ws);
  bool groups = c.group > 1;
  std::vector<std::string> names = spatial_names(c.sp);
  Var gv = groups ? b.out("g", c.group) : Var{};
  Var co = b.out("co", groups ? c.mg : ws[0]);
  Var ci = b.out("ci", c.cg);
  std::vector<Var> k, o;
  for (size_t d = 0; d < c.sp; ++d) k.push_back(b.out("k" + names[d], ws[d + 2]));
  Var n = b.sum("b", xs[0]);
  for (size_t d = 0; d < c.sp; ++d) o.push_back(b.sum(names[d], ys[d + 2]));
  Operand dy = b.in(0, "dY"), x = b.in(1, "X");
  Affine co_full = grouped(groups, gv, c.mg, co);
  std::vector<Ix> yi{n, co_full}, xi{n, grouped(groups, gv, c.cg, ci)};
  for (size_t d = 0; d < c.sp; ++d) {
    yi.emplace_back(o[d]);
    xi.emplace_back(window(c.geo, d, o[d], k[d]));
  }
  std::vector<Affine> wi{co_full, ci};
  for (Var v : k) wi.emplace_back(v);
  return {std::move(b).build(wi, Reduce::sum, dy(yi) * x(xi))};
}

Descs describe_MaxPool(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 0);
  Descs out;
  for (int slot = 0; slot < 2; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, slot == 0 ? "Y" : "Indices"));
      continue;
    }
    Builder b(g, op, slot, slot == 0 ? "Y" : "Indices");
    const Shape &ys = b.out_shape();
    PoolDims p = pool_dims(op, xs, ys);
    std::vector<std::string> names = spatial_names(p.sp);
    Var n = b.out("b", ys[0]), c = b.out("c", ys[1]);
    std::vector<Var> o, k;
    for (size_t d = 0; d < p.sp; ++d) o.push_back(b.out(names[d], ys[d + 2]));
    for (size_t d = 0; d < p.sp; ++d) k.push_back(b.sum("k" + names[d], p.geo.kernel[d]));
    Operand x = b.in(0, "X");
    std::vector<Ix> xi{n, c};
    for (size_t d = 0; d < p.sp; ++d) xi.emplace_back(window(p.geo, d, o[d], k[d]));
    std::vector<Affine> yi{n, c};
    for (Var v : o) yi.emplace_back(v);
    E xa = x(xi, -std::numeric_limits<double>::infinity());
    if (slot == 0) {
      out.push_back(std::move(b).build(yi, Reduce::max, xa));
    } else if (op.attr_int("storage_order", 0) == 0) {
      out.push_back(std::move(b).build(yi, Reduce::argmax, xa));
    } else {  // column-major flat indices: not an affine image of the row-major argmax
      out.push_back(std::move(b).build(yi, Reduce::argmax, opaque("colmajor_index", {xa})));
    }
  }
  return out;
}

Descs describe_MaxPoolGrad(const Graph &g, const Op &op) {
  // Each dY goes to its window's argmax: which window taps route to an input position depends on X's values over
  // whole windows, so the spatial dims are opaque.
  Builder b(g, op, 0, "dX");
  const Shape &ys = in_shape(g, op, 0), &xs = b.out_shape();
  PoolDims p = pool_dims(op, xs, ys);
  std::vector<std::string> names = spatial_names(p.sp);
  Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
  std::vector<Var> h, k;
  for (size_t d = 0; d < p.sp; ++d) h.push_back(b.out(names[d], xs[d + 2], true));
  for (size_t d = 0; d < p.sp; ++d) k.push_back(b.internal("k" + names[d], p.geo.kernel[d]));
  Operand dy = b.in(0, "dY"), x = b.in(1, "X");
  std::vector<Ix> yi{n, c}, xi{n, c};
  for (size_t d = 0; d < p.sp; ++d) {
    yi.push_back(transposed_window(p.geo, d, h[d], k[d]));
    xi.emplace_back(h[d]);
  }
  std::vector<Affine> out{n, c};
  for (Var v : h) out.emplace_back(v);
  return {std::move(b).build(out, Reduce::none, opaque("route_to_argmax", {dy(yi), x(xi)}, 2))};
}

Descs describe_AveragePool(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0), &ys = b.out_shape();
  PoolDims p = pool_dims(op, xs, ys);
  bool include_pad = op.attr_int("count_include_pad", 0) != 0;
  std::vector<std::string> names = spatial_names(p.sp);
  Var n = b.out("b", ys[0]), c = b.out("c", ys[1]);
  std::vector<Var> o, k;
  for (size_t d = 0; d < p.sp; ++d) o.push_back(b.out(names[d], ys[d + 2]));
  for (size_t d = 0; d < p.sp; ++d) k.push_back(b.sum("k" + names[d], p.geo.kernel[d]));
  Operand x = b.in(0, "X");
  std::vector<Ix> xi{n, c};
  for (size_t d = 0; d < p.sp; ++d) xi.emplace_back(window(p.geo, d, o[d], k[d]));
  std::vector<Affine> yi{n, c};
  for (Var v : o) yi.emplace_back(v);
  if (!include_pad) return {std::move(b).build(yi, Reduce::mean, x(xi))};
  if (!p.overhang) return {std::move(b).build(yi, Reduce::sum, x(xi) / E(static_cast<double>(p.taps)))};
  return {std::move(b).build(yi, Reduce::sum, x(xi) * opaque("inv_padded_window_count", {}, 0))};
}

Descs describe_AveragePoolGrad(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "dX");
  const Shape &ys = in_shape(g, op, 0), &xs = b.out_shape();
  PoolDims p = pool_dims(op, xs, ys);
  bool include_pad = op.attr_int("count_include_pad", 0) != 0;
  std::vector<std::string> names = spatial_names(p.sp);
  Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
  std::vector<Var> h, k;
  for (size_t d = 0; d < p.sp; ++d) h.push_back(b.out(names[d], xs[d + 2]));
  for (size_t d = 0; d < p.sp; ++d) k.push_back(b.sum("k" + names[d], p.geo.kernel[d]));
  Operand dy = b.in(0, "dY");
  std::vector<Ix> yi{n, c};
  for (size_t d = 0; d < p.sp; ++d) yi.push_back(transposed_window(p.geo, d, h[d], k[d]));
  std::vector<Affine> out{n, c};
  for (Var v : h) out.emplace_back(v);
  // The divisor of the window a tap belongs to depends on that window's position only (not on data).
  E divisor = include_pad && !p.overhang ? E(1.0 / static_cast<double>(p.taps))
                                         : opaque(include_pad ? "inv_padded_window_count" : "inv_window_count", {}, 0);
  return {std::move(b).build(out, Reduce::sum, dy(yi) * divisor)};
}

Descs describe_GlobalAveragePool(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0);
  std::vector<std::string> names = spatial_names(xs.size() - 2);
  Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
  std::vector<Ix> xi{n, c};
  std::vector<Affine> yi{n, c};
  int64_t count = 1;
  for (size_t d = 2; d < xs.size(); ++d) {
    xi.emplace_back(b.sum(names[d - 2], xs[d]));
    yi.emplace_back(int64_t{0});
    count *= xs[d];
  }
  Operand x = b.in(0, "X");
  return {std::move(b).build(yi, Reduce::sum, x(xi) / E(static_cast<double>(count)))};
}

Descs describe_GlobalAveragePoolGrad(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "dX");
  const Shape &xs = b.out_shape();
  std::vector<std::string> names = spatial_names(xs.size() - 2);
  Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
  std::vector<Ix> yi{n, c};
  std::vector<Affine> xi{n, c};
  int64_t count = 1;
  for (size_t d = 2; d < xs.size(); ++d) {
    xi.emplace_back(b.out(names[d - 2], xs[d]));
    yi.emplace_back(int64_t{0});
    count *= xs[d];
  }
  Operand dy = b.in(0, "dY");
  return {std::move(b).build(xi, Reduce::none, dy(yi) / E(static_cast<double>(count)))};
}

}  // namespace cleave::describe
