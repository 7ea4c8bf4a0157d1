// Optimizer steps with torch.optim semantics (the interpreter's SGDUpdate/MomentumUpdate/AdamUpdate), and Dropout
// keyed by the global element index. Each element is computed in double and rounded once, like the interpreter.
#include <cmath>
#include <cstring>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt {

double sum_of_squares(const real *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

double sum_of_squares(const std::vector<std::pair<const real *, int64_t>> &parts) {
  double s = 0;
  for (const auto &[x, n] : parts) s += sum_of_squares(x, n);
  return s;
}

void scale_in_place(real *x, int64_t n, real s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_in_place(real *y, const real *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void sgd_step(int64_t n, const real *p, const real *g, real lr, real weight_decay, real *p_out) {
  if (detail::skipped_update(n, {{p, p_out}})) return;
  double l = lr, wd = weight_decay;
  for (int64_t i = 0; i < n; ++i) p_out[i] = static_cast<real>(p[i] - l * (wd != 0 ? g[i] + wd * p[i] : g[i]));
}

void momentum_step(int64_t n, const real *p, const real *g, const real *b, real lr, real momentum,
                   real weight_decay, bool nesterov, real *p_out, real *b_out) {
  if (detail::skipped_update(n, {{p, p_out}, {b, b_out}})) return;
  double l = lr, mu = momentum, wd = weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    double gi = wd != 0 ? g[i] + wd * p[i] : g[i];  // as torch: 0 * an infinite mask would be NaN
    double bi = mu * b[i] + gi;
    double step = nesterov ? gi + mu * bi : bi;
    real pn = static_cast<real>(p[i] - l * step);
    b_out[i] = static_cast<real>(bi);  // written after every read of element i, so outputs may alias inputs
    p_out[i] = pn;
  }
}

void adam_step(int64_t n, const real *p, const real *g, const real *m, const real *v, real lr, real beta1,
               real beta2, real eps, real weight_decay, bool decoupled, int64_t step, real *p_out, real *m_out,
               real *v_out) {
  if (detail::skipped_update(n, {{p, p_out}, {m, m_out}, {v, v_out}})) return;
  step -= detail::g_skipped_updates;
  if (step < 1) fail("adam_step: step " + std::to_string(step) + " must be >= 1");
  double l = lr, b1 = beta1, b2 = beta2, e = eps, wd = weight_decay, t = static_cast<double>(step);
  double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  for (int64_t i = 0; i < n; ++i) {
    double pi = p[i], gi = g[i];
    if (decoupled) pi *= 1 - l * wd;  // AdamW decays the parameter, Adam the gradient
    else if (wd != 0) gi += wd * pi;
    double mi = b1 * m[i] + (1 - b1) * gi;
    double vi = b2 * v[i] + (1 - b2) * gi * gi;
    // torch: denom = sqrt(v) / sqrt(bc2) + eps; p -= (lr / bc1) * m / denom
    real pn = static_cast<real>(pi - (l / bc1) * mi / (std::sqrt(vi) / std::sqrt(bc2) + e));
    m_out[i] = static_cast<real>(mi);
    v_out[i] = static_cast<real>(vi);
    p_out[i] = pn;
  }
}

void onnx_momentum_step(int64_t n, const real *x, const real *g, const real *v, real lr, int64_t t, real alpha,
                        real beta, real norm_coefficient, bool nesterov, real *x_out, real *v_out) {
  double r = lr, a = alpha, b = t > 0 ? beta : 1.0, norm = norm_coefficient;  // the first update takes g whole
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + b * gr;
    real xn = static_cast<real>(nesterov ? x[i] - r * (gr + a * vn) : x[i] - r * vn);
    v_out[i] = static_cast<real>(vn);
    x_out[i] = xn;
  }
}

void onnx_adam_step(int64_t n, const real *x, const real *g, const real *v, const real *h, real lr, int64_t t,
                    real alpha, real beta, real epsilon, real norm_coefficient, real norm_coefficient_post,
                    real *x_out, real *v_out, real *h_out) {
  double a = alpha, b = beta, e = epsilon, norm = norm_coefficient, post = norm_coefficient_post;
  double td = static_cast<double>(t);
  double r = t > 0 ? lr * std::sqrt(1 - std::pow(b, td)) / (1 - std::pow(a, td)) : lr;
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + (1 - a) * gr;
    double hn = b * h[i] + (1 - b) * gr * gr;
    real xn = static_cast<real>((1 - post) * (x[i] - r * (vn / (std::sqrt(hn) + e))));
    v_out[i] = static_cast<real>(vn);
    h_out[i] = static_cast<real>(hn);
    x_out[i] = xn;
  }
}

