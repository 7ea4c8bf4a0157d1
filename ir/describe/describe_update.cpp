// Descriptions of the optimizer kinds: elementwise over the parameter, one description per output. The formulas
// follow torch.optim (SGD, Momentum, Adam/AdamW) and ai.onnx.preview.training (Momentum, Adam, Adagrad).
#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** Elementwise description of output `slot` named `name`; `f` gets the operand accessor over the output vars. */
Description elementwise(const Graph &g, const Op &op, int slot, const std::string &name,
                        const std::function<E(const std::function<E(int, const std::string &)> &)> &f) {
  Builder b(g, op, slot, name);
  std::vector<Var> v = out_vars(b, b.out_shape());
  auto at = [&](int in_slot, const std::string &in_name) {
    Operand o = b.in(in_slot, in_name);
    return o.shape().empty() ? o(std::vector<Ix>{}) : o(ix(v));
  };
  E body = f(at);
  return std::move(b).build(idx(v), Reduce::none, body);
}

using At = std::function<E(int, const std::string &)>;

Descs each_output(const Graph &g, const Op &op, const std::vector<std::string> &names,
                  const std::function<E(const At &, int)> &f) {
  Descs out;
  for (size_t s = 0; s < names.size(); ++s) {
    if (!has_out(op, s)) {
      out.push_back(absent(op, static_cast<int>(s), names[s]));
      continue;
    }
    out.push_back(elementwise(g, op, static_cast<int>(s), names[s], [&](const At &at) { return f(at, static_cast<int>(s)); }));
  }
  return out;
}

/** Names of the n tensors of the training ops' lists: X, G, V, H; indexed when there are several. */
std::string list_name(const char *base, size_t i, size_t n) { return n == 1 ? base : base + std::to_string(i); }

}  // namespace

Descs describe_SGDUpdate(const Graph &g, const Op &op) {
  double lr = op.attr_float("lr"), wd = op.attr_float("weight_decay", 0);
  return each_output(g, op, {"param'"}, [&](const At &at, int) {
    E p = at(0, "param");
    return p - scaled(lr, plus_scaled(at(1, "grad"), wd, p));
  });
}

Descs describe_MomentumUpdate(const Graph &g, const Op &op) {
  double lr = op.attr_float("lr"), mom = op.attr_float("momentum"), wd = op.attr_float("weight_decay", 0);
  bool nesterov = op.attr_int("nesterov", 0) != 0;
  return each_output(g, op, {"param'", "velocity'"}, [&](const At &at, int slot) {
    E p = at(0, "param");
    E grad = plus_scaled(at(1, "grad"), wd, p);
    E v = scaled(mom, at(2, "velocity")) + grad;
    if (slot == 1) return v;
    return p - scaled(lr, nesterov ? grad + scaled(mom, v) : v);
  });
}

Descs describe_AdamUpdate(const Graph &g, const Op &op) {
  double lr = op.attr_float("lr"), b1 = op.attr_float("beta1", 0.9), b2 = op.attr_float("beta2", 0.999);
  double eps = op.attr_float("eps", 1e-8), wd = op.attr_float("weight_decay", 0);
  bool decoupled = op.attr_int("decoupled", 0) != 0;
  return each_output(g, op, {"param'", "m'", "v'"}, [&](const At &at, int slot) {
    E p = at(0, "param");
    E grad = decoupled ? at(1, "grad") : plus_scaled(at(1, "grad"), wd, p);
    E m = scaled(b1, at(2, "m")) + scaled(1 - b1, grad);
    E v = scaled(b2, at(3, "v")) + scaled(1 - b2, grad * grad);
    if (slot == 1) return m;
    if (slot == 2) return v;
    E t = step_count();
    E base = decoupled && wd != 0 ? scaled(1 - lr * wd, p) : p;
    return base - E(lr) * (m / (E(1.0) - pow(E(b1), t))) /
                      (sqrt(v) / sqrt(E(1.0) - pow(E(b2), t)) + E(eps));
  });
}

