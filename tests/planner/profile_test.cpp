// Profiles (planner/cost/profile.h) and their use by the cost model:
//  - interpolation reproduces any affine curve sampled at powers of two, inside and beyond the samples (the property
//    that makes α-β-shaped measurements interpolate exactly), and is flat below the first sample;
//  - the JSON form reads back to the same profile, with sorted keys;
//  - every kind of bad file is one error naming the file and the field;
//  - shard keys: codegen labels each rank's kernels with the key the cost model looks up (the lowered programs'
//    timing tags against shard_key over the plan's configs);
//  - the cost model takes a measured share's time from the profile and the roofline elsewhere, and a collective's
//    from the curve of its group size, compared with estimates made without the profile and with
//    derive_communication's own events;
//  - statement_gap: gap · statements on each device's step, in the cost model and the simulator;
//  - per-rank speeds: fit_rank_scale recovers speeds that generated the times, and a profile's rank_scale multiplies
//    each device's measured kernel and local times in the cost model and the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "codegen/lower.h"
#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/search/flexflow.h"
#include "planner/search/frontier.h"
#include "planner/search/make_plan.h"
#include "planner/cost/profile.h"
#include "planner/cost/simulator.h"

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

TEST(Profile, InterpolationIsExactOnAffineCurves) {
  for (auto [alpha, beta] : {std::pair{3e-6, 1e-9}, std::pair{5e-5, 4e-10}}) {
    std::vector<std::pair<double, double>> pts;
    for (double x = 4; x <= 4096; x *= 2) pts.emplace_back(x, alpha + beta * x);
    for (double x : {4.0, 5.0, 100.0, 3000.0, 4096.0, 10000.0, 1e6})
      EXPECT_NEAR(interpolate(pts, x), alpha + beta * x, 1e-12 * (alpha + beta * x)) << x;
    // Below the first sample the curve is flat (latency dominates).
    EXPECT_DOUBLE_EQ(interpolate(pts, 1), alpha + beta * 4);
  }
  // One sample: proportional above it.
  EXPECT_DOUBLE_EQ(interpolate({{8, 2e-6}}, 16), 4e-6);
  // A curve that falls at its end is not extrapolated below its last value.
  EXPECT_DOUBLE_EQ(interpolate({{4, 2e-6}, {8, 1e-6}}, 64), 1e-6);
}

Profile sample() {
  Profile p;
  p.compute["Gemm_0"]["b=4,i=8"] = 1.5e-5;
  p.compute["Relu_1"]["i=4,j=16"] = 2e-6;
  // Values of at most 6 significant digits: the JSON form keeps no more.
  for (const char *k : kProfileCollectives) {
    p.collectives[k][2] = {{4, 1e-5}, {8, 1.1e-5}, {16, 1.3e-5}};
    p.collectives[k][3] = {{4, 2.5e-5}, {1024, 3.125e-5}, {1 << 20, 0.00123457}};
  }
  p.statements["copy"] = {{40, 2.5e-7}, {8192, 7e-7}};
  p.statements["data"] = {{512, 1.2e-5}};
  p.rank_scale = {0.8, 1.2};
  p.plans.push_back({"data", 2, 1.25e-3});
  p.compute["odd [name] \"q\""]["n=[2]"] = 3e-6;  // names may hold brackets and quotes
  return p;
}

TEST(Profile, JsonRoundTrip) {
  Profile p = sample();
  std::string text = profile_json(p);
  EXPECT_EQ(parse_profile(text, "x.json"), p);
  EXPECT_EQ(profile_json(parse_profile(text, "x.json")), text);
  // Measurements are kept to 6 significant digits.
  Profile q;
  q.compute["a"]["i=1"] = 1.234567891e-4;
  EXPECT_EQ(parse_profile(profile_json(q), "q.json").compute["a"]["i=1"], 1.23457e-4);
  // Sorted keys: "backend" < "collectives" < "compute" < "format" < "plans".
  EXPECT_LT(text.find("\"backend\""), text.find("\"collectives\""));
  EXPECT_LT(text.find("\"compute\""), text.find("\"format\""));
  EXPECT_LT(text.find("\"format\""), text.find("\"plans\""));
  // statement_gap: written when measured (> 0), read back; absent reads as 0.
  Profile gap = p;
  gap.statement_gap = 1.5e-6;
  std::string with_gap = profile_json(gap);
  EXPECT_NE(with_gap.find("\"statement_gap\": 1.5e-06"), std::string::npos) << with_gap;
  EXPECT_EQ(parse_profile(with_gap, "g.json"), gap);
  EXPECT_EQ(text.find("statement_gap"), std::string::npos);
  EXPECT_EQ(parse_profile(text, "x.json").statement_gap, 0);
}

