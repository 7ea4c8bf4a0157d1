// Descriptions of InstanceNormalization and Resize and their gradients. Both work on whole (n, c) planes: the
// statistics of InstanceNorm need two passes over the spatial dims, and Resize's source positions are not affine in
// the output position (floors of real-valued coordinates), so the spatial dims are opaque; batch and channel split
// freely. InstanceNorm's parameter gradients sum over the batch (partial when it is split).
#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** Spatial vars of a plane [N, C, spatial...], made by `make` (out, sum or internal) with the usual names. */
template <typename Make>
std::vector<Var> spatial_vars(const Shape &s, Make make, const std::string &prefix = "") {
  std::vector<std::string> names = spatial_names(s.size() - 2);
  std::vector<Var> v;
  for (size_t d = 2; d < s.size(); ++d) v.push_back(make(prefix + names[d - 2], s[d]));
  return v;
}

std::vector<Ix> plane_ix(Var n, Var c, const std::vector<Var> &sp) {
  std::vector<Ix> i{n, c};
  for (Var v : sp) i.emplace_back(v);
  return i;
}

std::vector<Affine> plane_index(Var n, Var c, const std::vector<Var> &sp) {
  std::vector<Affine> i{n, c};
  for (Var v : sp) i.emplace_back(v);
  return i;
}

/** FLOPs of one output point of a resize: a multiply-add per tap combination (k^sp taps: k = 2 linear, 4 cubic), 1
 *  for nearest. */
int64_t resize_flops(const std::string &mode, size_t sp) {
  if (mode == "nearest") return 1;
  int64_t taps = 1;
  for (size_t d = 0; d < sp; ++d) taps *= mode == "cubic" ? 4 : 2;
  return 2 * taps;
}

}  // namespace

Descs describe_InstanceNormalization(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 0);
  double eps = op.attr_float("epsilon", 1e-5);
  int64_t count = 1;
  for (size_t d = 2; d < xs.size(); ++d) count *= xs[d];
  Descs out;
  const char *names[] = {"Y", "mean", "invstd"};
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot]));
      continue;
    }
    Builder b(g, op, slot, names[slot]);
    Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
    Operand x = b.in(0, "X");
    if (slot == 0) {
      std::vector<Var> sp = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.out(nm, e, true); });
      E y = opaque("normalize_spatial", {x(plane_ix(n, c, sp))}, 6) * b.in(1, "scale")({c}) + b.in(2, "B")({c});
      out.push_back(std::move(b).build(plane_index(n, c, sp), Reduce::none, y));
    } else if (slot == 1) {
      std::vector<Var> sp = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.sum(nm, e); });
      out.push_back(std::move(b).build({n, c}, Reduce::sum, x(plane_ix(n, c, sp)) / E(static_cast<double>(count))));
    } else {
      std::vector<Var> sp = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.internal(nm, e); });
      out.push_back(std::move(b).build({n, c}, Reduce::none, opaque("invstd", {x(plane_ix(n, c, sp)), E(eps)}, 3)));
    }
  }
  return out;
}

Descs describe_InstanceNormalizationGrad(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 1);
  Descs out;
  const char *names[] = {"dX", "dscale", "dB"};
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot]));
      continue;
    }
    Builder b(g, op, slot, names[slot]);
    if (slot == 0) {  // needs the plane sums of dY*scale and dY*scale*xhat
      Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
      std::vector<Var> sp = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.out(nm, e, true); });
      Operand dy = b.in(0, "dY"), x = b.in(1, "X"), scale = b.in(2, "scale"), mean = b.in(3, "mean"),
              invstd = b.in(4, "invstd");
      std::vector<Ix> p = plane_ix(n, c, sp);
      out.push_back(std::move(b).build(
          plane_index(n, c, sp), Reduce::none,
          opaque("instancenorm_grad", {dy(p), x(p), scale({c}), mean({n, c}), invstd({n, c})}, 8)));
      continue;
    }
    Var c = b.out("c", xs[1]), n = b.sum("b", xs[0]);
    std::vector<Var> sp = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.sum(nm, e); });
    Operand dy = b.in(0, "dY");
    std::vector<Ix> p = plane_ix(n, c, sp);
    E body = dy(p);
    if (slot == 1) body = body * (b.in(1, "X")(p) - b.in(3, "mean")({n, c})) * b.in(4, "invstd")({n, c});
    out.push_back(std::move(b).build({c}, Reduce::sum, body));
  }
  return out;
}

Descs describe_Resize(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  const Shape &xs = in_shape(g, op, 0), &ys = b.out_shape();
  const std::string &mode = op.attr_string("mode");
  Var n = b.out("b", ys[0]), c = b.out("c", ys[1]);
  std::vector<Var> o = spatial_vars(ys, [&](const std::string &nm, int64_t e) { return b.out(nm, e, true); });
  std::vector<Var> i = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.internal(nm, e); }, "i");
  Operand x = b.in(0, "X");
  // The opaque function sits in post, which is counted once per output point: each output reads its taps, not the
  // whole plane the internal vars range over.
  return {std::move(b).build(plane_index(n, c, o), Reduce::none, x(plane_ix(n, c, i)),
                             opaque("resize_" + mode, {reduced()}, resize_flops(mode, xs.size() - 2)))};
}

Descs describe_ResizeGrad(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "dX");
  const Shape &ys = in_shape(g, op, 0), &xs = b.out_shape();
  const std::string &mode = op.attr_string("mode");
  Var n = b.out("b", xs[0]), c = b.out("c", xs[1]);
  std::vector<Var> h = spatial_vars(xs, [&](const std::string &nm, int64_t e) { return b.out(nm, e, true); });
  std::vector<Var> o = spatial_vars(ys, [&](const std::string &nm, int64_t e) { return b.internal(nm, e); }, "o");
  Operand dy = b.in(0, "dY");
  // post is counted per dX point: the scatter adds every dY point's taps, (dY plane / dX plane) * taps per dX point.
  int64_t in_plane = 1, out_plane = 1;
  for (size_t d = 2; d < xs.size(); ++d) {
    in_plane *= xs[d];
    out_plane *= ys[d];
  }
  int64_t taps = resize_flops(mode, xs.size() - 2) * ((out_plane + in_plane - 1) / in_plane);
  return {std::move(b).build(plane_index(n, c, h), Reduce::none, dy(plane_ix(n, c, o)),
                             opaque("resize_" + mode + "_grad", {reduced()}, taps))};
}

}  // namespace cleave::describe
