// TensorOpt's modes (planner/search/frontier_modes.h): every choice checked against brute force over the
// FrontierResults it is made from (computed here without the library's assumption that a frontier is sorted by time),
// on made-up frontiers and on the MLP's.
#include "planner/search/frontier_modes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"

namespace cleave::plan {
namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

Graph training_graph(const std::string &model) {
  ImportOptions opts;
  opts.batch = 8;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

/** Brute force: the index of the least-time frontier point whose peak fits `limit` (the first of equal times), or
 *  nullopt. */
std::optional<size_t> brute_fastest_fitting(const FrontierResult &r, int64_t limit) {
  std::optional<size_t> best;
  for (size_t i = 0; i < r.frontier.size(); ++i)
    if (r.frontier[i].peak_memory_bytes <= limit &&
        (!best || r.frontier[i].step_seconds < r.frontier[*best].step_seconds))
      best = i;
  return best;
}

/** Brute force: mini-parallelism's index (the fewest devices within 5% of the best fitting time of all), or nullopt
 *  when nothing fits. */
std::optional<size_t> brute_fewest_devices(const std::vector<FrontierResult> &results, int64_t limit) {
  std::vector<std::optional<double>> fit;
  std::optional<double> best;
  for (const FrontierResult &r : results) {
    std::optional<size_t> i = brute_fastest_fitting(r, limit);
    fit.push_back(i ? std::optional<double>(r.frontier[*i].step_seconds) : std::nullopt);
    if (fit.back()) best = best ? std::min(*best, *fit.back()) : *fit.back();
  }
  if (!best) return std::nullopt;
  for (size_t i = 0; i < fit.size(); ++i)
    if (fit[i] && *fit[i] <= 1.05 * *best) return i;
  return std::nullopt;
}

/** Every peak of every frontier of `results`, one byte under each, and no limit: the limits at which choices change. */
std::vector<int64_t> interesting_limits(const std::vector<FrontierResult> &results) {
  std::set<int64_t> limits{kNoLimit};
  for (const FrontierResult &r : results)
    for (const FrontierPlan &f : r.frontier) limits.insert({f.peak_memory_bytes, f.peak_memory_bytes - 1});
  return {limits.begin(), limits.end()};
}

FrontierPlan point(double seconds, int64_t bytes) {
  FrontierPlan f;
  f.step_seconds = seconds;
  f.peak_memory_bytes = bytes;
  return f;
}

FrontierResult made_up(int devices, std::vector<FrontierPlan> frontier) {
  FrontierResult r;
  r.devices = devices;
  r.frontier = std::move(frontier);
  return r;
}

/** Deterministic made-up frontiers over 1, 2, 4, 8 devices: per count up to 4 points, times falling and peaks rising
 *  from one point to the next in reverse (a valid frontier, least time first), times near each other across counts so
 *  the 5% slack decides. */
std::vector<FrontierResult> made_up_results(uint64_t seed) {
  uint64_t s = seed;
  auto next = [&](int mod) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((s >> 33) % mod);
  };
  std::vector<FrontierResult> out;
  for (int n : {1, 2, 4, 8}) {
    std::vector<FrontierPlan> f;
    double t = 100 + next(12);
    int64_t m = 80 + next(40);
    for (int k = 1 + next(4); k > 0; --k) {
      f.push_back(point(t, m));
      t += 1 + next(6);
      m -= 1 + next(15);
    }
    out.push_back(made_up(n, f));
  }
  return out;
}

TEST(FrontierModes, NamesRoundTrip) {
  for (FrontierMode m : {FrontierMode::mini_time, FrontierMode::mini_parallelism, FrontierMode::profile})
    EXPECT_EQ(parse_frontier_mode(frontier_mode_name(m)), m);
  EXPECT_EQ(parse_frontier_mode("fast"), std::nullopt);
  EXPECT_EQ(parse_frontier_mode(""), std::nullopt);
}

TEST(FrontierModes, DeviceCountRangeIsTheEndsAndThePowersOfTwoBetween) {
  for (int lo = 1; lo <= 20; ++lo)
    for (int hi = lo; hi <= 40; ++hi) {
      std::set<int> want{lo, hi};
      for (int p = 1; p <= hi; p *= 2)
        if (p > lo && p < hi) want.insert(p);
      EXPECT_EQ(device_count_range(lo, hi), std::vector<int>(want.begin(), want.end())) << lo << ".." << hi;
    }
}

TEST(FrontierModes, FastestFittingSecondsMatchesBruteForce) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<FrontierResult> results = made_up_results(seed);
    for (const FrontierResult &r : results)
      for (int64_t limit : interesting_limits(results)) {
        std::optional<size_t> i = brute_fastest_fitting(r, limit);
        std::optional<double> got = fastest_fitting_seconds(r, limit);
        ASSERT_EQ(got.has_value(), i.has_value()) << "limit " << limit;
        if (i) {
          EXPECT_EQ(*got, r.frontier[*i].step_seconds);
        }
      }
  }
}

