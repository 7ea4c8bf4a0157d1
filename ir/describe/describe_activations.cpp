// Descriptions of the activation and rounding kinds and their gradients: pointwise bodies over X (PRelu's slope
// broadcast to X), written with step/where/max/min so the evaluator checks them against the interpreter.
#include <cmath>
#include <functional>

#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

Descs unary(const Graph &g, const Op &op, const std::function<E(const E &)> &f) {
  Builder b(g, op, 0, "Y");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand x = b.in(0, "X");
  return {std::move(b).build(idx(v), Reduce::none, f(x(ix(v))))};
}

/** dX = f(dY, X) for the (dY, X) -> dX gradient kinds. */
Descs grad(const Graph &g, const Op &op, const std::function<E(const E &, const E &)> &f) {
  Builder b(g, op, 0, "dX");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand dy = b.in(0, "dY"), x = b.in(1, "X");
  return {std::move(b).build(idx(v), Reduce::none, f(dy(ix(v)), x(ix(v))))};
}

double attr(const Op &op, const char *key, double def) { return op.attr_float(key, def); }

/** 1 where lo < x < hi, else 0 (step is x > 0). */
E inside(const E &x, double lo, double hi) { return step(x - E(lo)) * step(E(hi) - x); }

/** where(x > 0, x, neg) with neg the negative branch. */
E pos_or(const E &x, const E &neg) { return where(step(x), x, neg); }

}  // namespace

Descs describe_Clip(const Graph &g, const Op &op) {
  return unary(g, op, [&](const E &x) {
    E y = x;
    if (op.has_attr("min")) y = max(y, E(op.attr_float("min")));
    if (op.has_attr("max")) y = min(y, E(op.attr_float("max")));
    return y;
  });
}
Descs describe_HardSigmoid(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 0.2), bb = attr(op, "beta", 0.5);
  return unary(g, op, [&](const E &x) { return max(E(0.0), min(E(1.0), scaled(a, x) + E(bb))); });
}
Descs describe_HardSwish(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return x * max(E(0.0), min(E(6.0), x + E(3.0))) / E(6.0); });
}
Descs describe_Gelu(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return x / E(2.0) * (E(1.0) + erf(x / E(std::sqrt(2.0)))); });
}
Descs describe_LeakyRelu(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 0.01);
  return unary(g, op, [&](const E &x) { return pos_or(x, scaled(a, x)); });
}
Descs describe_Elu(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return unary(g, op, [&](const E &x) { return pos_or(x, scaled(a, exp(x) - E(1.0))); });
}
Descs describe_Selu(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.67326319217681884765625), gm = attr(op, "gamma", 1.05070102214813232421875);
  return unary(g, op, [&](const E &x) { return scaled(gm, pos_or(x, scaled(a, exp(x) - E(1.0)))); });
}
Descs describe_Celu(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return unary(g, op, [&](const E &x) { return pos_or(x, scaled(a, exp(x / E(a)) - E(1.0))); });
}
Descs describe_PRelu(const Graph &g, const Op &op) {
  Builder b(g, op, 0, "Y");
  std::vector<Var> v = out_vars(b, b.out_shape());
  Operand x = b.in(0, "X"), s = b.in(1, "slope");
  E xv = x(ix(v));
  return {std::move(b).build(idx(v), Reduce::none, pos_or(xv, s(bcast_ix(v, s.shape())) * xv))};
}
Descs describe_Softplus(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return log(exp(x) + E(1.0)); });
}
Descs describe_Softsign(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return x / (E(1.0) + abs(x)); });
}
Descs describe_ThresholdedRelu(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return unary(g, op, [&](const E &x) { return where(step(x - E(a)), x, E(0.0)); });
}
Descs describe_Abs(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return abs(x); }); }
Descs describe_Sign(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return sign(x); }); }
Descs describe_Floor(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return floor(x); }); }
Descs describe_Ceil(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return ceil(x); }); }
Descs describe_Round(const Graph &g, const Op &op) { return unary(g, op, [](const E &x) { return round(x); }); }
Descs describe_RoundToBf16(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return round_bf16(x); });
}
Descs describe_RoundToFp16(const Graph &g, const Op &op) {
  return unary(g, op, [](const E &x) { return round_fp16(x); });
}

