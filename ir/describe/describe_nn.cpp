// Descriptions of BatchNormalization, Dropout, RandomLike, the losses, and the elementwise and normalisation gradients.
// Statistics over several dims (batch mean/variance, softmax denominators, weighted-mean losses) need two passes,
// which one index expression cannot say: those dims are opaque and the computation an opaque function. Where the
// statistic is a sum that ranks can all-reduce (BatchNorm's per-channel sums, a loss's total weight), the dims are
// also synced: data parallelism splits them and the kernel synchronises (codegen/kernels_norm.cpp). A softmax
// denominator is not: its class axis stays whole.
#include <cmath>

#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** Vars b, c and spatial dims of an [N, C, ...] tensor; the non-channel ones opaque and synced (batch statistics)
 *  if asked. */
std::vector<Var> nc_vars(Builder &b, const Shape &s, bool stats_over_non_channel) {
  auto var = [&](const std::string &name, int64_t extent) {
    Var v = b.out(name, extent, stats_over_non_channel);
    return stats_over_non_channel ? b.synced(v) : v;
  };
  std::vector<Var> v{var("b", s[0]), b.out("c", s[1])};
  std::vector<std::string> names = s.size() > 2 ? spatial_names(s.size() - 2) : std::vector<std::string>{};
  for (size_t d = 2; d < s.size(); ++d) v.push_back(var(names[d - 2], s[d]));
  return v;
}

/** Channel statistic [C] of an [N, C, ...] tensor: c is an output var, the others synced reduction or internal
 *  vars (a split batch all-reduces the statistic, so it comes out whole, never partial). */
std::vector<Var> stat_vars(Builder &b, const Shape &s, bool internal, Var &c) {
  c = b.out("c", s[1]);
  auto var = [&](const std::string &name, int64_t extent) {
    return b.synced(internal ? b.internal(name, extent) : b.sum(name, extent));
  };
  std::vector<std::string> names = s.size() > 2 ? spatial_names(s.size() - 2) : std::vector<std::string>{};
  std::vector<Var> v{var("b", s[0]), c};
  for (size_t d = 2; d < s.size(); ++d) v.push_back(var(names[d - 2], s[d]));
  return v;
}

int64_t non_channel_count(const Shape &s) { return num_elements(s) / s[1]; }

std::string reduction_of(const Op &op) { return op.has_attr("reduction") ? op.attr_string("reduction") : "mean"; }

/** Vars n, d1.. of a per-element loss shape [N, d...]; internal ones (a weighted mean's total weight) are synced. */
std::vector<Var> loss_vars(Builder &b, const Shape &per, bool output, bool internal) {
  std::vector<Var> v;
  for (size_t d = 0; d < per.size(); ++d) {
    std::string name = d == 0 ? "n" : "d" + std::to_string(d);
    v.push_back(internal ? b.synced(b.internal(name, per[d])) : output ? b.out(name, per[d]) : b.sum(name, per[d]));
  }
  return v;
}

/** Index [n, c, d...] from loss vars [n, d...] and a class index. */
std::vector<Ix> with_class(const std::vector<Var> &nv, Ix c) {
  std::vector<Ix> r{nv[0], std::move(c)};
  for (size_t d = 1; d < nv.size(); ++d) r.emplace_back(nv[d]);
  return r;
}

Descs elementwise_grad(const Graph &g, const Op &op, const char *second, const std::function<E(const E &, const E &)> &f) {
  Builder b(g, op, 0, "dX");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand dy = b.in(0, "dY"), x = b.in(1, second);
  return {std::move(b).build(idx(v), Reduce::none, f(dy(ix(v)), x(ix(v))))};
}