TEST(FrontierModes, FewestDevicesMatchesBruteForceOnMadeUpFrontiers) {
  std::set<size_t> chosen;  // the cases reach more than the first and the last count
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    std::vector<FrontierResult> results = made_up_results(seed);
    for (int64_t limit : interesting_limits(results)) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " limit " + std::to_string(limit));
      std::optional<size_t> want = brute_fewest_devices(results, limit);
      if (!want) {
        EXPECT_THROW(fewest_devices_within_slack(results, limit), UserError);
        continue;
      }
      EXPECT_EQ(fewest_devices_within_slack(results, limit), *want);
      chosen.insert(*want);
    }
  }
  EXPECT_EQ(chosen, (std::set<size_t>{0, 1, 2, 3}));
}

TEST(FrontierModes, FewestDevicesKeepsTheSlack) {
  // 5.2 is within 5% of 5.0, 5.3 is not; memory does not bind.
  std::vector<FrontierResult> within{made_up(1, {point(10, 1)}), made_up(2, {point(5.2, 1)}),
                                     made_up(4, {point(5.0, 1)})};
  EXPECT_EQ(fewest_devices_within_slack(within, kNoLimit), *brute_fewest_devices(within, kNoLimit));
  std::vector<FrontierResult> beyond = within;
  beyond[1].frontier[0].step_seconds = 5.3;
  EXPECT_EQ(fewest_devices_within_slack(beyond, kNoLimit), *brute_fewest_devices(beyond, kNoLimit));
  EXPECT_NE(*brute_fewest_devices(within, kNoLimit), *brute_fewest_devices(beyond, kNoLimit));
}

TEST(FrontierModes, BaselineStandingMatchesTheDefinitions) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    FrontierResult r = made_up_results(seed)[3];
    // Points at, around and beyond every frontier point.
    std::set<std::pair<double, int64_t>> probes;
    for (const FrontierPlan &f : r.frontier)
      for (double dt : {-1.0, -0.5, 0.0, 0.5, 1.0})
        for (int64_t dm : {-3, -1, 0, 1, 3}) probes.insert({f.step_seconds + dt, f.peak_memory_bytes + dm});
    std::set<BaselineStanding> seen;
    for (auto [t, m] : probes) {
      bool below = std::any_of(r.frontier.begin(), r.frontier.end(), [&](const FrontierPlan &f) {
        return t <= f.step_seconds && m <= f.peak_memory_bytes && !(t == f.step_seconds && m == f.peak_memory_bytes);
      });
      bool above = std::any_of(r.frontier.begin(), r.frontier.end(),
                               [&](const FrontierPlan &f) { return f.step_seconds <= t && f.peak_memory_bytes <= m; });
      BaselineStanding want = below   ? BaselineStanding::dominates_a_frontier_point
                              : above ? BaselineStanding::dominated
                                      : BaselineStanding::beside;
      EXPECT_EQ(baseline_standing(r, t, m), want) << "seed " << seed << " point " << t << " " << m;
      seen.insert(want);
    }
    EXPECT_EQ(seen.size(), 3u) << "seed " << seed;
  }
  EXPECT_STREQ(baseline_standing_name(BaselineStanding::dominates_a_frontier_point), "dominates-a-frontier-point");
  EXPECT_STREQ(baseline_standing_name(BaselineStanding::dominated), "dominated");
  EXPECT_STREQ(baseline_standing_name(BaselineStanding::beside), "beside");
}