/** The UserError message `parse()` throws, or "(no error)". */
template <class Parse>
std::string user_error_of(Parse parse) {
  try {
    parse();
  } catch (const UserError &e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of(const std::string &json) {
  return user_error_of([&] { parse_profile(json, "p.json"); });
}

TEST(Profile, BadFilesNameFileAndField) {
  const std::string head = R"({"format": "cleave-profile-1", )";
  EXPECT_EQ(error_of("{"), error_of("{"));  // malformed JSON: checked below by prefix
  EXPECT_EQ(error_of("{").rfind("p.json: (top level): malformed JSON", 0), 0u) << error_of("{");
  EXPECT_EQ(error_of("{}"), "p.json: format: missing");
  EXPECT_EQ(error_of(R"({"format": "x"})"), "p.json: format: must be \"cleave-profile-1\"");
  EXPECT_EQ(error_of(head + R"("extra": 1})"), "p.json: extra: unknown field");
  EXPECT_EQ(error_of(head + R"("backend": "tpu"})"), "p.json: backend: must be \"cpu\" or \"cuda\"");
  EXPECT_EQ(error_of(head + R"("compute": {"Gemm_0": 3}})"), "p.json: compute.Gemm_0: must be an object of shard keys");
  EXPECT_EQ(error_of(head + R"("compute": {"Gemm_0": {"b=4": -1}}})"),
            "p.json: compute.Gemm_0.b=4: must be a positive number of seconds");
  EXPECT_EQ(error_of(head + R"("compute": {"Gemm_0": {"b=4": "fast"}}})"), "p.json: compute.Gemm_0.b=4: must be a number");
  EXPECT_EQ(error_of(head + R"("collectives": {"broadcast": {}}})"), "p.json: collectives.broadcast: unknown field");
  EXPECT_EQ(error_of(head + R"("collectives": {"all_reduce": {"1": [[4, 1e-5]]}}})"),
            "p.json: collectives.all_reduce.1: group size must be an integer >= 2");
  EXPECT_EQ(error_of(head + R"("collectives": {"all_reduce": {"2": []}}})"),
            "p.json: collectives.all_reduce.2: must be a non-empty array of [bytes, seconds]");
  EXPECT_EQ(error_of(head + R"("collectives": {"all_reduce": {"2": [[8, 1e-5], [4, 2e-5]]}}})"),
            "p.json: collectives.all_reduce.2[1]: bytes must increase along the curve");
  EXPECT_EQ(error_of(head + R"("collectives": {"all_reduce": {"2": [[8]]}}})"),
            "p.json: collectives.all_reduce.2[0]: must be [bytes, seconds]");
  EXPECT_EQ(error_of(head + R"("statements": {"kernel": [[4, 1e-6]]}})"), "p.json: statements.kernel: unknown field");
  EXPECT_EQ(error_of(head + R"("statements": {"copy": [[8, 1e-6], [8, 2e-6]]}})"),
            "p.json: statements.copy[1]: bytes must increase along the curve");
  EXPECT_EQ(error_of(head + R"("statements": {"data": []}})"),
            "p.json: statements.data: must be a non-empty array of [bytes, seconds]");
  EXPECT_EQ(error_of(head + R"("rank_scale": 1})"),
            "p.json: rank_scale: must be a non-empty array of numbers, one per rank");
  EXPECT_EQ(error_of(head + R"("rank_scale": []})"),
            "p.json: rank_scale: must be a non-empty array of numbers, one per rank");
  EXPECT_EQ(error_of(head + R"("rank_scale": [1, "x"]})"), "p.json: rank_scale[1]: must be a number");
  EXPECT_EQ(error_of(head + R"("rank_scale": [1, 0]})"), "p.json: rank_scale[1]: must be a positive number");
  EXPECT_EQ(error_of(head + R"("statement_gap": -1e-6})"), "p.json: statement_gap: must be a number >= 0 (seconds)");
  EXPECT_EQ(error_of(head + R"("statement_gap": "2us"})"), "p.json: statement_gap: must be a number >= 0 (seconds)");
  EXPECT_EQ(error_of(head + R"("plans": [{"name": "d", "devices": 0, "step_seconds": 1}]})"),
            "p.json: plans[0].devices: must be a positive integer");
  try {
    load_profile("/nonexistent/p.json");
    FAIL() << "no error";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), "/nonexistent/p.json: cannot open profile file");
  }
}