Descs softmax_grad(const Graph &g, const Op &op, const char *fname) {
  Builder b(g, op, 0, "dX");
  const Shape &s = b.out_shape();
  size_t axis = static_cast<size_t>(op.attr_int("axis", static_cast<int64_t>(s.size()) - 1));
  std::vector<Var> v;
  for (size_t d = 0; d < s.size(); ++d) v.push_back(b.out(generic_name(d), s[d], d == axis));
  Operand dy = b.in(0, "dY"), y = b.in(1, "Y");
  return {std::move(b).build(idx(v), Reduce::none,
                             opaque(std::string(fname) + "_" + generic_name(axis), {dy(ix(v)), y(ix(v))}, 4))};
}

/** Weight of the class picked by `label` (0 for ignore_index), as a factor; null E if there is none. */
E label_weight(const Op &op, Builder &b, size_t weight_slot, const E &label_at, const E &label_ix) {
  E w;
  if (op.input(weight_slot) != kNoTensor) w = b.in(static_cast<int>(weight_slot), "weights")({Ix(label_ix)});
  if (op.has_attr("ignore_index")) {
    E keep = E(1.0) - eq(label_at, E(static_cast<double>(op.attr_int("ignore_index"))));
    w = w ? w * keep : keep;
  }
  return w;
}

/** The loss of a plain mean (no weights, no ignore_index) divides by the element count; else a weighted mean. */
bool weighted(const Op &op, size_t weight_slot) {
  return op.input(weight_slot) != kNoTensor || op.has_attr("ignore_index");
}

}  // namespace

Descs describe_BatchNormalization(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 0);
  bool training = op.attr_int("training_mode", 0) != 0;
  double eps = op.attr_float("epsilon", 1e-5), mom = op.attr_float("momentum", 0.9);
  double count = static_cast<double>(non_channel_count(xs));
  Descs out;
  if (has_out(op, 0)) {
    Builder b(g, op, 0, "Y");
    std::vector<Var> v = nc_vars(b, xs, training);
    Var c = v[1];
    Operand x = b.in(0, "X"), scale = b.in(1, "scale"), bias = b.in(2, "B");
    E xhat;
    if (training) {
      xhat = opaque("normalize_b" + std::string(xs.size() > 2 ? "_spatial" : ""), {x(ix(v))}, 6);
    } else {
      Operand mean = b.in(3, "input_mean"), var = b.in(4, "input_var");
      xhat = (x(ix(v)) - mean[{c}]) / sqrt(var[{c}] + E(eps));
    }
    out.push_back(std::move(b).build(idx(v), Reduce::none, xhat * scale[{c}] + bias[{c}]));
  } else {
    out.push_back(absent(op, 0, "Y"));
  }
  // running_mean, running_var, saved_mean, saved_invstd (training mode only).
  const char *names[] = {"running_mean", "running_var", "saved_mean", "saved_invstd"};
  for (int slot = 1; slot <= 4; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot - 1]));
      continue;
    }
    Builder b(g, op, slot, names[slot - 1]);
    if (!training && slot <= 2) {  // inference mode passes the running statistics through
      Var c = b.out("c", xs[1]);
      Operand stat = b.in(slot + 2, slot == 1 ? "input_mean" : "input_var");
      out.push_back(std::move(b).build({c}, Reduce::none, stat[{c}]));
      continue;
    }
    bool mean_like = slot == 1 || slot == 3;
    Var c;
    std::vector<Var> v = stat_vars(b, xs, !mean_like, c);
    Operand x = b.in(0, "X");
    E xa = x(ix(v));
    switch (slot) {
      case 1:
        out.push_back(std::move(b).build({c}, Reduce::sum, xa * E((1 - mom) / count),
                                         reduced() + E(mom) * b.in(3, "input_mean")[{c}]));
        break;
      case 2:
        out.push_back(std::move(b).build({c}, Reduce::none,
                                         E(mom) * b.in(4, "input_var")[{c}] + E(1 - mom) * opaque("variance", {xa}, 3)));
        break;
      case 3: out.push_back(std::move(b).build({c}, Reduce::sum, xa / E(count))); break;
      case 4: out.push_back(std::move(b).build({c}, Reduce::none, opaque("invstd", {xa, E(eps)}, 3))); break;
    }
  }
  return out;
}