// On the MLP's frontiers over 1, 2 and 4 devices: mini-time and mini-parallelism choose what brute force over the
// searches' results chooses, at every limit where a choice can change; a limit nothing fits names the flag.
TEST(FrontierModes, ChoicesOnTheMlpMatchBruteForce) {
  Graph g = training_graph("mlp.onnx");
  Topology t = preset_topology("k80x8");
  std::vector<FrontierResult> results;
  for (int n : device_count_range(1, 4)) results.push_back(frontier_search(g, n, t));
  ASSERT_EQ(results.size(), 3u);
  std::vector<int64_t> limits = interesting_limits(results);
  std::set<int> devices_chosen;
  for (int64_t limit : limits) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    std::optional<size_t> want = brute_fewest_devices(results, limit);
    if (!want) {
      EXPECT_THROW(fewest_devices_within_slack(results, limit), UserError);
      continue;
    }
    EXPECT_EQ(fewest_devices_within_slack(results, limit), *want);
    devices_chosen.insert(results[*want].devices);
  }
  EXPECT_GT(devices_chosen.size(), 1u) << "the limits should move the choice off one device";

  // The whole mode, searches included, at the tightest limit that fits somewhere and at none.
  int64_t tightest = kNoLimit;
  for (int64_t limit : limits)
    if (brute_fewest_devices(results, limit)) tightest = std::min(tightest, limit);
  for (int64_t limit : {tightest, kNoLimit}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    size_t want = *brute_fewest_devices(results, limit);
    FrontierChoice c = frontier_choose(g, FrontierMode::mini_parallelism, 4, t, limit);
    ASSERT_EQ(c.results.size(), results.size());
    for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(c.results[i].devices, results[i].devices);
    EXPECT_EQ(c.chosen, want);
    size_t at = *brute_fastest_fitting(results[want], limit);
    EXPECT_EQ(c.pick().step_seconds, results[want].frontier[at].step_seconds);
    EXPECT_EQ(c.pick().peak_memory_bytes, results[want].frontier[at].peak_memory_bytes);
    EXPECT_EQ(print_plan(c.pick().plan), print_plan(results[want].frontier[at].plan));
  }

  // mini-time over 4 devices: the fastest point of that frontier that fits, whatever fewer devices could do.
  const FrontierResult &four = results.back();
  for (int64_t limit : {four.frontier.back().peak_memory_bytes, four.frontier.front().peak_memory_bytes, kNoLimit}) {
    SCOPED_TRACE("mini-time limit " + std::to_string(limit));
    FrontierChoice c = frontier_choose(g, FrontierMode::mini_time, 4, t, limit);
    ASSERT_EQ(c.results.size(), 1u);
    EXPECT_EQ(c.result().devices, 4);
    size_t at = *brute_fastest_fitting(four, limit);
    EXPECT_EQ(c.pick().step_seconds, four.frontier[at].step_seconds);
    EXPECT_EQ(print_plan(c.pick().plan), print_plan(four.frontier[at].plan));
  }
  int64_t under = four.frontier.back().peak_memory_bytes - 1;
  for (FrontierMode m : {FrontierMode::mini_time, FrontierMode::mini_parallelism}) {
    int64_t limit = m == FrontierMode::mini_time ? under : tightest - 1;
    try {
      frontier_choose(g, m, 4, t, limit);
      ADD_FAILURE() << frontier_mode_name(m) << ": no error";
    } catch (const UserError &e) {
      EXPECT_NE(std::string(e.what()).find("--memory-limit " + std::to_string(limit)), std::string::npos) << e.what();
    }
  }
}