// Items timed as n_i · s_r exactly (some ranks missing some items, some items run by one rank only): the fit gives
// the s_r back, scaled to mean 1 over the ranks that ran a shared item; a rank that ran none, and every rank when no
// item ran on two, stays at 1.
TEST(Profile, RankScaleRecoversPerRankSpeeds) {
  const std::vector<double> speed = {1.0, 1.6, 0.9, 1.3};
  const std::vector<double> item = {2e-5, 3e-4, 7e-6, 1.1e-3, 4e-5};
  std::vector<std::vector<double>> times;
  for (size_t i = 0; i < item.size(); ++i) {
    std::vector<double> t(speed.size());
    for (size_t r = 0; r < speed.size(); ++r)
      if ((i + r) % 3 != 0) t[r] = item[i] * speed[r];  // item i not run on the ranks r with (i + r) % 3 == 0
    times.push_back(t);
  }
  times.push_back({9e-3, 0, 0, 0});  // one rank only: says nothing of speeds
  double mean = (speed[0] + speed[1] + speed[2] + speed[3]) / 4;
  std::vector<double> s = fit_rank_scale(times, 4).value();
  ASSERT_EQ(s.size(), 4u);
  for (size_t r = 0; r < 4; ++r) EXPECT_NEAR(s[r], speed[r] / mean, 1e-9) << r;

  // A chain: item i ran on ranks i and i + 1 only (the slowest case for the alternating fit).
  std::vector<double> chain_speed;
  for (int r = 0; r < 16; ++r) chain_speed.push_back(0.7 + 0.05 * ((r * 7) % 11));
  std::vector<std::vector<double>> chain;
  for (int i = 0; i + 1 < 16; ++i) {
    std::vector<double> t(16, 0.0);
    t[i] = 1e-4 * (i + 1) * chain_speed[i];
    t[i + 1] = 1e-4 * (i + 1) * chain_speed[i + 1];
    chain.push_back(t);
  }
  double chain_mean = 0;
  for (double v : chain_speed) chain_mean += v / 16;
  std::vector<double> c = fit_rank_scale(chain, 16).value();
  for (size_t r = 0; r < 16; ++r) EXPECT_NEAR(c[r], chain_speed[r] / chain_mean, 1e-9) << r;

  // Rank 2 ran no shared item: it keeps 1, the others are scaled to mean 1 among themselves.
  std::vector<std::vector<double>> partial = {{1e-4, 2e-4, 0}, {3e-5, 6e-5, 0}, {0, 0, 5e-5}};
  std::vector<double> p = fit_rank_scale(partial, 3).value();
  EXPECT_NEAR(p[0], 2.0 / 3, 1e-9);
  EXPECT_NEAR(p[1], 4.0 / 3, 1e-9);
  EXPECT_EQ(p[2], 1.0);
  EXPECT_EQ(fit_rank_scale({{1e-4, 0}, {0, 3e-4}}, 2), std::nullopt);
  EXPECT_EQ(fit_rank_scale({}, 1), std::nullopt);
}

// A profile's rank_scale multiplies each device's measured kernel and local-statement times (not the roofline's):
// the data plan's two ranks run the same shares, so device 1's measured compute is 3x device 0's.
TEST(Profile, CostModelScalesMeasuredTimesByRank) {
  Graph g = mlp(8);
  Plan p = make_plan(g, "data", 2);
  Topology t = preset_topology("k80x8");
  Profile even;
  for (size_t k = 0; k < p.ops.size(); ++k) {
    const OpEntry &o = p.ops[k];
    even.compute[o.name][shard_key(g, g.op(*g.find_op(o.name)), o.config, 0)] = 1e-4 * static_cast<double>(1 + k % 5);
  }
  even.statements["copy"] = {{8, 1e-6}, {1 << 16, 9e-6}};
  even.statements["data"] = {{8, 2e-6}, {1 << 16, 5e-5}};
  Profile skewed = even;
  skewed.rank_scale = {0.5, 1.5};
  CostReport a = estimate_cost(g, p, t, &even), b = estimate_cost(g, p, t, &skewed);
  ASSERT_EQ(a.measured_shares, 2 * g.num_ops());
  ASSERT_GT(a.measured_local, 0);
  ASSERT_EQ(a.modelled_local, 0);
  for (int d = 0; d < 2; ++d) {
    double k = d == 0 ? 0.5 : 1.5;
    EXPECT_NEAR(b.devices[d].compute_seconds, k * a.devices[d].compute_seconds, 1e-12) << d;
    EXPECT_NEAR(b.devices[d].copy_seconds, k * a.devices[d].copy_seconds, 1e-15) << d;
    EXPECT_NEAR(b.devices[d].data_seconds, k * a.devices[d].data_seconds, 1e-15) << d;
    EXPECT_DOUBLE_EQ(b.devices[d].comm_seconds, a.devices[d].comm_seconds) << d;
  }
  EXPECT_GT(a.devices[0].compute_seconds, 0);
  EXPECT_NEAR(b.predicted_step_seconds, b.devices[1].step_seconds, 1e-15);
  // The simulator takes the same task times: each device's compute and local busy seconds scale alike.
  std::vector<DeviceBusy> sa = simulate(g, p, t, &even).busy(), sb = simulate(g, p, t, &skewed).busy();
  for (int d = 0; d < 2; ++d) {
    double k = d == 0 ? 0.5 : 1.5;
    EXPECT_NEAR(sb[d].compute_seconds, k * sa[d].compute_seconds, 1e-12) << d;
    EXPECT_NEAR(sb[d].local_seconds, k * sa[d].local_seconds, 1e-15) << d;
  }
  // A device beyond the list runs at 1; so does every share the roofline prices.
  Profile one = even;
  one.rank_scale = {2.0};
  CostReport c = estimate_cost(g, p, t, &one);
  EXPECT_NEAR(c.devices[0].compute_seconds, 2 * a.devices[0].compute_seconds, 1e-12);
  EXPECT_DOUBLE_EQ(c.devices[1].compute_seconds, a.devices[1].compute_seconds);
  Profile none;
  none.rank_scale = {0.5, 1.5};
  EXPECT_DOUBLE_EQ(estimate_cost(g, p, t, &none).devices[1].compute_seconds,
                   estimate_cost(g, p, t).devices[1].compute_seconds);
}