Descs describe_BatchNormalizationGrad(const Graph &g, const Op &op) {
  const Shape &xs = in_shape(g, op, 1);
  Descs out;
  const char *names[] = {"dX", "dscale", "dB"};
  for (int slot = 0; slot < 3; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, names[slot]));
      continue;
    }
    Builder b(g, op, slot, names[slot]);
    if (slot == 0) {  // needs the sums of dY and dY * xhat over the batch and spatial dims
      std::vector<Var> v = nc_vars(b, xs, true);
      Var c = v[1];
      Operand dy = b.in(0, "dY"), x = b.in(1, "X"), scale = b.in(2, "scale"), mean = b.in(3, "saved_mean"),
              invstd = b.in(4, "saved_invstd");
      out.push_back(std::move(b).build(
          idx(v), Reduce::none,
          opaque("batchnorm_grad", {dy(ix(v)), x(ix(v)), scale[{c}], mean[{c}], invstd[{c}]}, 8)));
      continue;
    }
    Var c;
    std::vector<Var> v = stat_vars(b, xs, false, c);
    Operand dy = b.in(0, "dY");
    E body = dy(ix(v));
    if (slot == 1) {
      Operand x = b.in(1, "X"), mean = b.in(3, "saved_mean"), invstd = b.in(4, "saved_invstd");
      body = body * (x(ix(v)) - mean[{c}]) * invstd[{c}];
    }
    out.push_back(std::move(b).build({c}, Reduce::sum, body));
  }
  return out;
}

Descs describe_Dropout(const Graph &g, const Op &op) {
  // The keep decision of an element is a counter-based draw keyed by its global flat index (ir/rng.h), so every dim
  // can be split; the draw itself is opaque.
  const Shape &xs = in_shape(g, op, 0);
  double ratio = op.attr_float("ratio", 0.5);
  bool active = op.attr_int("training_mode", 0) != 0 && ratio != 0;
  Descs out;
  for (int slot = 0; slot < 2; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, slot == 0 ? "Y" : "mask"));
      continue;
    }
    Builder b(g, op, slot, slot == 0 ? "Y" : "mask");
    std::vector<Var> v = out_vars(b, xs);
    Affine flat;
    for (size_t d = 0; d < xs.size(); ++d) flat = flat * xs[d] + Affine(v[d]);
    E keep = active ? opaque("keep", {value_of(flat)}, 4) : E(1.0);
    E body = keep;
    if (slot == 0) {
      Operand x = b.in(0, "X");
      body = active ? x(ix(v)) * keep / E(1 - ratio) : x(ix(v));
    }
    out.push_back(std::move(b).build(idx(v), Reduce::none, body));
  }
  return out;
}

Descs describe_RandomLike(const Graph &g, const Op &op) {
  // Each element's draw is keyed by its global flat index (ir/rng.h), so every dim can be split; X is not read.
  Builder b(g, op, 0, "Y");
  const Shape &ys = b.out_shape();
  std::vector<Var> v = out_vars(b, ys);
  Affine flat;
  for (size_t d = 0; d < ys.size(); ++d) flat = flat * ys[d] + Affine(v[d]);
  return {std::move(b).build(idx(v), Reduce::none, opaque(op.attr_int("normal", 0) ? "normal" : "uniform",
                                                          {value_of(flat)}, 20))};
}

Descs describe_DropoutGrad(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "dX");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand dy = b.in(0, "dY"), mask = b.in(1, "mask");
  double ratio = op.attr_float("ratio", 0.5);
  return {std::move(b).build(idx(v), Reduce::none, dy(ix(v)) * mask(ix(v)) / E(1 - ratio))};
}

