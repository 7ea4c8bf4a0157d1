#pragma once
// Validation metrics of a classifier, shared by the rank programs (rt::TrainingRun, --val-data) and `cleave eval`,
// so both report the same numbers: over every sample of the validation set, the loss op's weighted mean loss and the
// share of positions whose highest score is the label (torch: model.eval(), then F.cross_entropy / F.nll_loss over
// the whole set and (scores.argmax(1) == labels).float().mean()). Header-only: the interpreter computes in double,
// the ranks in float.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cleave::rt::val {

/** Sums over the positions seen so far; summed over ranks, they are the whole set's. */
struct Sums {
  double loss = 0;       // sum of weight * loss over counted positions
  double weight = 0;     // sum of the weights (1 per position without class weights)
  double correct = 0;    // positions whose argmax over the classes is the label
  double positions = 0;  // positions not ignored

  double mean_loss() const { return weight > 0 ? loss / weight : NAN; }
  double accuracy() const { return positions > 0 ? correct / positions : NAN; }
};

/** What a loss op scores: logits (SoftmaxCrossEntropyLoss) or log-probabilities (NegativeLogLikelihoodLoss), with
 *  the op's optional class weights [c] and ignore_index. */
struct LossKind {
  bool log_probs = false;
  bool has_ignore_index = false;
  int64_t ignore_index = -100;
};

/** Adds samples [0, min(n, fresh)) of scores [n, c, d] with labels [n, d] (a last batch that wrapped around to the
 *  set's first samples has fresh < n: those samples are counted once already). Returns -1, or the first sample whose
 *  label is outside [0, c) and not ignored (nothing of it added). */
template <typename T, typename L>
int64_t add_classified(Sums &s, const LossKind &k, int64_t n, int64_t c, int64_t d, const T *scores, const L *labels,
                    const T *weights, int64_t fresh) {
  for (int64_t i = 0; i < n && i < fresh; ++i)
    for (int64_t p = 0; p < d; ++p) {
      int64_t y = static_cast<int64_t>(labels[i * d + p]);
      if (k.has_ignore_index && y == k.ignore_index) continue;
      if (y < 0 || y >= c) return i;
      const T *row = scores + i * c * d + p;  // row[j * d] is class j's score
      int64_t best = 0;
      double top = static_cast<double>(row[0]);
      bool nan = std::isnan(top);
      for (int64_t j = 1; j < c; ++j) {
        double v = static_cast<double>(row[j * d]);
        nan |= std::isnan(v);
        if (v > top) top = v, best = j;
      }
      double log_prob = static_cast<double>(row[y * d]);
      if (!k.log_probs) {  // log_softmax(row)[y] = row[y] - max - log(sum exp(row - max))
        double sum = 0;
        for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j * d]) - top);
        log_prob -= top + std::log(sum);
      }
      double w = weights ? static_cast<double>(weights[y]) : 1.0;
      s.loss -= w * (nan ? NAN : log_prob);
      s.weight += w;
      s.correct += !nan && best == y;
      s.positions += 1;
    }
  return -1;
}

/** The line a validation prints: `val <step> loss <v> accuracy <a>`. */
inline std::string line(int64_t step, const Sums &s) {
  char buf[96];
  double loss = s.mean_loss(), accuracy = s.accuracy();
  std::snprintf(buf, sizeof buf, "val %lld loss %.9g accuracy %.6f", static_cast<long long>(step),
                std::isnan(loss) ? std::fabs(loss) : loss, std::isnan(accuracy) ? std::fabs(accuracy) : accuracy);
  return buf;
}

}  // namespace cleave::rt::val