// A profile's statement_gap costs each device gap · statements on top of its step, where its statements are its op
// shares, the communication events it takes part in and its local statements (counted here from the plan and
// derive_communication's events, not by the cost model's own count); the simulator adds it to each compute, local
// and collective task (simulator.h), so on one device its makespan still equals the prediction.
std::string rank_error_of(const std::string &json) {
  return user_error_of([&] { parse_rank_timings(json, "p.rank_1.json"); });
}

// What a bundle run with CLEAVE_PROFILE writes (runtime rt.h), read back; each malformed file is one error line naming
// the file and the field.
TEST(Profile, RankFilesParseAndMalformedOnesNameFileAndField) {
  RankTimings r = parse_rank_timings(R"({"rank": 1, "world": 2, "steps": [3e-4, 2e-4],
    "sites": [{"kind": "data", "ops": [], "shard": "", "bytes": 4096, "seconds": [1e-5, 2e-5]},
              {"kind": "kernel", "ops": ["Gemm_0", "Relu_1"], "shard": "b=4", "seconds": [1e-4, 0]},
              {"kind": "comm", "ops": [], "shard": "", "seconds": [5e-5, 4e-5]}]})",
                                     "p.rank_1.json");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.steps, (std::vector<double>{3e-4, 2e-4}));
  ASSERT_EQ(r.sites.size(), 3u);
  EXPECT_EQ(r.sites[0].kind, "data");
  EXPECT_EQ(r.sites[0].bytes, 4096);
  EXPECT_EQ(r.sites[1].ops, (std::vector<std::string>{"Gemm_0", "Relu_1"}));
  EXPECT_EQ(r.sites[1].seconds, (std::vector<double>{1e-4, 0}));
  EXPECT_TRUE(r.sites[2].ops.empty());

  const std::string head = R"({"rank": 1, "steps": [1e-3, 2e-3], "sites": [)";
  EXPECT_EQ(rank_error_of("{\"rank\": 1").rfind("p.rank_1.json: (top level): malformed JSON", 0), 0u);
  EXPECT_EQ(rank_error_of("[]"), "p.rank_1.json: (top level): must be an object");
  EXPECT_EQ(rank_error_of(R"({"steps": [1e-3], "sites": []})"), "p.rank_1.json: rank: must be an integer >= 0");
  EXPECT_EQ(rank_error_of(R"({"rank": 4294967296, "steps": [1e-3], "sites": []})"), "p.rank_1.json: rank: too large");
  EXPECT_EQ(rank_error_of(R"({"rank": 0, "sites": []})"), "p.rank_1.json: steps: missing");
  EXPECT_EQ(rank_error_of(R"({"rank": 0, "steps": [], "sites": []})"),
            "p.rank_1.json: steps: must be a non-empty array of seconds");
  EXPECT_EQ(rank_error_of(R"({"rank": 0, "steps": [1e-3, -1], "sites": []})"),
            "p.rank_1.json: steps[1]: must be a number >= 0 (seconds)");
  EXPECT_EQ(rank_error_of(R"({"rank": 0, "steps": [1e-3]})"), "p.rank_1.json: sites: must be an array");
  EXPECT_EQ(rank_error_of(head + R"(3]})"), "p.rank_1.json: sites[0]: must be an object");
  EXPECT_EQ(rank_error_of(head + R"({"kind": "sleep", "seconds": [1, 2]}]})"),
            "p.rank_1.json: sites[0].kind: must be \"kernel\", \"comm\", \"copy\" or \"data\"");
  EXPECT_EQ(rank_error_of(head + R"({"kind": "kernel", "ops": [], "seconds": [1, 2]}]})"),
            "p.rank_1.json: sites[0].ops: a kernel must name its ops");
  EXPECT_EQ(rank_error_of(head + R"({"kind": "kernel", "ops": [7], "seconds": [1, 2]}]})"),
            "p.rank_1.json: sites[0].ops: must be an array of op names");
  EXPECT_EQ(rank_error_of(head + R"({"kind": "copy", "seconds": [1, 2]}]})"),
            "p.rank_1.json: sites[0].bytes: must be an integer >= 0");
  EXPECT_EQ(rank_error_of(head + R"({"kind": "comm"}]})"), "p.rank_1.json: sites[0].seconds: missing");
  // A site that timed another number of steps than the step list (a truncated or spliced file).
  EXPECT_EQ(rank_error_of(head + R"({"kind": "comm", "seconds": [1e-4, 1e-4]}, {"kind": "comm", "seconds": [1e-4]}]})"),
            "p.rank_1.json: sites[1].seconds: times 1 steps, not the 2 of steps");
}

