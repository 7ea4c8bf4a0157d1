#include "planner/cost/profile_stats.h"

#include <algorithm>
#include <optional>

#include "ir/error.h"
#include "planner/cost/cost_model.h"

namespace cleave::plan {
namespace {

/** fit_rank_scale (profile.h) on the kernel shares that several ranks ran (per share, each rank's mean), or nothing
 *  when no share ran on two ranks. */
std::optional<std::vector<double>> rank_scale(const ProfileSamples &samples, int ranks) {
  std::vector<std::vector<double>> times;
  for (const auto &[key, v] : samples.compute) {
    std::vector<double> sum(static_cast<size_t>(ranks), 0.0), count(static_cast<size_t>(ranks), 0.0);
    for (const ProfileSample &x : v)
      sum.at(static_cast<size_t>(x.rank)) += x.seconds, ++count[static_cast<size_t>(x.rank)];
    for (size_t r = 0; r < sum.size(); ++r)
      if (count[r] > 0) sum[r] /= count[r];
    times.push_back(std::move(sum));
  }
  return fit_rank_scale(times, ranks);
}

/** The mean of samples taken on ranks of different speed, each brought to the mean speed (divided by its rank's
 *  scale). */
double normalised_mean(const std::vector<ProfileSample> &v, const std::vector<double> &scale) {
  CLEAVE_CHECK(!v.empty(), "mean of nothing");
  double sum = 0;
  for (const ProfileSample &x : v) sum += x.seconds / scale.at(static_cast<size_t>(x.rank));
  return sum / static_cast<double>(v.size());
}

std::vector<double> after_warm_up(std::vector<double> s) {
  if (s.size() > 1) s.erase(s.begin());
  return s;
}

}  // namespace

double median(std::vector<double> v) {
  CLEAVE_CHECK(!v.empty(), "median of nothing");
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double expected_seconds(const std::vector<double> &v) {
  double cap = 5 * median(v), sum = 0;
  int n = 0;
  for (double x : v)
    if (x <= cap) sum += x, ++n;
  return sum / n;  // n >= 1: the median is at most the cap
}

double add_profile_run(ProfileSamples &samples, const Graph &g, const Plan &p, const std::string &plan_name,
                       const std::vector<RankFile> &ranks) {
  CLEAVE_CHECK(static_cast<int>(ranks.size()) == p.devices, "one rank file per device");
  std::map<std::string, const ParallelConfig *> configs;
  for (const auto &o : p.ops) configs[o.name] = &o.config;
  std::vector<int64_t> statements = device_statements(p, derive_communication(g, p));
  double step = 0;
  for (int r = 0; r < p.devices; ++r) {
    const std::string &file = ranks[static_cast<size_t>(r)].path;
    const RankTimings &rt = ranks[static_cast<size_t>(r)].timings;
    if (rt.rank != r) CLEAVE_USER_ERROR(file, ": rank: ", rt.rank, ", not ", r, " as its name says");
    std::vector<double> steps = after_warm_up(rt.steps);
    if (r == 0) step = median(steps);
    // The step time outside every timed statement (profile.h statement_gap): a GPU waiting for the host's next launch.
    // Statements overlapping on two streams may sum past the step: no gap then.
    std::vector<double> outside = steps;
    for (const RankTimings::Site &site : rt.sites) {
      std::vector<double> timed = after_warm_up(site.seconds);  // as many as steps (parse_rank_timings)
      for (size_t k = 0; k < steps.size(); ++k) outside[k] -= timed[k];
      if (site.kind == "copy" || site.kind == "data") {
        samples.statements[site.kind][site.bytes].push_back({r, expected_seconds(timed)});
        continue;
      }
      if (site.kind != "kernel") continue;
      double secs = expected_seconds(timed) / static_cast<double>(site.ops.size());  // a fused kernel: equal shares
      for (const std::string &op : site.ops) {
        auto c = configs.find(op);
        const std::vector<int> *devices = c == configs.end() ? nullptr : &c->second->devices;
        auto it = devices ? std::find(devices->begin(), devices->end(), r) : std::vector<int>::const_iterator{};
        if (!devices || it == devices->end())
          CLEAVE_USER_ERROR(file, ": a kernel site times op \"", op, "\", which plan ", plan_name,
                            " does not run on rank ", r);
        std::string key = shard_key(g, g.op(*g.find_op(op)), *c->second, it - devices->begin());
        samples.compute[{op, key}].push_back({r, secs});
      }
    }
    for (double &x : outside) x = std::max(x, 0.0);
    // A single step is the warm-up itself (allocations, communicator set-up): no gap from it.
    if (statements[static_cast<size_t>(r)] > 0 && rt.steps.size() > 1)
      samples.gaps.push_back(median(outside) / static_cast<double>(statements[static_cast<size_t>(r)]));
  }
  return step;
}

void summarise_samples(const ProfileSamples &samples, int devices, bool fit_rank_speeds, Profile &profile) {
  std::vector<double> scale(static_cast<size_t>(devices), 1.0);
  if (fit_rank_speeds)
    if (std::optional<std::vector<double>> fitted = rank_scale(samples, devices)) scale = profile.rank_scale = *fitted;
  for (const auto &[key, secs] : samples.compute)
    profile.compute[key.first][key.second] = std::max(normalised_mean(secs, scale), 1e-9);
  for (const auto &[kind, sizes] : samples.statements)
    for (const auto &[bytes, secs] : sizes)
      profile.statements[kind].emplace_back(static_cast<double>(bytes), std::max(normalised_mean(secs, scale), 1e-9));
  if (!samples.gaps.empty()) profile.statement_gap = median(samples.gaps);
}

}  // namespace cleave::plan
