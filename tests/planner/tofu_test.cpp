// The search planners (planner/search/tofu.h, planner/search/baselines.h): valid and deterministic plans, tofu's DP against brute
// force, tofu against the baselines, coarsening, and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "planner/search/baselines.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"
#include "planner/search/strategies.h"
#include "planner/search/tofu.h"
#include "planner/search/tofu_step.h"
#include "planner/plan/topology.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

Graph model_graph(const std::string &model, int64_t batch, bool training) {
  ImportOptions opts;
  opts.batch = batch;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  if (training) build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

const char *const kSearchPlanners[] = {"tofu", "icml18", "owt", "allrow", "spartan", "equalchop"};

TEST(SearchPlanners, ValidDeterministicAndEveryOpPartitioned) {
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (int devices : {2, 4, 8})
      for (const char *planner : kSearchPlanners) {
        SCOPED_TRACE(std::string(model) + " " + planner + " " + std::to_string(devices));
        Graph g = model_graph(model, 16, true);
        Plan a = make_plan(g, planner, devices);
        EXPECT_EQ(plan_problems(g, a), std::vector<std::string>{});
        EXPECT_EQ(print_plan(a), print_plan(make_plan(model_graph(model, 16, true), planner, devices)));
        // Tofu and its baselines partition every op that has a split codegen lowers: the forward convolutions and
        // dense layers are never left whole.
        for (const OpEntry &e : a.ops) {
          const Op &op = g.op(*g.find_op(e.name));
          if (op.phase == Phase::forward && (op.kind == OpKind::Conv || op.kind == OpKind::Gemm))
            EXPECT_TRUE(std::any_of(e.config.vars.begin(), e.config.vars.end(),
                                    [](const std::string &v) { return !v.empty(); }))
                << e.name;
        }
      }
}

TEST(SearchPlanners, CommBytesOfDataParallelismAreTheGradientAllReduces) {
  // Data parallelism on the MLP moves only the ring all-reduces of the weight gradients (the loss is synced inside
  // its kernel): 2(n-1)/n of every param per device, from the params' shapes alone.
  Graph g = model_graph("mlp.onnx", 16, true);
  int64_t param_bytes = 0;
  for (const Tensor &t : g.tensors())
    if (t.role == Role::param) param_bytes += num_elements(t.shape) * dtype_size(t.dtype);
  for (int n : {2, 4, 8}) EXPECT_EQ(plan_comm_bytes(g, make_plan(g, "data", n)), 2 * (n - 1) * param_bytes) << n;
}

TEST(SearchPlanners, TofuMovesNoMoreThanAnyBaseline) {
  // Not a theorem: each recursion step is optimised on its own (Tofu §5.2), so a step's cheapest choice can cost more
  // later. Data parallelism included: a gradient partial on both axes of tofu's [2, 2] mesh is reduced by one
  // all-reduce over the 4 devices, as data's over its 1-D mesh (the CNN on 4 devices: tofu 33440 bytes, data 33456;
  // before that merge, and before tofu's costs counted a fetched box once, 41808 against 33456).
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (int devices : {2, 4, 8}) {
      Graph g = model_graph(model, 16, true);
      int64_t tofu = plan_comm_bytes(g, make_plan(g, "tofu", devices));
      EXPECT_LE(tofu, plan_comm_bytes(g, make_plan(g, "data", devices))) << model << " on " << devices << " devices";
      for (const char *planner : kSearchPlanners) {
        int64_t other = plan_comm_bytes(g, make_plan(g, planner, devices));
        EXPECT_LE(tofu, other) << model << " on " << devices << " devices: " << planner;
      }
    }
}

TEST(SearchPlanners, TofuReplicatesOnlyUpdatesThatFitTheMemorySlack) {
  // Tofu's memory target is a per-device peak of at most 1.15 x (1-device peak / devices) (tests/bench/search_zoo.sh
  // prints it for WResNet-152-10; tiny models miss it anyway, their communication buffers being as large as their
  // shards). Tofu partitions every op except update ops whose state, replicated, fits in that 15% slack: the extra
  // bytes per device of every update op left whole stay within 0.15 x 1-device peak / devices.
  Topology k80 = preset_topology("k80x8");
  int replicated_somewhere = 0;
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (int64_t batch : {16, 48}) {
      Graph g = model_graph(model, batch, true);
      double single = static_cast<double>(estimate_cost(g, make_plan(g, "single", 1), k80).peak_memory_bytes);
      for (int devices : {2, 4, 8}) {
        Plan p = make_plan(g, "tofu", devices);
        double extra = 0;
        for (const OpEntry &e : p.ops) {
          const Op &op = g.op(*g.find_op(e.name));
          bool whole = std::all_of(e.config.vars.begin(), e.config.vars.end(),
                                   [](const std::string &v) { return v.empty(); });
          if (!whole) continue;
          EXPECT_EQ(op.phase, Phase::update) << e.name;
          for (TensorId t : op.outputs)
            extra += static_cast<double>(num_elements(g.tensor(t).shape) * dtype_size(g.tensor(t).dtype)) *
                     (devices - 1) / devices;
          ++replicated_somewhere;
        }
        EXPECT_LE(extra, 0.15 * single / devices) << model << " batch " << batch << " on " << devices;
      }
    }
  EXPECT_GT(replicated_somewhere, 0);
  // The CNN's state is small beside its activations: its updates are replicated, so one step reaches data
  // parallelism (replicated updates, one all-reduce per gradient) where partitioning every op moves more.
  Graph cnn = model_graph("cnn.onnx", 48, true);
  EXPECT_LE(plan_comm_bytes(cnn, make_plan(cnn, "tofu", 2)), plan_comm_bytes(cnn, make_plan(cnn, "data", 2)));
}

/** Every combination of partitioning choices of a one-step problem, priced by plan_comm_bytes (not by the DP's
 *  model): the cheapest must be what tofu finds. */
TEST(SearchPlanners, TofuDpMatchesBruteForceOnForwardGraphs) {
  // (The CNN's 163840 combinations agree too, but take a minute.)
  for (const char *model : {"mlp.onnx"}) {
    SCOPED_TRACE(model);
    Graph g = model_graph(model, 16, false);
    std::vector<std::vector<describe::Description>> descs;
    for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
    PartialPlan pp = start_partial(g);
    StepModel m(g, descs, pp, 2, true);
    std::vector<std::vector<int>> options;
    int64_t combos = 1;
    for (OpId o = 0; o < g.num_ops(); ++o) {
      options.push_back(m.partitioning_choices(o));
      combos *= static_cast<int64_t>(options.back().size());
    }
    ASSERT_LE(combos, 20000);
    std::vector<size_t> at(options.size(), 0);
    int64_t best = -1;
    for (int64_t n = 0; n < combos; ++n) {
      std::vector<int> pick;
      for (size_t k = 0; k < options.size(); ++k) pick.push_back(options[k][at[k]]);
      PartialPlan copy = pp;
      m.commit(pick, copy);
      int64_t bytes = plan_comm_bytes(g, finish_partial(g, 2, copy));
      if (best < 0 || bytes < best) best = bytes;
      for (size_t k = 0; k < at.size() && ++at[k] == options[k].size(); ++k) at[k] = 0;
    }
    EXPECT_EQ(plan_comm_bytes(g, tofu_plan(g, 2)), best);
  }
}

TEST(SearchPlanners, CoarseningKeepsForwardBackwardAndUpdateTogether) {
  Graph g = model_graph("mlp.onnx", 16, true);
  std::vector<int> group_of(static_cast<size_t>(g.num_ops()), -1);
  std::vector<std::vector<OpId>> groups = coarsen(g);
  for (size_t i = 0; i < groups.size(); ++i)
    for (OpId o : groups[i]) {
      EXPECT_EQ(group_of[static_cast<size_t>(o)], -1);
      group_of[static_cast<size_t>(o)] = static_cast<int>(i);
    }
  for (OpId o = 0; o < g.num_ops(); ++o) {
    ASSERT_GE(group_of[static_cast<size_t>(o)], 0);
    EXPECT_EQ(group_of[static_cast<size_t>(o)], group_of[static_cast<size_t>(g.op(o).group)]) << g.op(o).name;
  }
  for (const Assign &a : g.assigns)
    EXPECT_EQ(group_of[static_cast<size_t>(g.tensor(a.src).producer)],
              group_of[static_cast<size_t>(g.consumers(a.dst).front())])
        << g.tensor(a.dst).name;
  EXPECT_LT(groups.size(), static_cast<size_t>(g.num_ops()));
}

TEST(SearchPlanners, CoarseningMergesUnrolledTimesteps) {
  // Two timesteps of one recurrent node: the same MatMul and Tanh of each step form one group, so every step takes
  // the same strategy; the MatMul of another node stays apart.
  Graph g = parse_graph(R"(graph rnn
tensor x f32[4,8] input
tensor w f32[8,8] constant = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
tensor a0 f32[4,8] activation
tensor h0 f32[4,8] activation
tensor a1 f32[4,8] activation
tensor h1 f32[4,8] activation
tensor y f32[4,8] activation
op c/t0/m MatMul forward unroll=c t=0 (x, w) -> (a0)
op c/t0/h Tanh forward unroll=c t=0 (a0) -> (h0)
op c/t1/m MatMul forward unroll=c t=1 (h0, w) -> (a1)
op c/t1/h Tanh forward unroll=c t=1 (a1) -> (h1)
op out MatMul forward (h1, w) -> (y)
output y
)");
  std::vector<std::vector<OpId>> groups = coarsen(g);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], (std::vector<OpId>{0, 2}));
  EXPECT_EQ(groups[1], (std::vector<OpId>{1, 3}));
  EXPECT_EQ(groups[2], (std::vector<OpId>{4}));
}