TEST(Profile, StatementGapAddsPerStatementOfEachDevice) {
  Graph g = mlp(8);
  Topology t = preset_topology("k80x8");
  int send_recv_events = 0;
  for (auto [planner, devices, seed] : {std::tuple{"single", 1, 0}, {"data", 2, 0}, {"random", 2, 3}, {"random", 4, 5}}) {
    SCOPED_TRACE(std::string(planner) + " on " + std::to_string(devices) + " devices");
    Plan p = make_plan(g, planner, devices, nullptr, static_cast<uint64_t>(seed));
    Communication comm = derive_communication(g, p);
    for (const CommEvent &e : comm.events) send_recv_events += e.kind == CommEvent::Kind::send_recv;
    Profile none, gap;
    gap.statement_gap = 2e-6;
    CostReport a = estimate_cost(g, p, t, &none), b = estimate_cost(g, p, t, &gap);
    std::vector<DeviceBusy> busy_none = simulate(g, p, t, &none).busy(), busy_gap = simulate(g, p, t, &gap).busy();
    for (int d = 0; d < devices; ++d) {
      int64_t want = 0;
      for (const OpEntry &o : p.ops) want += std::count(o.config.devices.begin(), o.config.devices.end(), d);
      for (const CommEvent &e : comm.events) {
        bool in = std::count(e.group.begin(), e.group.end(), d) > 0;
        for (const CommEvent::Transfer &x : e.transfers) in = in || x.src == d || x.dst == d;
        want += in;
      }
      for (const LocalStatement &l : comm.local) want += l.rank == d;
      EXPECT_EQ(b.devices[d].statements, want) << d;
      EXPECT_GT(want, g.num_ops()) << d;  // every op, plus data reads and copies (and all-reduces on two)
      EXPECT_EQ(a.devices[d].gap_seconds, 0) << d;
      EXPECT_DOUBLE_EQ(b.devices[d].gap_seconds, 2e-6 * static_cast<double>(want)) << d;
      EXPECT_NEAR(b.devices[d].step_seconds, a.devices[d].step_seconds + 2e-6 * static_cast<double>(want), 1e-15) << d;
      // The simulator charges the same statements: one gap per task, a grouped send/recv one per rank taking part.
      auto total = [](const DeviceBusy &x) { return x.compute_seconds + x.comm_seconds + x.local_seconds; };
      EXPECT_NEAR(total(busy_gap[d]) - total(busy_none[d]), 2e-6 * static_cast<double>(want), 1e-12) << d;
    }
    if (devices == 1) {
      EXPECT_NEAR(simulate(g, p, t, &gap).makespan(), b.predicted_step_seconds, 1e-12 * b.predicted_step_seconds);
      EXPECT_NEAR(simulate(g, p, t, &gap).makespan() - simulate(g, p, t, &none).makespan(),
                  2e-6 * static_cast<double>(b.devices[0].statements), 1e-12);
    }
  }
  EXPECT_GT(send_recv_events, 0);  // the random plans exchange shards by send/recv
}