void onnx_adagrad_step(int64_t n, const real *x, const real *g, const real *h, real lr, int64_t t,
                       real decay_factor, real epsilon, real norm_coefficient, real *x_out, real *h_out) {
  double r = lr / (1 + static_cast<double>(t) * decay_factor), e = epsilon, norm = norm_coefficient;
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double hn = h[i] + gr * gr;
    real xn = static_cast<real>(x[i] - r * gr / (std::sqrt(hn) + e));
    h_out[i] = static_cast<real>(hn);
    x_out[i] = xn;
  }
}

namespace {

/** f(i, g) for each element i of a shard of `shape` (row-major), g its global index: sum((global_offset[d] + i[d]) *
 *  global_strides[d]), advanced with the local odometer. */
template <typename F>
void for_each_global_index(const char *who, const Dims &shape, const Dims &global_offset, const Dims &global_strides,
                           F f) {
  size_t r = shape.size();
  if (global_offset.size() != r || global_strides.size() != r) fail(std::string(who) + ": one offset/stride per dim");
  int64_t n = 1, g = 0;
  for (size_t d = 0; d < r; ++d) {
    n *= shape[d];
    g += global_offset[d] * global_strides[d];
  }
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, g);
    for (size_t d = r; d-- > 0;) {
      g += global_strides[d];
      if (++idx[d] < shape[d]) break;
      g -= global_strides[d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void dropout_forward(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed,
                     int64_t step, real ratio, const real *x, real *y, uint8_t *mask) {
  size_t r = shape.size();
  if (global_offset.size() != r || global_strides.size() != r) fail("dropout_forward: one offset/stride per dim");
  if (!(ratio >= 0 && ratio < 1)) fail("dropout_forward: ratio " + std::to_string(ratio) + " is not in [0, 1)");
  int64_t n = 1;
  for (size_t d = 0; d < r; ++d) n *= shape[d];
  if (ratio == 0) {  // torch's dropout(p=0) in training mode: the identity, every element kept
    if (y != x) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(real));
    if (mask) std::memset(mask, 1, static_cast<size_t>(n));
    return;
  }
  double scale = 1.0 / (1.0 - static_cast<double>(ratio));
  for_each_global_index("dropout_forward", shape, global_offset, global_strides, [&](int64_t i, int64_t g) {
    bool keep = dropout_keep(seed, step, g, ratio);
    y[i] = keep ? static_cast<real>(x[i] * scale) : 0.0f;
    if (mask) mask[i] = keep ? 1 : 0;
  });
}

void random_like(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed, int64_t step,
                 bool normal, real a, real b, real *y) {
  for_each_global_index("random_like", shape, global_offset, global_strides,
                        [&](int64_t i, int64_t g) { y[i] = rng_draw(normal, a, b, seed, step, g); });
}

void dropout_backward(int64_t n, real ratio, const real *dy, const uint8_t *mask, real *dx) {
  if (ratio == 0) {
    for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] : 0.0f;
    return;
  }
  double scale = 1.0 / (1.0 - static_cast<double>(ratio));
  for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? static_cast<real>(dy[i] * scale) : 0.0f;
}

}  // namespace cleave::rt
