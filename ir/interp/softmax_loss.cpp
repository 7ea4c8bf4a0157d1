// Softmax, LogSoftmax, SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their gradients.
#include <cmath>
#include <optional>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** A tensor viewed as [outer, axis_dim, inner] around `axis`. */
struct AxisView {
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t at(int64_t o, int64_t a, int64_t i) const { return (o * dim + a) * inner + i; }
};

AxisView axis_view(const KernelArgs &k, const Shape &shape) {
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = norm_axis(k, k.op.attr_int("axis", -1), rank);
  AxisView v;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) v.outer *= shape[d];
    if (d == axis) v.dim = shape[d];
    if (d > axis) v.inner *= shape[d];
  }
  return v;
}

/** log_softmax of x along the view's axis. */
std::vector<double> log_softmax(const AxisView &v, const std::vector<double> &x) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double mx = -INFINITY;
      for (int64_t a = 0; a < v.dim; ++a) mx = std::max(mx, x[v.at(o, a, i)]);
      double sum = 0;
      for (int64_t a = 0; a < v.dim; ++a) sum += std::exp(x[v.at(o, a, i)] - mx);
      double lse = mx + std::log(sum);
      for (int64_t a = 0; a < v.dim; ++a) y[v.at(o, a, i)] = x[v.at(o, a, i)] - lse;
    }
  return y;
}

/** The per-position label and weight of a loss over input [N, C, d...] and labels [N, d...]. Weight is
 *  weight[label] (or 1 without weights), 0 where the label equals ignore_index. */
struct LossTargets {
  int64_t n = 0, c = 0, d = 1;  // positions are (n, d); input element (n, c, d) is at (n * C + c) * D + d
  std::vector<int64_t> label;
  std::vector<double> weight;
  double weight_sum = 0;
  enum class Reduction { none, sum, mean } reduction = Reduction::mean;
};

LossTargets loss_targets(const KernelArgs &k, const Shape &input, const Value &labels, const Value *weights) {
  if (input.size() < 2) CLEAVE_USER_ERROR(k.label(), ": input must have rank >= 2, got ", shape_str(input));
  Shape expect_labels = input;
  expect_labels.erase(expect_labels.begin() + 1);
  if (labels.shape != expect_labels)
    CLEAVE_USER_ERROR(k.label(), ": labels have shape ", shape_str(labels.shape), ", expected ",
                      shape_str(expect_labels));
  LossTargets t;
  t.n = input[0];
  t.c = input[1];
  t.d = t.n == 0 || t.c == 0 ? 0 : num_elements(input) / (t.n * t.c);
  if (weights && weights->shape != Shape{t.c})
    CLEAVE_USER_ERROR(k.label(), ": weights have shape ", shape_str(weights->shape), ", expected [", t.c, "]");
  std::string red = k.op.has_attr("reduction") ? k.op.attr_string("reduction") : "mean";
  if (red == "none") t.reduction = LossTargets::Reduction::none;
  else if (red == "sum") t.reduction = LossTargets::Reduction::sum;
  else if (red == "mean") t.reduction = LossTargets::Reduction::mean;
  else CLEAVE_USER_ERROR(k.label(), ": unknown reduction \"", red, "\"");
  std::optional<int64_t> ignore;
  if (k.op.has_attr("ignore_index")) ignore = k.op.attr_int("ignore_index");
  t.label.resize(labels.data.size());
  t.weight.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    int64_t l = as_index(labels.data[i]);
    t.label[i] = l;
    if (ignore && l == *ignore) {
      t.weight[i] = 0;
      continue;
    }
    if (l < 0 || l >= t.c) CLEAVE_USER_ERROR(k.label(), ": label ", l, " is out of range [0, ", t.c, ")");
    t.weight[i] = weights ? weights->data[l] : 1.0;
    t.weight_sum += t.weight[i];
  }
  return t;
}

/** loss from log-probabilities `logp` laid out as [N, C, D]. */
void loss_forward(const KernelArgs &k, const LossTargets &t, const std::vector<double> &logp) {
  Value &out = k.out(0);
  std::vector<double> per(t.label.size(), 0.0);
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t d = 0; d < t.d; ++d) {
      size_t i = static_cast<size_t>(n * t.d + d);
      if (t.weight[i] != 0) per[i] = -t.weight[i] * logp[(n * t.c + t.label[i]) * t.d + d];
    }
  if (t.reduction == LossTargets::Reduction::none) {
    CLEAVE_CHECK(out.data.size() == per.size(), k.label(), ": loss shape ", shape_str(out.shape));
    out.data = per;
    return;
  }
  k.expect_out_shape(0, Shape{});
  double sum = 0;
  for (double v : per) sum += v;
  // mean divides by the total weight (0/0 = nan when every position is ignored, as in ONNX and torch).
  out.data[0] = t.reduction == LossTargets::Reduction::sum ? sum : sum / t.weight_sum;
}