Descs describe_Momentum(const Graph &g, const Op &op) {
  size_t n = (op.inputs.size() - 2) / 3;
  double alpha = op.attr_float("alpha"), beta = op.attr_float("beta"), norm = op.attr_float("norm_coefficient", 0);
  bool nesterov = op.has_attr("mode") && op.attr_string("mode") == "nesterov";
  std::vector<std::string> names;
  for (const char *base : {"X'", "V'"})
    for (size_t i = 0; i < n; ++i) names.push_back(list_name(base, i, n));
  return each_output(g, op, names, [&](const At &at, int slot) {
    size_t i = static_cast<size_t>(slot) % n;
    E x = at(static_cast<int>(2 + i), list_name("X", i, n));
    E gr = plus_scaled(at(static_cast<int>(2 + n + i), list_name("G", i, n)), norm, x);
    E beta_t = where(step(at(1, "T")), E(beta), E(1.0));  // beta applies from the second step (T > 0)
    E v = scaled(alpha, at(static_cast<int>(2 + 2 * n + i), list_name("V", i, n))) + beta_t * gr;
    if (static_cast<size_t>(slot) >= n) return v;
    return x - at(0, "R") * (nesterov ? gr + scaled(alpha, v) : v);
  });
}

Descs describe_Adam(const Graph &g, const Op &op) {
  size_t n = (op.inputs.size() - 2) / 4;
  double alpha = op.attr_float("alpha", 0.9), beta = op.attr_float("beta", 0.999);
  double eps = op.attr_float("epsilon", 1e-6), norm = op.attr_float("norm_coefficient", 0);
  double post = op.attr_float("norm_coefficient_post", 0);
  std::vector<std::string> names;
  for (const char *base : {"X'", "V'", "H'"})
    for (size_t i = 0; i < n; ++i) names.push_back(list_name(base, i, n));
  return each_output(g, op, names, [&](const At &at, int slot) {
    size_t i = static_cast<size_t>(slot) % n, which = static_cast<size_t>(slot) / n;
    E x = at(static_cast<int>(2 + i), list_name("X", i, n));
    E gr = plus_scaled(at(static_cast<int>(2 + n + i), list_name("G", i, n)), norm, x);
    E v = scaled(alpha, at(static_cast<int>(2 + 2 * n + i), list_name("V", i, n))) + scaled(1 - alpha, gr);
    E h = scaled(beta, at(static_cast<int>(2 + 3 * n + i), list_name("H", i, n))) + scaled(1 - beta, gr * gr);
    if (which == 1) return v;
    if (which == 2) return h;
    E t = at(1, "T"), r = at(0, "R");
    E r_adj = where(step(t), r * sqrt(E(1.0) - pow(E(beta), t)) / (E(1.0) - pow(E(alpha), t)), r);
    return scaled(1 - post, x - r_adj * (v / (sqrt(h) + E(eps))));
  });
}

Descs describe_Adagrad(const Graph &g, const Op &op) {
  size_t n = (op.inputs.size() - 2) / 3;
  double decay = op.attr_float("decay_factor", 0), eps = op.attr_float("epsilon", 1e-6);
  double norm = op.attr_float("norm_coefficient", 0);
  std::vector<std::string> names;
  for (const char *base : {"X'", "H'"})
    for (size_t i = 0; i < n; ++i) names.push_back(list_name(base, i, n));
  return each_output(g, op, names, [&](const At &at, int slot) {
    size_t i = static_cast<size_t>(slot) % n;
    E x = at(static_cast<int>(2 + i), list_name("X", i, n));
    E gr = plus_scaled(at(static_cast<int>(2 + n + i), list_name("G", i, n)), norm, x);
    E h = at(static_cast<int>(2 + 2 * n + i), list_name("H", i, n)) + gr * gr;
    if (static_cast<size_t>(slot) >= n) return h;
    E r = at(0, "R") / (E(1.0) + at(1, "T") * E(decay));
    return x - r * gr / (sqrt(h) + E(eps));
  });
}

}  // namespace cleave::describe
