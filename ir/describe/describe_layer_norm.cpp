// Descriptions of LayerNormalization and its gradient. The statistics are over the trailing dims [axis, rank): those
// dims need two passes (mean, then variance), so they are opaque in Y and dX; the leading dims split freely, and the
// parameter gradients are sums over the leading dims (partial when those are split).
#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** Vars of X: leading dims as `lead` (output vars), trailing dims as `trail`. */
struct LnVars {
  std::vector<Var> all;
  std::vector<Affine> stat_index;  // leading vars, then 0 for every trailing dim (the statistics' shape)
  std::vector<Ix> trail_ix;        // the trailing vars alone (indexes scale, B, dscale)
};

enum class Trail { opaque_out, out, sum, internal };

LnVars ln_vars(Builder &b, const Shape &xs, size_t axis, bool lead_is_sum, Trail trail) {
  LnVars v;
  for (size_t d = 0; d < xs.size(); ++d) {
    std::string name = generic_name(d);
    Var var;
    if (d < axis) {
      var = lead_is_sum ? b.sum(name, xs[d]) : b.out(name, xs[d]);
      v.stat_index.emplace_back(var);
    } else {
      switch (trail) {
        case Trail::opaque_out: var = b.out(name, xs[d], true); break;
        case Trail::out: var = b.out(name, xs[d]); break;
        case Trail::sum: var = b.sum(name, xs[d]); break;
        case Trail::internal: var = b.internal(name, xs[d]); break;
      }
      v.stat_index.emplace_back(int64_t{0});
      v.trail_ix.emplace_back(var);
    }
    v.all.push_back(var);
  }
  return v;
}

std::vector<Ix> as_ix(const std::vector<Affine> &a) { return {a.begin(), a.end()}; }

}  // namespace

Descs describe_LayerNormalization(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 0);
  size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
  double eps = op.attr_float("epsilon", 1e-5);
  int64_t count = 1;
  for (size_t d = axis; d < xs.size(); ++d) count *= xs[d];
  Descs out;
  const char *names[] = {"Y", "mean", "invstd"};
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot]));
      continue;
    }
    Builder b(g, op, slot, names[slot]);
    Operand x = b.in(0, "X");
    if (slot == 0) {
      LnVars v = ln_vars(b, xs, axis, false, Trail::opaque_out);
      Operand scale = b.in(1, "scale");
      E y = opaque("normalize_trailing", {x(ix(v.all))}, 6) * scale(v.trail_ix);
      if (op.input(2) != kNoTensor) y = y + b.in(2, "B")(v.trail_ix);
      out.push_back(std::move(b).build(idx(v.all), Reduce::none, y));
    } else if (slot == 1) {
      LnVars v = ln_vars(b, xs, axis, false, Trail::sum);
      out.push_back(std::move(b).build(v.stat_index, Reduce::sum, x(ix(v.all)) / E(static_cast<double>(count))));
    } else {
      LnVars v = ln_vars(b, xs, axis, false, Trail::internal);
      out.push_back(std::move(b).build(v.stat_index, Reduce::none, opaque("invstd", {x(ix(v.all)), E(eps)}, 3)));
    }
  }
  return out;
}

Descs describe_LayerNormalizationGrad(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 1);
  size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
  Descs out;
  const char *names[] = {"dX", "dscale", "dB"};
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot]));
      continue;
    }
    Builder b(g, op, slot, names[slot]);
    Operand dy = b.in(0, "dY"), x = b.in(1, "X"), scale = b.in(2, "scale"), mean = b.in(3, "mean"),
            invstd = b.in(4, "invstd");
    if (slot == 0) {  // needs the trailing-dim sums of dY*scale and dY*scale*xhat
      LnVars v = ln_vars(b, xs, axis, false, Trail::opaque_out);
      std::vector<Ix> s = as_ix(v.stat_index);
      out.push_back(std::move(b).build(
          idx(v.all), Reduce::none,
          opaque("layernorm_grad", {dy(ix(v.all)), x(ix(v.all)), scale(v.trail_ix), mean(s), invstd(s)}, 8)));
      continue;
    }
    LnVars v = ln_vars(b, xs, axis, true, Trail::out);
    std::vector<Ix> s = as_ix(v.stat_index);
    E body = dy(ix(v.all));
    if (slot == 1) body = body * (x(ix(v.all)) - mean(s)) * invstd(s);
    std::vector<Affine> oi;
    for (const Ix &t : v.trail_ix) oi.push_back(t.index.affine);
    out.push_back(std::move(b).build(oi, Reduce::sum, body));
  }
  return out;
}

}  // namespace cleave::describe