/** d(loss)/d(loss term of position i), from dloss and the reduction. */
double upstream(const LossTargets &t, const Value &dloss, size_t i) {
  switch (t.reduction) {
    case LossTargets::Reduction::none: return dloss.data[i];
    case LossTargets::Reduction::sum: return dloss.data[0];
    case LossTargets::Reduction::mean: return dloss.data[0] / t.weight_sum;
  }
  return 0;
}

}  // namespace

void kernel_Softmax(const KernelArgs &k) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  std::vector<double> y = log_softmax(axis_view(k, x.shape), x.data);
  for (double &v : y) v = std::exp(v);
  k.out(0).data = y;
}

void kernel_LogSoftmax(const KernelArgs &k) {
  const Value &x = k.in(0);
  k.expect_out_shape(0, x.shape);
  k.out(0).data = log_softmax(axis_view(k, x.shape), x.data);
}

void kernel_SoftmaxGrad(const KernelArgs &k) {
  // (dY, Y) -> dX = Y * (dY - sum_axis(dY * Y))
  const Value &dy = k.in(0);
  const Value &y = k.in(1);
  k.expect_out_shape(0, y.shape);
  AxisView v = axis_view(k, y.shape);
  Value &dx = k.out(0);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double dot = 0;
      for (int64_t a = 0; a < v.dim; ++a) dot += dy.data[v.at(o, a, i)] * y.data[v.at(o, a, i)];
      for (int64_t a = 0; a < v.dim; ++a) dx.data[v.at(o, a, i)] = y.data[v.at(o, a, i)] * (dy.data[v.at(o, a, i)] - dot);
    }
}

void kernel_LogSoftmaxGrad(const KernelArgs &k) {
  // (dY, Y) with Y = log_softmax(X) -> dX = dY - exp(Y) * sum_axis(dY)
  const Value &dy = k.in(0);
  const Value &y = k.in(1);
  k.expect_out_shape(0, y.shape);
  AxisView v = axis_view(k, y.shape);
  Value &dx = k.out(0);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      double sum = 0;
      for (int64_t a = 0; a < v.dim; ++a) sum += dy.data[v.at(o, a, i)];
      for (int64_t a = 0; a < v.dim; ++a)
        dx.data[v.at(o, a, i)] = dy.data[v.at(o, a, i)] - std::exp(y.data[v.at(o, a, i)]) * sum;
    }
}

void kernel_SoftmaxCrossEntropyLoss(const KernelArgs &k) {
  // (scores, labels, weights?) -> (loss, log_prob?); the class axis is 1.
  const Value &x = k.in(0);
  LossTargets t = loss_targets(k, x.shape, k.in(1), k.has_in(2) ? &k.in(2) : nullptr);
  AxisView v{t.n, t.c, t.d};
  std::vector<double> logp = log_softmax(v, x.data);
  loss_forward(k, t, logp);
  if (k.has_out(1)) {
    k.expect_out_shape(1, x.shape);
    k.outs[1]->data = logp;
  }
}

void kernel_NegativeLogLikelihoodLoss(const KernelArgs &k) {
  const Value &x = k.in(0);
  LossTargets t = loss_targets(k, x.shape, k.in(1), k.has_in(2) ? &k.in(2) : nullptr);
  loss_forward(k, t, x.data);
}

void kernel_SoftmaxCrossEntropyLossGrad(const KernelArgs &k) {
  // (dloss, log_prob, labels, weights?) -> dscores[n, c, d] = g_i * w_i * (softmax[n, c, d] - [c == label_i])
  const Value &dloss = k.in(0);
  const Value &logp = k.in(1);
  LossTargets t = loss_targets(k, logp.shape, k.in(2), k.has_in(3) ? &k.in(3) : nullptr);
  k.expect_out_shape(0, logp.shape);
  Value &dx = k.out(0);
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t d = 0; d < t.d; ++d) {
      size_t i = static_cast<size_t>(n * t.d + d);
      if (t.weight[i] == 0) continue;
      double g = upstream(t, dloss, i) * t.weight[i];
      for (int64_t c = 0; c < t.c; ++c) {
        int64_t e = (n * t.c + c) * t.d + d;
        dx.data[e] = g * (std::exp(logp.data[e]) - (c == t.label[i] ? 1.0 : 0.0));
      }
    }
}

void kernel_NegativeLogLikelihoodLossGrad(const KernelArgs &k) {
  // (dloss, input, target, weight?) -> dinput[n, label_i, d] = -g_i * w_i, zero elsewhere
  const Value &dloss = k.in(0);
  const Value &x = k.in(1);
  LossTargets t = loss_targets(k, x.shape, k.in(2), k.has_in(3) ? &k.in(3) : nullptr);
  k.expect_out_shape(0, x.shape);
  Value &dx = k.out(0);
  for (int64_t n = 0; n < t.n; ++n)
    for (int64_t d = 0; d < t.d; ++d) {
      size_t i = static_cast<size_t>(n * t.d + d);
      if (t.weight[i] == 0) continue;
      dx.data[(n * t.c + t.label[i]) * t.d + d] = -upstream(t, dloss, i) * t.weight[i];
    }
}

}  // namespace cleave::interp
