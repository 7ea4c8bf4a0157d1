// Optimizer steps. SGDUpdate / MomentumUpdate / AdamUpdate follow torch.optim (SGD, SGD with momentum, Adam/AdamW);
// Momentum / Adam / Adagrad follow ai.onnx.preview.training (R = learning rate, T = update count, variadic tensors).
#include <cmath>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** CLEAVE_CHECKs that inputs `ids` (and outputs `outs`) all have input `ref`'s shape. */
void same_shapes(const KernelArgs &k, const std::vector<size_t> &ids, const std::vector<size_t> &outs, size_t ref) {
  const Shape &s = k.in(ref).shape;
  for (size_t i : ids)
    if (k.in(i).shape != s)
      CLEAVE_USER_ERROR(k.label(), ": input ", i, " has shape ", shape_str(k.in(i).shape), ", expected ", shape_str(s));
  for (size_t o : outs) k.expect_out_shape(o, s);
}

/** The n of a variadic preview-training op with `groups` tensor lists after (R, T). */
size_t variadic_count(const KernelArgs &k, size_t groups) {
  if (k.ins.size() < 2 || (k.ins.size() - 2) % groups != 0 || k.ins.size() == 2)
    CLEAVE_USER_ERROR(k.label(), ": expects R, T and ", groups, " lists of equal length, got ", k.ins.size(),
                      " inputs");
  size_t n = (k.ins.size() - 2) / groups;
  if (k.outs.size() != n * (groups - 1))
    CLEAVE_USER_ERROR(k.label(), ": expects ", n * (groups - 1), " outputs, got ", k.outs.size());
  return n;
}

double scalar(const KernelArgs &k, size_t i) {
  if (k.in(i).data.size() != 1) CLEAVE_USER_ERROR(k.label(), ": input ", i, " must be a scalar");
  return k.in(i).data[0];
}

}  // namespace

void kernel_SGDUpdate(const KernelArgs &k) {
  same_shapes(k, {1}, {0}, 0);
  double lr = k.ctx.rate(k.op.attr_float("lr")), wd = k.op.attr_float("weight_decay", 0.0);
  const Value &p = k.in(0), &g = k.in(1);
  // As torch: the decay term only when weight_decay != 0 (0 * an infinite parameter, a mask, would be NaN).
  for (size_t i = 0; i < p.data.size(); ++i)
    k.out(0).data[i] = p.data[i] - lr * (wd != 0 ? g.data[i] + wd * p.data[i] : g.data[i]);
}

void kernel_MomentumUpdate(const KernelArgs &k) {
  // torch.optim.SGD(momentum, dampening=0): b = momentum * b + g (b starts at 0, so the first step is b = g).
  same_shapes(k, {1, 2}, {0, 1}, 0);
  double lr = k.ctx.rate(k.op.attr_float("lr")), mu = k.op.attr_float("momentum");
  double wd = k.op.attr_float("weight_decay", 0.0);
  bool nesterov = k.op.attr_int("nesterov", 0) != 0;
  const Value &p = k.in(0), &g = k.in(1), &b = k.in(2);
  for (size_t i = 0; i < p.data.size(); ++i) {
    double gi = wd != 0 ? g.data[i] + wd * p.data[i] : g.data[i];
    double bi = mu * b.data[i] + gi;
    double step = nesterov ? gi + mu * bi : bi;
    k.out(0).data[i] = p.data[i] - lr * step;
    if (k.has_out(1)) k.outs[1]->data[i] = bi;
  }
}

void kernel_AdamUpdate(const KernelArgs &k) {
  same_shapes(k, {1, 2, 3}, {0, 1, 2}, 0);
  double lr = k.ctx.rate(k.op.attr_float("lr"));
  double b1 = k.op.attr_float("beta1", 0.9), b2 = k.op.attr_float("beta2", 0.999);
  double eps = k.op.attr_float("eps", 1e-8), wd = k.op.attr_float("weight_decay", 0.0);
  bool decoupled = k.op.attr_int("decoupled", 0) != 0;
  if (k.ctx.step < 1) CLEAVE_USER_ERROR(k.label(), ": step ", k.ctx.step, " must be >= 1");
  double t = static_cast<double>(k.ctx.step);
  double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  const Value &p = k.in(0), &g = k.in(1), &m = k.in(2), &v = k.in(3);
  for (size_t i = 0; i < p.data.size(); ++i) {
    double pi = p.data[i], gi = g.data[i];
    if (decoupled) pi *= 1 - lr * wd;  // AdamW: decay the parameter, not the gradient
    else if (wd != 0) gi += wd * pi;
    double mi = b1 * m.data[i] + (1 - b1) * gi;
    double vi = b2 * v.data[i] + (1 - b2) * gi * gi;
    // torch: denom = sqrt(v) / sqrt(bc2) + eps; p -= (lr / bc1) * m / denom
    k.out(0).data[i] = pi - (lr / bc1) * mi / (std::sqrt(vi) / std::sqrt(bc2) + eps);
    if (k.has_out(1)) k.outs[1]->data[i] = mi;
    if (k.has_out(2)) k.outs[2]->data[i] = vi;
  }
}

