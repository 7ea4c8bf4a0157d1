#include "cleave/schedule.h"

#include <algorithm>
#include <cmath>

namespace cleave::rt::sched {

std::string LrSchedule::problem() const {
  if (kind != "constant" && kind != "step" && kind != "multistep" && kind != "cosine" && kind != "linear" &&
      kind != "onecycle")
    return "--lr-schedule: \"" + kind + "\" is not constant, step, multistep, cosine, linear or onecycle";
  if (kind == "multistep" && milestones.empty()) return "--lr-schedule multistep: needs --milestones";
  if (!std::is_sorted(milestones.begin(), milestones.end())) return "--milestones: must be increasing";
  if (warmup > 0 && warmup >= total && kind != "onecycle")
    return "--warmup-steps " + std::to_string(warmup) + ": must be below the run's " + std::to_string(total) + " steps";
  if (kind == "onecycle" && warmup == 0 && 0.3 * static_cast<double>(total) < 2)
    return "--lr-schedule onecycle: needs at least 7 steps (or --warmup-steps)";
  return "";
}

double LrSchedule::lr(double base, int64_t step) const {
  double b = base, t = static_cast<double>(step - 1), n = static_cast<double>(total), w = static_cast<double>(warmup);
  constexpr double kPi = 3.14159265358979323846;
  if (kind == "onecycle") {
    double up = (warmup > 0 ? w : 0.3 * n) - 1, end = n - 1;
    double initial = b / 25, final_lr = initial / 1e4;
    auto anneal = [&](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(kPi * pct) + 1); };
    return t <= up ? anneal(initial, b, up > 0 ? t / up : 1) : anneal(b, final_lr, end > up ? (t - up) / (end - up) : 1);
  }
  if (warmup > 0 && t < w) return b * (t + 1) / w;
  double s = t - w, span = n - w;  // the schedule's own step and length after warm-up
  if (kind == "step") return b * std::pow(gamma, std::floor(s / static_cast<double>(step_size)));
  if (kind == "multistep")
    return b * std::pow(gamma, static_cast<double>(std::upper_bound(milestones.begin(), milestones.end(),
                                                                    static_cast<int64_t>(s)) - milestones.begin()));
  if (kind == "cosine") return min_lr + (b - min_lr) * (1 + std::cos(kPi * s / span)) / 2;
  if (kind == "linear") return b + (min_lr - b) * std::min(s, span) / span;
  return b;
}

namespace {

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int64_t SampleOrder::sample(int64_t at, int64_t count) {
  if (!shuffle_) return at % count;
  int64_t epoch = at / count;
  if (epoch != epoch_ || count != count_) {
    perm_.resize(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) perm_[static_cast<size_t>(k)] = k;
    uint64_t state = seed_ * 0x100000001b3ull + static_cast<uint64_t>(epoch);
    for (int64_t k = count - 1; k > 0; --k)
      std::swap(perm_[static_cast<size_t>(k)], perm_[splitmix64(state) % static_cast<uint64_t>(k + 1)]);
    epoch_ = epoch;
    count_ = count;
  }
  return perm_[static_cast<size_t>(at % count)];
}

}  // namespace cleave::rt::sched