Descs describe_SoftmaxCrossEntropyLoss(const Graph &g, const Op &op) {
  const Shape &ss = in_shape(g, op, 0);
  Shape per = in_shape(g, op, 1);
  std::string red = reduction_of(op);
  Descs out;
  if (has_out(op, 0)) {
    Builder b(g, op, 0, "loss");
    bool wmean = red == "mean" && weighted(op, 2);
    std::vector<Var> nv = loss_vars(b, per, red == "none", wmean);
    Var c = b.internal("c", ss[1]);
    Operand scores = b.in(0, "scores"), labels = b.in(1, "labels");
    std::vector<E> args{scores(with_class(nv, c)), labels(ix(nv))};
    if (op.input(2) != kNoTensor) args.push_back(b.in(2, "weights")[{c}]);
    if (op.has_attr("ignore_index")) args.emplace_back(static_cast<double>(op.attr_int("ignore_index")));
    if (red == "none") {
      out.push_back(std::move(b).build(idx(nv), Reduce::none, opaque("sce_c", args, 6)));
    } else if (wmean) {
      out.push_back(std::move(b).build({}, Reduce::none, opaque("sce_weighted_mean", args, 7)));
    } else {
      E term = opaque("sce_c", args, 6);
      if (red == "mean") term = term / E(static_cast<double>(num_elements(per)));
      out.push_back(std::move(b).build({}, Reduce::sum, term));
    }
  } else {
    out.push_back(absent(op, 0, "loss"));
  }
  if (has_out(op, 1)) {
    Builder b(g, op, 1, "log_prob");
    std::vector<Var> v{b.out("n", ss[0]), b.out("c", ss[1], true)};
    for (size_t d = 2; d < ss.size(); ++d) v.push_back(b.out("d" + std::to_string(d - 1), ss[d]));
    Operand scores = b.in(0, "scores");
    out.push_back(std::move(b).build(idx(v), Reduce::none, opaque("logsoftmax_c", {scores(ix(v))}, 5)));
  } else {
    out.push_back(absent(op, 1, "log_prob"));
  }
  return out;
}

Descs describe_NegativeLogLikelihoodLoss(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "loss");
  Shape per = in_shape(g, op, 1);
  std::string red = reduction_of(op);
  bool wmean = red == "mean" && weighted(op, 2);
  std::vector<Var> nv = loss_vars(b, per, red == "none", wmean);
  Operand input = b.in(0, "input"), target = b.in(1, "target");
  E t = target(ix(nv));
  E term = -input(with_class(nv, Ix(t)));
  E w = label_weight(op, b, 2, t, t);
  if (w) term = term * w;
  if (red == "none") return {std::move(b).build(idx(nv), Reduce::none, term)};
  if (wmean) return {std::move(b).build({}, Reduce::none, opaque("weighted_mean", {term, w}, 3))};
  if (red == "mean") term = term / E(static_cast<double>(num_elements(per)));
  return {std::move(b).build({}, Reduce::sum, term)};
}

/** dscores / dinput [n, c, d...] = dloss factor * per-class term * label weight. */
Descs loss_grad(const Graph &g, const Op &op, const char *xname, const char *lname, bool softmax) {
  Builder b(g, op, 0, softmax ? "dscores" : "dinput");
  const Shape &xs = in_shape(g, op, 1);
  Shape per = in_shape(g, op, 2);
  std::string red = reduction_of(op);
  bool wmean = red == "mean" && weighted(op, 3);
  // A weighted mean divides by the total weight of all labels: opaque, and synced (the kernel all-reduces it).
  auto pos = [&](const std::string &name, int64_t extent) {
    Var p = b.out(name, extent, wmean);
    return wmean ? b.synced(p) : p;
  };
  std::vector<Var> v{pos("n", xs[0]), b.out("c", xs[1])};
  for (size_t d = 2; d < xs.size(); ++d) v.push_back(pos("d" + std::to_string(d - 1), xs[d]));
  std::vector<Var> nv{v[0]};
  for (size_t d = 2; d < v.size(); ++d) nv.push_back(v[d]);
  Operand dloss = b.in(0, "dloss"), x = b.in(1, xname), labels = b.in(2, lname);
  E l = labels(ix(nv));
  E hit = eq(value_of(v[1]), l);
  E term = softmax ? exp(x(ix(v))) - hit : -hit;
  E w = label_weight(op, b, 3, l, l);
  if (w) term = term * w;
  if (red == "none") return {std::move(b).build(idx(v), Reduce::none, dloss(ix(nv)) * term)};
  E dl = dloss(std::vector<Ix>{});
  // A weighted mean divides by the total weight of all labels: a reduction over every (n, d...), hence opaque.
  if (wmean) return {std::move(b).build(idx(v), Reduce::none, opaque("divide_by_total_weight", {dl * term}, 2))};
  if (red == "mean") dl = dl / E(static_cast<double>(num_elements(per)));
  return {std::move(b).build(idx(v), Reduce::none, dl * term)};
}

