// Optimizer steps with torch.optim semantics (the interpreter's SGDUpdate/MomentumUpdate/AdamUpdate), and Dropout
// keyed by the global element index. Each element is computed in double and rounded once, like the interpreter.
#include <cmath>
#include <cstring>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt {

double sum_of_squares(const float *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

double sum_of_squares(const std::vector<std::pair<const float *, int64_t>> &parts) {
  double s = 0;
  for (const auto &[x, n] : parts) s += sum_of_squares(x, n);
  return s;
}

void scale_in_place(float *x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_in_place(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void sgd_step(int64_t n, const float *p, const float *g, float lr, float weight_decay, float *p_out) {
  if (detail::skipped_update(n, {{p, p_out}})) return;
  double l = lr, wd = weight_decay;
  for (int64_t i = 0; i < n; ++i) p_out[i] = static_cast<float>(p[i] - l * (wd != 0 ? g[i] + wd * p[i] : g[i]));
}

void momentum_step(int64_t n, const float *p, const float *g, const float *b, float lr, float momentum,
                   float weight_decay, bool nesterov, float *p_out, float *b_out) {
  if (detail::skipped_update(n, {{p, p_out}, {b, b_out}})) return;
  double l = lr, mu = momentum, wd = weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    double gi = wd != 0 ? g[i] + wd * p[i] : g[i];  // as torch: 0 * an infinite mask would be NaN
    double bi = mu * b[i] + gi;
    double step = nesterov ? gi + mu * bi : bi;
    float pn = static_cast<float>(p[i] - l * step);
    b_out[i] = static_cast<float>(bi);  // written after every read of element i, so outputs may alias inputs
    p_out[i] = pn;
  }
}

void adam_step(int64_t n, const float *p, const float *g, const float *m, const float *v, float lr, float beta1,
               float beta2, float eps, float weight_decay, bool decoupled, int64_t step, float *p_out, float *m_out,
               float *v_out) {
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
    float pn = static_cast<float>(pi - (l / bc1) * mi / (std::sqrt(vi) / std::sqrt(bc2) + e));
    m_out[i] = static_cast<float>(mi);
    v_out[i] = static_cast<float>(vi);
    p_out[i] = pn;
  }
}

void onnx_momentum_step(int64_t n, const float *x, const float *g, const float *v, float lr, int64_t t, float alpha,
                        float beta, float norm_coefficient, bool nesterov, float *x_out, float *v_out) {
  double r = lr, a = alpha, b = t > 0 ? beta : 1.0, norm = norm_coefficient;  // the first update takes g whole
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + b * gr;
    float xn = static_cast<float>(nesterov ? x[i] - r * (gr + a * vn) : x[i] - r * vn);
    v_out[i] = static_cast<float>(vn);
    x_out[i] = xn;
  }
}

void onnx_adam_step(int64_t n, const float *x, const float *g, const float *v, const float *h, float lr, int64_t t,
                    float alpha, float beta, float epsilon, float norm_coefficient, float norm_coefficient_post,
                    float *x_out, float *v_out, float *h_out) {
  double a = alpha, b = beta, e = epsilon, norm = norm_coefficient, post = norm_coefficient_post;
  double td = static_cast<double>(t);
  double r = t > 0 ? lr * std::sqrt(1 - std::pow(b, td)) / (1 - std::pow(a, td)) : lr;
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + (1 - a) * gr;
    double hn = b * h[i] + (1 - b) * gr * gr;
    float xn = static_cast<float>((1 - post) * (x[i] - r * (vn / (std::sqrt(hn) + e))));
    v_out[i] = static_cast<float>(vn);
    h_out[i] = static_cast<float>(hn);
    x_out[i] = xn;
  }
}

void onnx_adagrad_step(int64_t n, const float *x, const float *g, const float *h, float lr, int64_t t,
                       float decay_factor, float epsilon, float norm_coefficient, float *x_out, float *h_out) {
  double r = lr / (1 + static_cast<double>(t) * decay_factor), e = epsilon, norm = norm_coefficient;
  for (int64_t i = 0; i < n; ++i) {
    double gr = norm * x[i] + g[i];
    double hn = h[i] + gr * gr;
    float xn = static_cast<float>(x[i] - r * gr / (std::sqrt(hn) + e));
    h_out[i] = static_cast<float>(hn);
    x_out[i] = xn;
  }
}

void dropout_forward(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed,
                     int64_t step, float ratio, const float *x, float *y, uint8_t *mask) {
  size_t r = shape.size();
  if (global_offset.size() != r || global_strides.size() != r) fail("dropout_forward: one offset/stride per dim");
  if (!(ratio >= 0 && ratio < 1)) fail("dropout_forward: ratio " + std::to_string(ratio) + " is not in [0, 1)");
  int64_t n = 1, g = 0;
  for (size_t d = 0; d < r; ++d) {
    n *= shape[d];
    g += global_offset[d] * global_strides[d];
  }
  if (ratio == 0) {  // torch's dropout(p=0) in training mode: the identity, every element kept
    if (y != x) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    if (mask) std::memset(mask, 1, static_cast<size_t>(n));
    return;
  }
  double scale = 1.0 / (1.0 - static_cast<double>(ratio));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    bool keep = ratio == 0 || dropout_keep(seed, step, g, ratio);
    y[i] = keep ? static_cast<float>(x[i] * scale) : 0.0f;
    if (mask) mask[i] = keep ? 1 : 0;
    for (size_t d = r; d-- > 0;) {  // advance the global index with the local odometer
      g += global_strides[d];
      if (++idx[d] < shape[d]) break;
      g -= global_strides[d] * idx[d];
      idx[d] = 0;
    }
  }
}

void dropout_backward(int64_t n, float ratio, const float *dy, const uint8_t *mask, float *dx) {
  if (ratio == 0) {
    for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? dy[i] : 0.0f;
    return;
  }
  double scale = 1.0 / (1.0 - static_cast<double>(ratio));
  for (int64_t i = 0; i < n; ++i) dx[i] = mask[i] ? static_cast<float>(dy[i] * scale) : 0.0f;
}

}  // namespace cleave::rt
