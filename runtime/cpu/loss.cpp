// Softmax / log-softmax and their gradients; SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with weights,
// ignore_index and reductions, forward and backward. Row sums accumulate in double; softmax itself runs on
// oneDNN where the runtime has it.
#include <cmath>
#include <vector>

#include "cleave/rt.h"
#include "cpu/onednn.h"

namespace cleave::rt {
namespace {

/** Weight of position i: weights[label] (1 without weights), 0 where the label is ignore_index. */
double position_weight(const LossShape &s, const int64_t *labels, const real *weights, int64_t i) {
  int64_t l = labels[i];
  if (s.has_ignore_index && l == s.ignore_index) return 0.0;
  if (l < 0 || l >= s.c)
    fail("loss: label " + std::to_string(l) + " is out of range [0, " + std::to_string(s.c) + ")");
  return weights ? weights[l] : 1.0;
}

/** loss from log-probabilities laid out as [n, c, d]. */
void loss_from_log_prob(const LossShape &s, const real *logp, const int64_t *labels, const real *weights,
                        real *loss) {
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < s.n * s.d; ++i) {
    double w = position_weight(s, labels, weights, i);
    int64_t n = i / s.d, d = i % s.d;
    double term = w != 0 ? -w * logp[(n * s.c + labels[i]) * s.d + d] : 0.0;
    if (s.reduction == Reduction::none) loss[i] = static_cast<real>(term);
    sum += term;
    wsum += w;
  }
  if (s.reduction == Reduction::sum) loss[0] = static_cast<real>(sum);
  // mean: 0/0 = nan when every position is ignored, as in ONNX and torch.
  if (s.reduction == Reduction::mean) loss[0] = static_cast<real>(sum / (s.mean_divisor > 0 ? s.mean_divisor : wsum));
}

/** d(loss)/d(term i) times the position's weight. */
std::vector<double> upstream(const LossShape &s, const real *dloss, const int64_t *labels, const real *weights) {
  std::vector<double> g(static_cast<size_t>(s.n * s.d));
  double wsum = s.reduction == Reduction::mean && s.mean_divisor <= 0 ? loss_weight_total(s, labels, weights) : 0;
  for (int64_t i = 0; i < s.n * s.d; ++i) {
    double w = position_weight(s, labels, weights, i);
    double up = s.reduction == Reduction::none ? dloss[i]
                : s.reduction == Reduction::sum ? dloss[0]
                                                : dloss[0] / (s.mean_divisor > 0 ? s.mean_divisor : wsum);
    g[static_cast<size_t>(i)] = w * up;
  }
  return g;
}

}  // namespace

void softmax_forward(int64_t outer, int64_t dim, int64_t inner, const real *x, real *y, bool log) {
  if (!log && detail::onednn::softmax_forward(outer, dim, inner, x, y)) return;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const real *px = x + o * dim * inner + i;
      real *py = y + o * dim * inner + i;
      double mx = -INFINITY;
      for (int64_t a = 0; a < dim; ++a) mx = std::max(mx, static_cast<double>(px[a * inner]));
      double sum = 0;
      for (int64_t a = 0; a < dim; ++a) sum += std::exp(px[a * inner] - mx);
      double lse = mx + std::log(sum);
      for (int64_t a = 0; a < dim; ++a)
        py[a * inner] = static_cast<real>(log ? px[a * inner] - lse : std::exp(px[a * inner] - lse));
    }
}

void softmax_backward(int64_t outer, int64_t dim, int64_t inner, const real *dy, const real *y, real *dx,
                      bool log) {
  if (!log && detail::onednn::softmax_backward(outer, dim, inner, dy, y, dx)) return;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * dim * inner + i;
      double acc = 0;  // log: sum dY; softmax: sum dY * Y
      for (int64_t a = 0; a < dim; ++a) acc += log ? dy[base + a * inner] : dy[base + a * inner] * y[base + a * inner];
      for (int64_t a = 0; a < dim; ++a) {
        int64_t e = base + a * inner;
        dx[e] = static_cast<real>(log ? dy[e] - std::exp(static_cast<double>(y[e])) * acc : y[e] * (dy[e] - acc));
      }
    }
}

double loss_weight_total(const LossShape &s, const int64_t *labels, const real *weights) {
  double total = 0;
  for (int64_t i = 0; i < s.n * s.d; ++i) total += position_weight(s, labels, weights, i);
  return total;
}

double loss_weight_total_synced(const Comm &g, const LossShape &s, const int64_t *labels, const real *weights) {
  // Totals are sums of class weights (integers without weights): a floating all-reduce keeps them to rounding.
  real total = static_cast<real>(loss_weight_total(s, labels, weights));
  all_reduce_sum(g, &total, &total, 1);
  return total;
}

void sync_loss_divisor(const Comm &g, LossShape &s, const int64_t *labels, const real *weights) {
  s.mean_divisor = loss_weight_total_synced(g, s, labels, weights);
}

void softmax_cross_entropy_forward(const LossShape &s, const real *scores, const int64_t *labels,
                                   const real *weights, real *loss, real *log_prob) {
  std::vector<real> own;
  if (!log_prob) {
    own.resize(static_cast<size_t>(s.n * s.c * s.d));
    log_prob = own.data();
  }
  softmax_forward(s.n, s.c, s.d, scores, log_prob, true);
  loss_from_log_prob(s, log_prob, labels, weights, loss);
}

void softmax_cross_entropy_backward(const LossShape &s, const real *dloss, const real *log_prob,
                                    const int64_t *labels, const real *weights, real *dscores) {
  std::vector<double> g = upstream(s, dloss, labels, weights);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t d = 0; d < s.d; ++d) {
      double gi = g[static_cast<size_t>(n * s.d + d)];
      for (int64_t c = 0; c < s.c; ++c) {
        int64_t e = (n * s.c + c) * s.d + d;
        // An ignored position (gi = 0) has a zero gradient even where its log_prob is -inf.
        dscores[e] = gi == 0 ? 0.0f
                             : static_cast<real>(gi * (std::exp(static_cast<double>(log_prob[e])) -
                                                        (c == labels[n * s.d + d] ? 1.0 : 0.0)));
      }
    }
}

void nll_forward(const LossShape &s, const real *input, const int64_t *labels, const real *weights, real *loss) {
  loss_from_log_prob(s, input, labels, weights, loss);
}

void nll_backward(const LossShape &s, const real *dloss, const int64_t *labels, const real *weights,
                  real *dinput) {
  std::vector<double> g = upstream(s, dloss, labels, weights);
  for (int64_t e = 0; e < s.n * s.c * s.d; ++e) dinput[e] = 0.0f;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t d = 0; d < s.d; ++d) {
      double gi = g[static_cast<size_t>(n * s.d + d)];
      if (gi != 0) dinput[(n * s.c + labels[n * s.d + d]) * s.d + d] = static_cast<real>(-gi);
    }
}

}  // namespace cleave::rt