TEST(Profile, CodegenTagsKernelsWithTheCostModelsKeys) {
  Graph g = mlp(8);
  for (const char *planner : {"data", "owt", "random"}) {
    Plan p = make_plan(g, planner, 2, nullptr, 3);
    codegen::Lowered l = codegen::lower(g, p);
    std::map<std::string, const ParallelConfig *> configs;
    for (const auto &o : p.ops) configs[o.name] = &o.config;
    std::set<OpId> timed;
    for (const codegen::RankProgram &prog : l.ranks)
      for (const codegen::Instr &in : prog.step) {
        if (in.timing.kind != codegen::Timing::Kind::kernel) continue;
        ASSERT_FALSE(in.timing.ops.empty());
        const Op &op = g.op(in.timing.ops[0]);
        const ParallelConfig &c = *configs.at(op.name);
        auto it = std::find(c.devices.begin(), c.devices.end(), prog.rank);
        ASSERT_NE(it, c.devices.end()) << op.name;
        EXPECT_EQ(in.timing.shard, shard_key(g, op, c, it - c.devices.begin())) << planner << " " << op.name;
        timed.insert(in.timing.ops.begin(), in.timing.ops.end());
      }
    // Every op's kernel is timed (alone or fused) on some rank.
    EXPECT_EQ(timed.size(), static_cast<size_t>(g.num_ops())) << planner;
  }
}

TEST(Profile, CostModelUsesMeasuredTimesWhereItHasThem) {
  Graph g = mlp(8);
  Plan p = make_plan(g, "data", 2);
  Topology t = preset_topology("k80x8");
  CostReport roof = estimate_cost(g, p, t);
  // Measure one op (both ranks' shares have the same key under the data plan) and the all-reduce over 2 ranks.
  const Op &op0 = g.op(0);
  const ParallelConfig *c0 = nullptr;
  for (const auto &o : p.ops)
    if (o.name == op0.name) c0 = &o.config;
  ASSERT_NE(c0, nullptr);
  std::string key = shard_key(g, op0, *c0, 0);
  ASSERT_EQ(key, shard_key(g, op0, *c0, 1));
  Profile prof;
  prof.compute[op0.name][key] = 0.25;
  prof.compute["no such op"]["x=1"] = 7;
  std::vector<std::pair<double, double>> curve = {{4, 1e-3}, {1024, 2e-3}, {1 << 20, 5e-3}};
  prof.collectives["all_reduce"][2] = curve;
  CostReport meas = estimate_cost(g, p, t, &prof);
  EXPECT_EQ(meas.measured_shares, 2);
  EXPECT_EQ(meas.roofline_shares, 2 * g.num_ops() - 2);
  for (OpId o = 0; o < g.num_ops(); ++o) {
    if (o == 0)
      EXPECT_DOUBLE_EQ(meas.ops[o].compute_seconds, 0.25);
    else
      EXPECT_DOUBLE_EQ(meas.ops[o].compute_seconds, roof.ops[o].compute_seconds) << g.op(o).name;
  }
  // Communication: each all-reduce of n bytes over 2 ranks costs interpolate(curve, n), summed per rank.
  Communication comm = derive_communication(g, p);
  double want = 0;
  int events = 0;
  for (const CommEvent &e : comm.events) {
    // Weight gradients are all-reduced; the loss's weight total is a sync (priced as an all-reduce).
    ASSERT_TRUE(e.kind == CommEvent::Kind::all_reduce || e.kind == CommEvent::Kind::sync) << comm_kind_name(e.kind);
    ASSERT_EQ(e.group.size(), 2u);
    want += interpolate(curve, static_cast<double>(e.count * e.elem_bytes));
    ++events;
  }
  ASSERT_GT(events, 0);
  EXPECT_EQ(meas.measured_comm, events);
  EXPECT_EQ(meas.modelled_comm, 0);
  EXPECT_NEAR(meas.devices[0].comm_seconds, want, 1e-12);
  // Without a curve for the group size the α-β formulas stay.
  Profile other;
  other.collectives["all_reduce"][3] = curve;
  CostReport ab = estimate_cost(g, p, t, &other);
  EXPECT_DOUBLE_EQ(ab.devices[0].comm_seconds, roof.devices[0].comm_seconds);
  EXPECT_EQ(ab.modelled_comm, events);
  // Local statements: each copy and data read from the curve of its kind, the rest by bytes over memory bandwidth.
  // The data plan's updates write their params in place, so a tofu plan, which copies pieces of tensors it
  // re-shards within a rank, has the copies.
  EXPECT_EQ(meas.measured_local, 0);
  Plan pt = make_plan(g, "tofu", 2);
  Communication tcomm = derive_communication(g, pt);
  Profile local;
  std::vector<std::pair<double, double>> copies = {{8, 1e-6}, {1 << 16, 9e-6}};
  local.statements["copy"] = copies;
  CostReport lm = estimate_cost(g, pt, t, &local);
  double copy_want = 0, data_want = 0;
  int64_t local_count = 0;
  for (const LocalStatement &l : tcomm.local) {
    if (l.rank != 0) continue;
    ++local_count;
    if (l.kind == LocalStatement::Kind::copy)
      copy_want += interpolate(copies, static_cast<double>(l.bytes));
    else
      data_want += t.device.read_latency + static_cast<double>(l.rows) * t.device.read_row_latency +
                   static_cast<double>(l.bytes) / t.device.memory_bandwidth;
  }
  EXPECT_GT(copy_want, 0);
  EXPECT_GT(data_want, 0);
  EXPECT_NEAR(lm.devices[0].copy_seconds, copy_want, 1e-15);
  EXPECT_NEAR(lm.devices[0].data_seconds, data_want, 1e-15);
  EXPECT_EQ(lm.measured_local + lm.modelled_local, static_cast<int64_t>(tcomm.local.size()));
  EXPECT_LT(lm.measured_local, static_cast<int64_t>(tcomm.local.size()));  // the data reads are modelled
  EXPECT_GT(lm.measured_local, local_count / 2);
  // The step: per device compute + communication + copies + data reads, max over devices.
  const DeviceCost &d0 = meas.devices[0];
  EXPECT_NEAR(meas.predicted_step_seconds, d0.compute_seconds + d0.comm_seconds + d0.copy_seconds + d0.data_seconds,
              1e-12);
}