Descs describe_ClipGrad(const Graph &g, const Op &op) {
  return grad(g, op, [&](const E &dy, const E &x) {
    E pass(1.0);
    if (op.has_attr("min")) pass = pass * step(x - E(op.attr_float("min")));
    if (op.has_attr("max")) pass = pass * step(E(op.attr_float("max")) - x);
    return dy * pass;
  });
}
Descs describe_HardSigmoidGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 0.2), bb = attr(op, "beta", 0.5);
  return grad(g, op, [&](const E &dy, const E &x) { return scaled(a, dy) * inside(scaled(a, x) + E(bb), 0, 1); });
}
Descs describe_HardSwishGrad(const Graph &g, const Op &op) {
  return grad(g, op, [](const E &dy, const E &x) {
    // 0 below -3, x/3 + 1/2 on [-3, 3], 1 above.
    return dy * where(step(E(-3.0) - x), E(0.0), where(step(x - E(3.0)), E(1.0), x / E(3.0) + E(0.5)));
  });
}
Descs describe_GeluGrad(const Graph &g, const Op &op) {
  return grad(g, op, [](const E &dy, const E &x) {
    E cdf = (E(1.0) + erf(x / E(std::sqrt(2.0)))) / E(2.0), density = exp(-(x * x) / E(2.0)) / E(std::sqrt(2.0 * M_PI));
    return dy * (cdf + x * density);
  });
}
Descs describe_LeakyReluGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 0.01);
  return grad(g, op, [&](const E &dy, const E &x) { return where(step(x), dy, scaled(a, dy)); });
}
Descs describe_EluGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return grad(g, op, [&](const E &dy, const E &x) { return where(step(x), dy, scaled(a, dy * exp(x))); });
}
Descs describe_SeluGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.67326319217681884765625), gm = attr(op, "gamma", 1.05070102214813232421875);
  return grad(g, op, [&](const E &dy, const E &x) { return scaled(gm, where(step(x), dy, scaled(a, dy * exp(x)))); });
}
Descs describe_CeluGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return grad(g, op, [&](const E &dy, const E &x) { return where(step(x), dy, dy * exp(x / E(a))); });
}
Descs describe_PReluGrad(const Graph &g, const Op &op) {
  Descs out;
  for (int slot = 0; slot < 2; ++slot) {
    if (!has_out(op, static_cast<size_t>(slot))) {
      out.push_back(absent(op, slot, slot == 0 ? "dX" : "dslope"));
      continue;
    }
    Builder b(g, op, slot, slot == 0 ? "dX" : "dslope");
    std::vector<Var> v = out_vars(b, b.out_shape());
    Operand dy = b.in(0, "dY"), x = b.in(1, "X"), s = b.in(2, "slope");
    E d = dy(ix(v)), xv = x(ix(v));
    E body = slot == 0 ? where(step(xv), d, s(bcast_ix(v, s.shape())) * d) : where(step(xv), E(0.0), xv * d);
    out.push_back(std::move(b).build(idx(v), Reduce::none, body));
  }
  return out;
}
Descs describe_SoftplusGrad(const Graph &g, const Op &op) {
  return grad(g, op, [](const E &dy, const E &x) { return dy * sigmoid(x); });
}
Descs describe_SoftsignGrad(const Graph &g, const Op &op) {
  return grad(g, op, [](const E &dy, const E &x) { return dy / ((E(1.0) + abs(x)) * (E(1.0) + abs(x))); });
}
Descs describe_ThresholdedReluGrad(const Graph &g, const Op &op) {
  double a = attr(op, "alpha", 1.0);
  return grad(g, op, [&](const E &dy, const E &x) { return dy * step(x - E(a)); });
}

}  // namespace cleave::describe