Descs describe_SoftmaxCrossEntropyLossGrad(const Graph &g, const Op &op) {
  return loss_grad(g, op, "log_prob", "labels", true);
}
Descs describe_NegativeLogLikelihoodLossGrad(const Graph &g, const Op &op) {
  return loss_grad(g, op, "input", "target", false);
}

Descs describe_ReluGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy * step(x); });
}
Descs describe_SigmoidGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "Y", [](const E &dy, const E &y) { return dy * y * (E(1.0) - y); });
}
Descs describe_TanhGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "Y", [](const E &dy, const E &y) { return dy * (E(1.0) - y * y); });
}
Descs describe_ErfGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) {
    return dy * E(2.0 / std::sqrt(M_PI)) * exp(-(x * x));
  });
}
Descs describe_SqrtGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "Y", [](const E &dy, const E &y) { return dy / (E(2.0) * y); });
}
Descs describe_SinGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy * cos(x); });
}
Descs describe_CosGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return -(dy * sin(x)); });
}
Descs describe_TanGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "Y", [](const E &dy, const E &y) { return dy * (E(1.0) + y * y); });
}
Descs describe_AsinGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy / sqrt(E(1.0) - x * x); });
}
Descs describe_AcosGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return -(dy / sqrt(E(1.0) - x * x)); });
}
Descs describe_AtanGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy / (E(1.0) + x * x); });
}
Descs describe_SinhGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy * cosh(x); });
}
Descs describe_CoshGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy * sinh(x); });
}
Descs describe_AsinhGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy / sqrt(x * x + E(1.0)); });
}
Descs describe_AcoshGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy / sqrt(x * x - E(1.0)); });
}
Descs describe_AtanhGrad(const Graph &g, const Op &op) {
  return elementwise_grad(g, op, "X", [](const E &dy, const E &x) { return dy / (E(1.0) - x * x); });
}

Descs describe_PowGrad(const Graph &g, const Op &op) {
  Descs out;
  for (int slot = 0; slot < 2; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, slot == 0 ? "dA" : "dB"));
      continue;
    }
    Builder b(g, op, slot, slot == 0 ? "dA" : "dB");
    std::vector<Var> v = out_vars(b, b.out_shape());
    Operand dy = b.in(0, "dY"), a = b.in(1, "A"), bb = b.in(2, "B");
    E av = a(bcast_ix(v, a.shape())), bv = bb(bcast_ix(v, bb.shape()));
    E body = slot == 0 ? dy(ix(v)) * bv * pow(av, bv - E(1.0)) : dy(ix(v)) * pow(av, bv) * log(av);
    out.push_back(std::move(b).build(idx(v), Reduce::none, body));
  }
  return out;
}

Descs describe_SoftmaxGrad(const Graph &g, const Op &op) { return softmax_grad(g, op, "softmax_grad"); }
Descs describe_LogSoftmaxGrad(const Graph &g, const Op &op) { return softmax_grad(g, op, "logsoftmax_grad"); }

}  // namespace cleave::describe