TEST(SearchPlanners, FactorsGiveTheMesh) {
  Graph g = model_graph("mlp.onnx", 16, true);
  EXPECT_EQ(default_factors(8), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(default_factors(12), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(default_factors(1), std::vector<int64_t>{});
  // A topology's level order (slowest first) is the factor order: 4 nodes x 2 devices.
  Plan p = tofu_plan(g, 8, TofuOptions{{4, 2}, true});
  for (const OpEntry &e : p.ops) EXPECT_EQ(e.config.mesh, (std::vector<int64_t>{4, 2})) << e.name;
  try {
    tofu_plan(g, 8, TofuOptions{{2, 2}, true});
    ADD_FAILURE() << "no error";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "tofu: mesh factors multiply to 4, not 8 devices");
  }
}

TEST(SearchPlanners, Icml18NeverSplitsASum) {
  Graph g = model_graph("cnn.onnx", 16, true);
  Plan p = make_plan(g, "icml18", 4);
  for (const TensorEntry &t : p.tensors)
    if (g.tensor(*g.find_tensor(t.name)).producer != kNoOp)
      for (const AxisSharding &a : t.sharding.axes) EXPECT_NE(a.kind, AxisSharding::Kind::partial) << t.name;
}

/** p100-4x4's links with `nodes` nodes of `per_node` devices. */
Topology two_level(int nodes, int per_node) {
  Topology t = preset_topology("p100-4x4");
  t.name = std::to_string(nodes) + "x" + std::to_string(per_node);
  t.levels[0].count = per_node;
  t.levels[1].count = nodes;
  return t;
}

TEST(HierarchyAwareTofu, LevelsAndFactorsFollowTheTopology) {
  Topology p100 = preset_topology("p100-4x4");
  EXPECT_EQ(hierarchy_levels(p100, 16), (std::vector<int>{4, 4}));
  EXPECT_EQ(hierarchy_levels(p100, 8), (std::vector<int>{4, 2}));
  EXPECT_EQ(hierarchy_levels(p100, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(hierarchy_levels(p100, 6), std::vector<int>{});  // nodes of 4 and 2
  EXPECT_EQ(hierarchy_levels(p100, 32), std::vector<int>{});
  EXPECT_EQ(hierarchy_factors(p100, 6), default_factors(6));
  EXPECT_EQ(hierarchy_factors(p100, 8), (std::vector<int64_t>{2, 2, 2}));
  // 2 nodes of 3: the node level's 2 is the first step, where default_factors would put the 3 first and straddle
  // nodes with its groups ({0, 2, 4}).
  EXPECT_EQ(hierarchy_factors(two_level(2, 3), 6), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(default_factors(6), (std::vector<int64_t>{3, 2}));
}

double comm_seconds(const Graph &g, const Plan &p, const Topology &t) {
  double worst = 0;
  for (const DeviceCost &d : estimate_cost(g, p, t).devices) worst = std::max(worst, d.comm_seconds);
  return worst;
}

/** Per mesh axis of `c`, the one topology level every two devices of its groups (devices differing only on that axis)
 *  differ at; -2 when there is no such level (a group straddles a node: some of its devices share it, some not). */
std::vector<int> axis_levels(const ParallelConfig &c, const Topology &t) {
  std::vector<int> levels;
  int64_t size = 1;
  for (int64_t m : c.mesh) size *= m;
  int64_t stride = size;
  for (size_t a = 0; a < c.mesh.size(); ++a) {
    stride /= c.mesh[a];
    int level = -3;
    for (int64_t pos = 0; pos < size; ++pos) {
      if ((pos / stride) % c.mesh[a] != 0) continue;  // one group per start position
      std::vector<int> group;
      for (int64_t i = 0; i < c.mesh[a]; ++i) group.push_back(c.devices[static_cast<size_t>(pos + i * stride)]);
      for (size_t i = 0; i < group.size(); ++i)
        for (size_t j = i + 1; j < group.size(); ++j) {
          int l = t.level_between(group[i], group[j]);
          level = level == -3 || level == l ? l : -2;
        }
    }
    levels.push_back(level);
  }
  return levels;
}

TEST(HierarchyAwareTofu, StepsStayInsideLevelsAndTheFastestOrderWins) {
  struct Case {
    const char *model;
    Topology topo;
    int devices;
  };
  for (const Case &k : {Case{"mlp.onnx", two_level(2, 3), 6}, Case{"cnn.onnx", two_level(2, 3), 6},
                        Case{"mlp.onnx", preset_topology("p100-4x4"), 16},
                        Case{"cnn.onnx", preset_topology("p100-4x4"), 16},
                        Case{"cnn.onnx", preset_topology("v100-2x8"), 16}}) {
    SCOPED_TRACE(std::string(k.model) + " on " + k.topo.name);
    Graph g = model_graph(k.model, 48, true);
    Plan p = tofu_plan(g, k.devices, TofuOptions{{}, true, &k.topo});
    EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
    // Every step's groups lie inside one level (its link carries all of the step's bytes), each level's steps are
    // adjacent, and every level the devices use gets steps.
    std::vector<int> levels = axis_levels(p.ops[0].config, k.topo);
    for (const OpEntry &e : p.ops) EXPECT_EQ(axis_levels(e.config, k.topo), levels) << e.name;
    std::vector<int> seen;
    for (int l : levels) {
      EXPECT_GE(l, 0);
      if (seen.empty() || seen.back() != l) seen.push_back(l);
    }
    EXPECT_EQ(seen.size(), std::set<int>(seen.begin(), seen.end()).size());
    EXPECT_EQ(seen.size(), 2u);
    // Tofu's order (the node level first, devices numbered node by node) is one candidate: the plan tofu keeps is
    // it, unless another order's communication is strictly faster on the topology.
    Plan tofu_order = tofu_plan(g, k.devices, TofuOptions{hierarchy_factors(k.topo, k.devices), true});
    EXPECT_EQ(axis_levels(tofu_order.ops[0].config, k.topo)[0], 1);
    double chosen = comm_seconds(g, p, k.topo), first = comm_seconds(g, tofu_order, k.topo);
    if (print_plan(p) == print_plan(tofu_order)) {
      EXPECT_EQ(levels[0], 1);
    } else {
      EXPECT_LT(chosen, first);
      EXPECT_EQ(levels[0], 0);  // two levels: the other order splits inside nodes first
    }
    std::printf("  %s on %s: tofu order %.4e s, kept %.4e s (%s first)\n", k.model, k.topo.name.c_str(), first,
                chosen, levels[0] == 1 ? "nodes" : "devices in a node");
  }
}

TEST(HierarchyAwareTofu, TopologyChangesTheDeviceOrderOnlyWhereLevelsSayHow) {
  Graph g = model_graph("mlp.onnx", 48, true);
  // One level (k80x8, a shared PCIe bus): as without a topology.
  Topology k80 = preset_topology("k80x8");
  EXPECT_EQ(print_plan(tofu_plan(g, 8, TofuOptions{{}, true, &k80})), print_plan(tofu_plan(g, 8)));
  // Devices that fill nodes unevenly (6 on 4 x 4): no hierarchy, as without a topology.
  Topology p100 = preset_topology("p100-4x4");
  EXPECT_EQ(print_plan(tofu_plan(g, 6, TofuOptions{{}, true, &p100})), print_plan(tofu_plan(g, 6)));
  // 2 nodes of 3: without a topology the 3-way step comes first over devices {0, 2, 4}, which straddle nodes; with
  // it, no group of any step straddles a node.
  Topology t = two_level(2, 3);
  EXPECT_EQ(axis_levels(tofu_plan(g, 6).ops[0].config, t)[0], -2);
  EXPECT_NE(print_plan(tofu_plan(g, 6, TofuOptions{{}, true, &t})), print_plan(tofu_plan(g, 6)));
  try {
    tofu_plan(g, 32, TofuOptions{{}, true, &p100});
    ADD_FAILURE() << "no error";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "tofu: 32 devices, but topology p100-4x4 has 16");
  }
}

}  // namespace
}  // namespace cleave::plan
