// The statistics `cleave profile` makes of the rank files (planner/cost/profile_stats.h), on hand-made timings whose
// figures are worked out here: the median, expected_seconds without outliers, a run's samples (warm-up dropped, fused
// kernels shared, the gap outside the timed statements per statement), the rank files that disagree with the plan,
// and the summary with and without rank speeds.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/profile.h"
#include "planner/cost/profile_stats.h"
#include "planner/search/make_plan.h"

namespace cleave::plan {
namespace {

Graph mlp(int64_t batch) {
  ImportOptions opts;
  opts.batch = batch;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/mlp.onnx", opts);
  TrainOptions t;
  build_training_graph(g, t);
  return g;
}

/** A rank file of `steps` step times and one kernel site per op of `p` that `rank` runs, each timed `seconds[k]` in
 *  step k. */
RankFile rank_file(const Plan &p, int rank, const std::vector<double> &steps, const std::vector<double> &seconds) {
  RankFile f{"p.rank_" + std::to_string(rank) + ".json", {}};
  f.timings.rank = rank;
  f.timings.steps = steps;
  for (const OpEntry &o : p.ops)
    if (std::count(o.config.devices.begin(), o.config.devices.end(), rank))
      f.timings.sites.push_back({"kernel", {o.name}, 0, seconds});
  return f;
}

std::string user_error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProfileStats, MedianAndExpectedSeconds) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  // Mean of the samples at most 5x the median (median 2: cap 10); the 11 is dropped, the 10 kept.
  EXPECT_DOUBLE_EQ(expected_seconds({1, 2, 2, 10, 11}), (1 + 2 + 2 + 10) / 4.0);
  EXPECT_DOUBLE_EQ(expected_seconds({2}), 2);
}

TEST(ProfileStats, ARunsSamplesDropTheWarmUpAndShareFusedKernels) {
  Graph g = mlp(4);
  Plan p = make_plan(g, "single", 1);
  ProfileSamples s;
  // Steps: warm-up 9 s, then 1.0 and 1.2 s; every op's kernel 9 s at warm-up, then 1e-3 and 3e-3 s.
  RankFile f = rank_file(p, 0, {9, 1.0, 1.2}, {9, 1e-3, 3e-3});
  // One more site timing two ops at once (a fused kernel): each op gets half of its expected time.
  f.timings.sites.push_back({"kernel", {p.ops[0].name, p.ops[1].name}, 0, {9, 4e-3, 4e-3}});
  f.timings.sites.push_back({"copy", {p.ops[0].name}, 256, {9, 5e-4, 7e-4}});
  double step = add_profile_run(s, g, p, "single", {f});
  EXPECT_DOUBLE_EQ(step, 1.1);
  std::string key0 = shard_key(g, g.op(0), p.ops[0].config, 0);
  ASSERT_EQ(s.compute.at({p.ops[0].name, key0}).size(), 2u);  // its own site and half of the fused one
  EXPECT_DOUBLE_EQ(s.compute.at({p.ops[0].name, key0})[0].seconds, 2e-3);
  EXPECT_DOUBLE_EQ(s.compute.at({p.ops[0].name, key0})[1].seconds, 2e-3);
  EXPECT_DOUBLE_EQ(s.statements.at("copy").at(256)[0].seconds, 6e-4);
  // The gap: each step less its timed statements, the median over steps, per statement the rank runs.
  double timed1 = 1e-3 * static_cast<double>(p.ops.size()) + 4e-3 + 5e-4,
         timed2 = 3e-3 * static_cast<double>(p.ops.size()) + 4e-3 + 7e-4;
  int64_t statements = device_statements(p, derive_communication(g, p))[0];
  ASSERT_EQ(s.gaps.size(), 1u);
  EXPECT_NEAR(s.gaps[0], ((1.0 - timed1) + (1.2 - timed2)) / 2 / static_cast<double>(statements), 1e-15);

  Profile profile;
  summarise_samples(s, 1, true, profile);
  EXPECT_DOUBLE_EQ(profile.compute.at(p.ops[0].name).at(key0), 2e-3);
  EXPECT_DOUBLE_EQ(profile.statement_gap, s.gaps[0]);
  EXPECT_TRUE(profile.rank_scale.empty());  // one rank: no share ran on two
}

TEST(ProfileStats, RankSpeedsBringEveryShareToTheMeanSpeed) {
  Graph g = mlp(4);
  Plan p = make_plan(g, "data", 2);
  ProfileSamples s;
  // Rank 1 takes 3x rank 0's time on every share: speeds 0.5 and 1.5 around the mean, every share at rank 0's time x2.
  add_profile_run(s, g, p, "data", {rank_file(p, 0, {1, 1, 1}, {1, 1e-3, 1e-3}), rank_file(p, 1, {1, 1, 1}, {1, 3e-3, 3e-3})});
  Profile with, without;
  summarise_samples(s, 2, true, with);
  summarise_samples(s, 2, false, without);
  ASSERT_EQ(with.rank_scale.size(), 2u);
  EXPECT_NEAR(with.rank_scale[0], 0.5, 1e-9);
  EXPECT_NEAR(with.rank_scale[1], 1.5, 1e-9);
  EXPECT_TRUE(without.rank_scale.empty());
  for (const auto &[op, shares] : with.compute)
    for (const auto &[key, secs] : shares) {
      EXPECT_NEAR(secs, 2e-3, 1e-12) << op;
      EXPECT_NEAR(without.compute.at(op).at(key), 2e-3, 1e-12) << op;  // (1e-3 + 3e-3) / 2 either way here
    }
}

TEST(ProfileStats, RankFilesThatDisagreeWithThePlanNameTheFile) {
  Graph g = mlp(4);
  Plan p = make_plan(g, "data", 2);
  ProfileSamples s;
  RankFile wrong_rank = rank_file(p, 0, {1, 1}, {1, 1e-3});
  wrong_rank.timings.rank = 1;
  EXPECT_EQ(user_error_of([&] { add_profile_run(s, g, p, "data", {wrong_rank, rank_file(p, 1, {1, 1}, {1, 1e-3})}); }),
            "p.rank_0.json: rank: 1, not 0 as its name says");
  RankFile stray = rank_file(p, 0, {1, 1}, {1, 1e-3});
  stray.timings.sites.push_back({"kernel", {"no_such_op"}, 0, {1, 1e-3}});
  EXPECT_EQ(user_error_of([&] { add_profile_run(s, g, p, "data", {stray, rank_file(p, 1, {1, 1}, {1, 1e-3})}); }),
            "p.rank_0.json: a kernel site times op \"no_such_op\", which plan data does not run on rank 0");
}

}  // namespace
}  // namespace cleave::plan