// A share the profile did not measure, of an op it measured at other shares, is the share's roofline times the op's
// measured / roofline ratio: the roofline's error on the measuring machine carries over. Other ops keep the roofline.
TEST(Profile, UnmeasuredSharesOfMeasuredOpsAreCalibrated) {
  Graph g = mlp(8);
  Topology t = preset_topology("k80x8");
  Plan data = make_plan(g, "data", 2), single = make_plan(g, "single", 1);
  CostReport roof_data = estimate_cost(g, data, t), roof_single = estimate_cost(g, single, t);
  const Op &op0 = g.op(0);
  Profile prof;
  prof.compute[op0.name][shard_key(g, op0, data.ops[0].config, 0)] = 0.25;
  prof.rank_scale = {2.0};
  CostReport meas = estimate_cost(g, single, t, &prof);
  EXPECT_EQ(meas.measured_shares, 0);
  EXPECT_EQ(meas.calibrated_shares, 1);
  // The data plan halves op 0's batch: its whole share does twice the work of the measured half.
  double ratio = roof_single.ops[0].compute_seconds / roof_data.ops[0].compute_seconds;
  EXPECT_GT(ratio, 1.1);
  EXPECT_NEAR(meas.ops[0].compute_seconds, 0.25 * ratio * 2.0, 1e-12);
  for (OpId o = 1; o < g.num_ops(); ++o)
    EXPECT_DOUBLE_EQ(meas.ops[o].compute_seconds, roof_single.ops[o].compute_seconds) << g.op(o).name;
  // A key that does not name the op's vars (a profile of another version of the model) calibrates nothing.
  // Nor does one naming too few vars, too many, or a non-number.
  std::string key = shard_key(g, op0, data.ops[0].config, 0), first = key.substr(0, key.find(','));
  for (std::string bad : {std::string("zz=3"), first, key + ",zz=3", first + ",x"}) {
    SCOPED_TRACE(bad);
    Profile stale;
    stale.compute[op0.name][bad] = 0.25;
    CostReport r = estimate_cost(g, single, t, &stale);
    EXPECT_DOUBLE_EQ(r.ops[0].compute_seconds, roof_single.ops[0].compute_seconds);
    EXPECT_EQ(r.calibrated_shares, 0);
  }
}

// Measured at two rooflines (the 2-device data share and the whole op), an op's other shares lie on the line through
// the two points (intercept: what a kernel costs whatever its work, as on a GPU); a line that would fall with work is
// the measured times' median, one that would cross below 0 at no work goes through 0 and fits the points.
TEST(Profile, UnmeasuredSharesLieOnTheLineOfTwoMeasuredRooflines) {
  Graph g = mlp(4096);  // a batch whose activations outweigh the weights: each share's roofline grows with it
  Topology t = preset_topology("k80x8");
  Plan data2 = make_plan(g, "data", 2), data4 = make_plan(g, "data", 4), single = make_plan(g, "single", 1);
  const Op &op0 = g.op(0);
  double w2 = estimate_cost(g, data2, t).ops[0].compute_seconds, w1 = estimate_cost(g, single, t).ops[0].compute_seconds,
         w4 = estimate_cost(g, data4, t).ops[0].compute_seconds;
  ASSERT_GE(w1, w2 * 1.5);  // far enough apart to fit a line (cost_model.cpp calibration)
  ASSERT_GT(w2, w4 * 1.1);
  auto priced = [&](double t_half, double t_whole) {
    Profile p;
    p.compute[op0.name][shard_key(g, op0, data2.ops[0].config, 0)] = t_half;
    p.compute[op0.name][shard_key(g, op0, single.ops[0].config, 0)] = t_whole;
    CostReport r = estimate_cost(g, data4, t, &p);
    EXPECT_EQ(r.calibrated_shares, 4);
    return r.ops[0].compute_seconds;
  };
  // Latency-bound: 10 us at half the work, 12 us whole.
  double slope = (12e-6 - 10e-6) / (w1 - w2), intercept = 10e-6 - slope * w2;
  ASSERT_GT(intercept, 0);
  EXPECT_NEAR(priced(10e-6, 12e-6), intercept + slope * w4, 1e-15);
  // Slower with less work: the median of the two.
  EXPECT_NEAR(priced(12e-6, 10e-6), 11e-6, 1e-15);
  // Proportional beyond it (twice the time for 2 w1 / w2 times the work): through 0, least squares.
  double a = 1e-6, b = a * 2 * w1 / w2, through0 = (w2 * a + w1 * b) / (w2 * w2 + w1 * w1);
  EXPECT_NEAR(priced(a, b), through0 * w4, 1e-15);
}

