// TensorOpt's modes over frontier searches, and the baselines beside a frontier (frontier_modes.h).
#include "planner/search/frontier_modes.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"

namespace cleave::plan {
namespace {

/** frontier_search over `devices` devices, timed for `on_search`. */
FrontierResult timed_search(const Graph &g, int devices, const Topology &t, const Profile *profile,
                            const FrontierProgress &on_search) {
  auto t0 = std::chrono::steady_clock::now();
  FrontierResult r = frontier_search(g, devices, t, {}, profile);
  if (on_search) on_search(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return r;
}

}  // namespace

const char *frontier_mode_name(FrontierMode mode) {
  switch (mode) {
    case FrontierMode::mini_time: return "mini-time";
    case FrontierMode::mini_parallelism: return "mini-parallelism";
    case FrontierMode::profile: return "profile";
  }
  CLEAVE_CHECK(false, "frontier mode ", static_cast<int>(mode));
  return "";
}

std::optional<FrontierMode> parse_frontier_mode(const std::string &name) {
  for (FrontierMode m : {FrontierMode::mini_time, FrontierMode::mini_parallelism, FrontierMode::profile})
    if (name == frontier_mode_name(m)) return m;
  return std::nullopt;
}

std::vector<int> device_count_range(int lo, int hi) {
  CLEAVE_CHECK(1 <= lo && lo <= hi, "device count range ", lo, "..", hi);
  std::vector<int> out{lo};
  for (int p = 1; p < hi; p *= 2)
    if (p > lo) out.push_back(p);
  if (hi > lo) out.push_back(hi);
  return out;
}

std::optional<double> fastest_fitting_seconds(const FrontierResult &r, int64_t memory_limit) {
  for (const FrontierPlan &f : r.frontier)  // least time first
    if (f.peak_memory_bytes <= memory_limit) return f.step_seconds;
  return std::nullopt;
}

size_t fewest_devices_within_slack(const std::vector<FrontierResult> &results, int64_t memory_limit) {
  CLEAVE_CHECK(!results.empty());
  std::optional<double> best;
  for (const FrontierResult &r : results) {
    std::optional<double> t = fastest_fitting_seconds(r, memory_limit);
    if (t && (!best || *t < *best)) best = t;
  }
  if (!best) (void)fastest_fitting(results.back(), memory_limit);  // throws, naming --memory-limit
  for (size_t i = 0; i < results.size(); ++i) {
    std::optional<double> t = fastest_fitting_seconds(results[i], memory_limit);
    if (t && *t <= kMiniParallelismSlack * *best) return i;
  }
  CLEAVE_CHECK(false, "the best time ", *best, " is no result's");
  return 0;
}

FrontierChoice frontier_choose(const Graph &g, FrontierMode mode, int devices, const Topology &t, int64_t memory_limit,
                               const Profile *profile, const FrontierProgress &on_search) {
  CLEAVE_CHECK(mode != FrontierMode::profile, "frontier_choose runs mini-time and mini-parallelism");
  FrontierChoice c;
  c.mode = mode;
  c.memory_limit = memory_limit;
  std::vector<int> counts =
      mode == FrontierMode::mini_parallelism ? device_count_range(1, devices) : std::vector<int>{devices};
  for (int n : counts) c.results.push_back(timed_search(g, n, t, profile, on_search));
  c.chosen = mode == FrontierMode::mini_parallelism ? fewest_devices_within_slack(c.results, memory_limit)
                                                    : c.results.size() - 1;
  const FrontierResult &r = c.results[c.chosen];
  c.point = static_cast<size_t>(&fastest_fitting(r, memory_limit) - r.frontier.data());
  return c;
}

std::vector<FrontierProfileRow> frontier_profile(const Graph &g, const std::vector<int> &counts, const Topology &t,
                                                 const Profile *profile, const FrontierProgress &on_search) {
  std::vector<FrontierProfileRow> rows;
  for (int n : counts) {
    FrontierResult r = timed_search(g, n, t, profile, on_search);
    const FrontierPlan &f = r.frontier.front();  // the fastest
    rows.push_back({n, f.step_seconds, f.peak_memory_bytes, r.frontier.size()});
  }
  return rows;
}

std::string frontier_profile_table(const std::vector<FrontierProfileRow> &rows, const std::string &topology) {
  std::ostringstream out;
  out << "# frontier profile topology=" << topology << "\n# devices best_step_seconds peak_memory_bytes points\n";
  for (const FrontierProfileRow &row : rows) {
    char line[160];
    std::snprintf(line, sizeof line, "%d %.6e %lld %zu\n", row.devices, row.step_seconds,
                  static_cast<long long>(row.peak_memory_bytes), row.points);
    out << line;
  }
  return out.str();
}

BaselineStanding baseline_standing(const FrontierResult &r, double step_seconds, int64_t peak_memory_bytes) {
  bool below = false, dominated = false;
  for (const FrontierPlan &f : r.frontier) {
    below = below || (step_seconds <= f.step_seconds && peak_memory_bytes <= f.peak_memory_bytes &&
                      (step_seconds < f.step_seconds || peak_memory_bytes < f.peak_memory_bytes));
    dominated = dominated || (f.step_seconds <= step_seconds && f.peak_memory_bytes <= peak_memory_bytes);
  }
  return below ? BaselineStanding::dominates_a_frontier_point
         : dominated ? BaselineStanding::dominated
                     : BaselineStanding::beside;
}

const char *baseline_standing_name(BaselineStanding s) {
  switch (s) {
    case BaselineStanding::dominates_a_frontier_point: return "dominates-a-frontier-point";
    case BaselineStanding::dominated: return "dominated";
    case BaselineStanding::beside: return "beside";
  }
  CLEAVE_CHECK(false, "baseline standing ", static_cast<int>(s));
  return "";
}

std::vector<FrontierBaseline> frontier_baselines(const Graph &g, const FrontierResult &r,
                                                 const std::vector<std::string> &planners, const Topology &t,
                                                 const Profile *profile) {
  std::vector<FrontierBaseline> out;
  if (planners.empty()) return out;
  std::vector<Plan> plans;
  for (const std::string &name : planners) {
    plans.push_back(make_plan(g, name, r.devices, &t, 0, profile));
    CostReport c = estimate_cost(g, plans.back(), t, profile);
    FrontierBaseline b;
    b.point = {name, c.predicted_step_seconds, c.peak_memory_bytes};
    b.standing = baseline_standing(r, b.point.step_seconds, b.point.peak_memory_bytes);
    out.push_back(b);
  }
  std::vector<ModelledPlan> modelled = frontier_model_costs(g, r.devices, t, plans, profile);
  for (size_t i = 0; i < out.size(); ++i) out[i].model = modelled[i];
  return out;
}

std::string frontier_choice_table(const FrontierChoice &c, const std::vector<FrontierBaseline> &baselines,
                                  const std::string &topology, int ops) {
  std::string table = frontier_table(c.result(), topology);
  char line[200];
  for (const FrontierBaseline &b : baselines) {
    std::snprintf(line, sizeof line, "# baseline %s %.6e %lld %s\n", b.point.label.c_str(), b.point.step_seconds,
                  static_cast<long long>(b.point.peak_memory_bytes), baseline_standing_name(b.standing));
    table += line;
  }
  // The search's own model of each baseline, beside the re-scored points: where a baseline beats the frontier, the
  // model's numbers tell whether the candidates lack it (few ops matched) or the model misprices it.
  for (const FrontierBaseline &b : baselines) {
    std::snprintf(line, sizeof line,
                  "# baseline-model %s ft_seconds=%.6e ft_memory_bytes=%lld ops_among_candidates=%d/%d\n",
                  b.point.label.c_str(), b.model.model.time, static_cast<long long>(std::llround(b.model.model.memory)),
                  b.model.ops_matched, ops);
    table += line;
  }
  const FrontierPlan &pick = c.pick();
  std::snprintf(line, sizeof line, "# chosen %s devices=%d step_seconds=%.6e peak_memory_bytes=%lld limit=%lld\n",
                frontier_mode_name(c.mode), c.result().devices, pick.step_seconds,
                static_cast<long long>(pick.peak_memory_bytes), static_cast<long long>(c.memory_limit));
  table += line;
  return table;
}

}  // namespace cleave::plan