// profile: per device count the least-time frontier point and the frontier's size, and its table.
TEST(FrontierModes, ProfileRowsMatchTheSearches) {
  Graph g = training_graph("mlp.onnx");
  Topology t = preset_topology("k80x8");
  std::vector<int> counts{1, 2, 4};
  std::vector<int> searched;
  std::vector<FrontierProfileRow> rows =
      frontier_profile(g, counts, t, nullptr, [&](const FrontierResult &r, double) { searched.push_back(r.devices); });
  EXPECT_EQ(searched, counts);
  ASSERT_EQ(rows.size(), counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    FrontierResult r = frontier_search(g, counts[i], t);
    size_t fastest = *brute_fastest_fitting(r, kNoLimit);
    EXPECT_EQ(rows[i].devices, counts[i]);
    EXPECT_EQ(rows[i].step_seconds, r.frontier[fastest].step_seconds);
    EXPECT_EQ(rows[i].peak_memory_bytes, r.frontier[fastest].peak_memory_bytes);
    EXPECT_EQ(rows[i].points, r.frontier.size());
  }
  std::string table = frontier_profile_table(rows, t.name);
  EXPECT_EQ(table.rfind("# frontier profile topology=k80x8\n", 0), 0u) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), static_cast<long>(2 + rows.size()));
}

// Baselines: estimate_cost's point of each planner's plan, its standing by brute force, and the table's lines.
TEST(FrontierModes, BaselinesAndTheChoiceTable) {
  Graph g = training_graph("mlp.onnx");
  Topology t = preset_topology("k80x8");
  FrontierChoice c = frontier_choose(g, FrontierMode::mini_time, 4, t, t.device.memory_bytes);
  std::vector<std::string> names{"data", "owt", "tofu", "single"};
  std::vector<FrontierBaseline> b = frontier_baselines(g, c.result(), names, t);
  ASSERT_EQ(b.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    CostReport cost = estimate_cost(g, make_plan(g, names[i], 4, &t), t);
    EXPECT_EQ(b[i].point.label, names[i]);
    EXPECT_EQ(b[i].point.step_seconds, cost.predicted_step_seconds);
    EXPECT_EQ(b[i].point.peak_memory_bytes, cost.peak_memory_bytes);
    bool below = false, above = false;
    for (const FrontierPlan &f : c.result().frontier) {
      std::pair<double, int64_t> p{cost.predicted_step_seconds, cost.peak_memory_bytes};
      below = below || (p.first <= f.step_seconds && p.second <= f.peak_memory_bytes &&
                        p != std::pair<double, int64_t>{f.step_seconds, f.peak_memory_bytes});
      above = above || (f.step_seconds <= p.first && f.peak_memory_bytes <= p.second);
    }
    EXPECT_EQ(b[i].standing, below   ? BaselineStanding::dominates_a_frontier_point
                             : above ? BaselineStanding::dominated
                                     : BaselineStanding::beside);
  }
  EXPECT_TRUE(frontier_baselines(g, c.result(), {}, t).empty());

  std::string table = frontier_choice_table(c, b, t.name, g.num_ops());
  std::string head = frontier_table(c.result(), t.name);
  EXPECT_EQ(table.rfind(head, 0), 0u);
  std::string rest = table.substr(head.size());
  EXPECT_EQ(std::count(rest.begin(), rest.end(), '\n'), static_cast<long>(2 * names.size() + 1)) << rest;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_NE(rest.find("# baseline " + names[i] + " "), std::string::npos) << rest;
    EXPECT_NE(rest.find(std::string(" ") + baseline_standing_name(b[i].standing) + "\n"), std::string::npos) << rest;
    EXPECT_NE(rest.find("# baseline-model " + names[i] + " "), std::string::npos) << rest;
  }
  EXPECT_NE(rest.find("# chosen mini-time devices=4 "), std::string::npos) << rest;
  EXPECT_NE(rest.find(" peak_memory_bytes=" + std::to_string(c.pick().peak_memory_bytes) +
                      " limit=" + std::to_string(t.device.memory_bytes) + "\n"),
            std::string::npos)
      << rest;
}

}  // namespace
}  // namespace cleave::plan