/** A profile in which every op's share under the 2-device data plan takes `split` seconds and its whole share (the
 *  single-device plan's) `whole`. */
Profile split_against_whole(const Graph &g, double split, double whole) {
  Plan data = make_plan(g, "data", 2), single = make_plan(g, "single", 1);
  Profile p;
  for (const OpEntry &e : data.ops)
    p.compute[e.name][shard_key(g, g.op(*g.find_op(e.name)), e.config, 0)] = split;
  for (const OpEntry &e : single.ops)
    p.compute[e.name][shard_key(g, g.op(*g.find_op(e.name)), e.config, 0)] = whole;
  return p;
}

// flexflow and frontier search with the profile's times: their scores are the simulator's and estimate_cost's with
// the profile, and where it makes whole shares slow (the roofline on k80x8 keeps this small MLP's ops whole: splits
// cost communication) they find plans far faster under it than their own plans without it.
TEST(Profile, PlannersSearchWithTheProfile) {
  Graph g = mlp(8);
  Topology t = preset_topology("k80x8");
  Profile prof = split_against_whole(g, 1e-3, 1.0);
  Plan data = make_plan(g, "data", 2);
  FlexFlowOptions o;
  o.topology = &t;
  o.iterations = 300;
  o.seed = 3;
  FlexFlowResult plain = flexflow_search(g, 2, o);
  o.profile = &prof;
  FlexFlowResult measured = flexflow_search(g, 2, o);
  EXPECT_EQ(measured.simulated_seconds, Simulator(g, measured.plan, t, &prof).makespan());
  EXPECT_EQ(measured.start_seconds, Simulator(g, data, t, &prof).makespan());
  EXPECT_LE(measured.simulated_seconds, measured.start_seconds);
  EXPECT_LT(measured.simulated_seconds, 0.5 * Simulator(g, plain.plan, t, &prof).makespan());
  EXPECT_EQ(print_plan(make_plan(g, "flexflow", 2, &t, 3, &prof)),
            print_plan(flexflow_search(g, 2, [&] {
                         FlexFlowOptions d;
                         d.topology = &t;
                         d.seed = 3;
                         d.profile = &prof;
                         return d;
                       }()).plan));

  // The frontier's cost graph prices the data plan as estimate_cost does with the profile (its measured compute,
  // collective curve and copies), as it does without one (frontier_test.cpp).
  Profile curves = prof;
  curves.collectives["all_reduce"][2] = {{4, 1e-3}, {1 << 20, 5e-3}};
  curves.statements["copy"] = {{4, 1e-4}, {1 << 20, 2e-4}};
  std::vector<ModelledPlan> m = frontier_model_costs(g, 2, t, {data}, &curves);
  ASSERT_EQ(m.size(), 1u);
  double want = estimate_cost(g, data, t, &curves).predicted_step_seconds;
  EXPECT_EQ(m[0].ops_matched, g.num_ops());
  EXPECT_NEAR(m[0].model.time, want, 1e-9 * want);
  EXPECT_GT(want, estimate_cost(g, data, t, &prof).predicted_step_seconds);  // the curves are slower than k80x8

  FrontierResult fplain = frontier_search(g, 2, t), fmeasured = frontier_search(g, 2, t, {}, &prof);
  ASSERT_FALSE(fmeasured.frontier.empty());
  for (const FrontierPlan &f : fmeasured.frontier)
    EXPECT_EQ(f.step_seconds, estimate_cost(g, f.plan, t, &prof).predicted_step_seconds);
  double best = fmeasured.frontier.front().step_seconds;
  EXPECT_LE(best, estimate_cost(g, data, t, &prof).predicted_step_seconds);
  EXPECT_LT(best, 0.5 * estimate_cost(g, fplain.frontier.front().plan, t, &prof).predicted_step_seconds);
}

}  // namespace
}  // namespace cleave::plan