void kernel_Momentum(const KernelArgs &k) {
  // (R, T, X..., G..., V...) -> (X'..., V'...)
  size_t n = variadic_count(k, 3);
  double r = scalar(k, 0), t = scalar(k, 1);
  double alpha = k.op.attr_float("alpha"), beta = k.op.attr_float("beta");
  double norm = k.op.attr_float("norm_coefficient");
  std::string mode = k.op.has_attr("mode") ? k.op.attr_string("mode") : "standard";
  if (mode != "standard" && mode != "nesterov") CLEAVE_USER_ERROR(k.label(), ": unknown mode \"", mode, "\"");
  double beta_adj = t > 0 ? beta : 1.0;  // the gradient's coefficient is 1 on the first update
  for (size_t j = 0; j < n; ++j) {
    same_shapes(k, {2 + n + j, 2 + 2 * n + j}, {j, n + j}, 2 + j);
    const Value &x = k.in(2 + j), &g = k.in(2 + n + j), &v = k.in(2 + 2 * n + j);
    for (size_t i = 0; i < x.data.size(); ++i) {
      double gr = norm * x.data[i] + g.data[i];
      double vn = alpha * v.data[i] + beta_adj * gr;
      double xn = mode == "standard" ? x.data[i] - r * vn : x.data[i] - r * (gr + alpha * vn);
      if (k.has_out(j)) k.outs[j]->data[i] = xn;
      if (k.has_out(n + j)) k.outs[n + j]->data[i] = vn;
    }
  }
}

void kernel_Adam(const KernelArgs &k) {
  // (R, T, X..., G..., V..., H...) -> (X'..., V'..., H'...)
  size_t n = variadic_count(k, 4);
  double r = scalar(k, 0), t = scalar(k, 1);
  double alpha = k.op.attr_float("alpha", 0.9), beta = k.op.attr_float("beta", 0.999);
  double eps = k.op.attr_float("epsilon", 1e-6), norm = k.op.attr_float("norm_coefficient", 0.0);
  double norm_post = k.op.attr_float("norm_coefficient_post", 0.0);
  // Bias correction only once updates have happened (T > 0).
  double r_adj = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
  for (size_t j = 0; j < n; ++j) {
    same_shapes(k, {2 + n + j, 2 + 2 * n + j, 2 + 3 * n + j}, {j, n + j, 2 * n + j}, 2 + j);
    const Value &x = k.in(2 + j), &g = k.in(2 + n + j), &v = k.in(2 + 2 * n + j), &h = k.in(2 + 3 * n + j);
    for (size_t i = 0; i < x.data.size(); ++i) {
      double gr = norm * x.data[i] + g.data[i];
      double vn = alpha * v.data[i] + (1 - alpha) * gr;
      double hn = beta * h.data[i] + (1 - beta) * gr * gr;
      double xn = x.data[i] - r_adj * (vn / (std::sqrt(hn) + eps));
      if (k.has_out(j)) k.outs[j]->data[i] = (1 - norm_post) * xn;
      if (k.has_out(n + j)) k.outs[n + j]->data[i] = vn;
      if (k.has_out(2 * n + j)) k.outs[2 * n + j]->data[i] = hn;
    }
  }
}

void kernel_Adagrad(const KernelArgs &k) {
  // (R, T, X..., G..., H...) -> (X'..., H'...)
  size_t n = variadic_count(k, 3);
  double r = scalar(k, 0), t = scalar(k, 1);
  double eps = k.op.attr_float("epsilon", 1e-6), norm = k.op.attr_float("norm_coefficient", 0.0);
  double decay = k.op.attr_float("decay_factor", 0.0);
  double r_adj = r / (1 + t * decay);
  for (size_t j = 0; j < n; ++j) {
    same_shapes(k, {2 + n + j, 2 + 2 * n + j}, {j, n + j}, 2 + j);
    const Value &x = k.in(2 + j), &g = k.in(2 + n + j), &h = k.in(2 + 2 * n + j);
    for (size_t i = 0; i < x.data.size(); ++i) {
      double gr = norm * x.data[i] + g.data[i];
      double hn = h.data[i] + gr * gr;
      double xn = x.data[i] - r_adj * gr / (std::sqrt(hn) + eps);
      if (k.has_out(j)) k.outs[j]->data[i] = xn;
      if (k.has_out(n + j)) k.outs[n + j]->data[i] = hn;
    }
  }
}

}  // namespace cleave::interp
