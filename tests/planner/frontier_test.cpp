// The frontier-tracking algorithm (planner/search/frontier_solve.h) against brute force over every assignment, and the
// frontier planner (planner/search/frontier.h) on the tiny models.
#include "planner/search/frontier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/frontier_solve.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using ft::Cost;
using ft::FrontierPoint;

constexpr size_t kExact = std::numeric_limits<size_t>::max();

/** Costs of `got` equal those of `want` (sorted by time both), and every point's choice reaches its cost. */
void expect_same_frontier(const ft::CostGraph &g, const std::vector<FrontierPoint> &got,
                          const std::vector<FrontierPoint> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].cost.time, want[i].cost.time, 1e-9) << "point " << i;
    EXPECT_NEAR(got[i].cost.memory, want[i].cost.memory, 1e-9) << "point " << i;
    Cost c = ft::assignment_cost(g, got[i].choice);
    EXPECT_NEAR(c.time, got[i].cost.time, 1e-9);
    EXPECT_NEAR(c.memory, got[i].cost.memory, 1e-9);
  }
}

/** A deterministic pseudo-random graph: `n` nodes of `k` configs, the given edges; costs are small integers so sums
 *  are exact. */
ft::CostGraph random_graph(int n, int k, const std::vector<std::pair<int, int>> &edges, uint64_t seed) {
  uint64_t s = seed;
  auto next = [&]() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>((s >> 33) % 17);
  };
  ft::CostGraph g;
  for (int v = 0; v < n; ++v) {
    g.names.push_back("n" + std::to_string(v));
    std::vector<Cost> c;
    for (int i = 0; i < k; ++i) c.push_back({next(), next()});
    g.nodes.push_back(c);
  }
  for (auto [a, b] : edges) {
    ft::CostGraph::Edge e{a, b, {}};
    for (int i = 0; i < k * k; ++i) e.cost.push_back({next(), next() / 4});
    g.edges.push_back(e);
  }
  return g;
}

TEST(ParetoKeep, KeepsNonDominatedLeastTimeFirst) {
  std::vector<Cost> pts{{3, 1}, {1, 5}, {2, 2}, {2, 3}, {1, 5}, {4, 1}, {5, 0}};
  EXPECT_EQ(ft::pareto_keep(pts, kExact), (std::vector<size_t>{1, 2, 0, 6}));
}

TEST(ParetoKeep, KeepsTheFastestAtInfiniteMemory) {
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(ft::pareto_keep({{4, 3}, {1, inf}}, kExact), (std::vector<size_t>{1, 0}));
  EXPECT_EQ(ft::pareto_keep({{1, inf}, {2, inf}}, kExact), (std::vector<size_t>{0}));
  EXPECT_EQ(ft::pareto_keep({{2, 1}}, 0), (std::vector<size_t>{0}));
  EXPECT_EQ(ft::pareto_keep({{2, 1}, {2, 1}}, 0), (std::vector<size_t>{0}));
}

TEST(ParetoKeep, BoundsKeepBothEnds) {
  std::vector<Cost> pts;
  for (int i = 0; i < 20; ++i) pts.push_back({static_cast<double>(i), static_cast<double>(20 - i)});
  std::vector<size_t> kept = ft::pareto_keep(pts, 5);
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), 19u);
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_LT(kept[i - 1], kept[i]);
}

// pareto_keep sorts only the points that can be on the front: the same indices as the definition (a point is kept when
// no point is at least as good in both and better in one, nor equal with a lower index), on small integer grids full
// of ties, and the same thinning.
TEST(ParetoKeep, MatchesTheDefinitionWithTies) {
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>((state >> 16) % 6);
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<Cost> pts(static_cast<size_t>(1 + round % 30));
    for (Cost &c : pts) c = {next(), next()};
    std::vector<size_t> want;
    for (size_t i = 0; i < pts.size(); ++i) {
      bool beaten = false;
      for (size_t j = 0; j < pts.size() && !beaten; ++j) {
        bool no_worse = pts[j].time <= pts[i].time && pts[j].memory <= pts[i].memory;
        bool better = pts[j].time < pts[i].time || pts[j].memory < pts[i].memory;
        beaten = no_worse && (better || j < i);
      }
      if (!beaten) want.push_back(i);
    }
    std::sort(want.begin(), want.end(), [&](size_t a, size_t b) { return pts[a].time < pts[b].time; });
    SCOPED_TRACE(round);
    EXPECT_EQ(ft::pareto_keep(pts, kExact), want);
    // The solver's sets keep the same points, offered one at a time: a node whose configs are these points.
    ft::CostGraph one;
    one.names = {"v"};
    one.nodes = {pts};
    std::vector<size_t> solved;
    for (const FrontierPoint &p : ft::solve_frontier(one, {kExact, 256, 48, kExact}))
      solved.push_back(static_cast<size_t>(p.choice[0]));
    EXPECT_EQ(solved, want);
    if (want.size() > 3) {
      std::vector<size_t> kept = ft::pareto_keep(pts, 3);
      EXPECT_EQ(kept, (std::vector<size_t>{want.front(), want[(want.size() - 1 + 1) / 2], want.back()}));
    }
  }
}

TEST(CostGraphText, ParsesAndReportsErrors) {
  ft::CostGraph g = ft::parse_cost_graph("node a 1/2 3/4\nnode b 5/6\nedge a b 1/0 2/0  # comment\n");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.edges[0].cost[1], (Cost{2, 0}));
  auto err = [](const std::string &t) {
    try {
      ft::parse_cost_graph(t, "g.txt");
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(err("node a 1/2\nedge a b 1/1\n"), "g.txt:2: unknown node \"b\"");
  EXPECT_EQ(err("node a 1/2\nnode b 1/1\nedge a b 1/1 2/2\n"), "g.txt:3: edge a-b has 2 costs, want 1");
  EXPECT_EQ(err("node a 1-2\n"), "g.txt:1: expected TIME/MEMORY, got \"1-2\"");
}

// Branch elimination only: a star (every leaf has degree 1).
TEST(FrontierSolve, BranchEliminationMatchesBruteForce) {
  ft::CostGraph g = ft::parse_cost_graph(R"(
node hub 1/9 4/3 8/1
node a   2/2 1/6
node b   0/5 3/1 2/2
node c   1/1 5/0
edge hub a 0/0 3/0 2/0 0/0 5/0 1/0
edge hub b 1/0 0/0 4/0 2/0 2/0 0/0 0/0 6/0 1/0
edge hub c 0/0 1/0 3/0 3/0 2/0 0/0
)");
  ft::SolveStats stats;
  std::vector<FrontierPoint> got = ft::solve_frontier(g, {kExact, kExact, 0}, &stats);
  expect_same_frontier(g, got, ft::brute_force_frontier(g));
  EXPECT_EQ(stats.branch, 3);
  EXPECT_EQ(stats.node + stats.heuristic + stats.ldp_nodes, 0);
  EXPECT_GT(got.size(), 2u);
}

// Node elimination: a ring of 5 (every node degree 2) reduces by node eliminations, then two parallel edges
// (edge elimination), then a branch.
TEST(FrontierSolve, NodeAndEdgeEliminationMatchBruteForce) {
  ft::CostGraph g = random_graph(5, 3, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}}, 7);
  ft::SolveStats stats;
  std::vector<FrontierPoint> got = ft::solve_frontier(g, {kExact, kExact, 0}, &stats);
  expect_same_frontier(g, got, ft::brute_force_frontier(g));
  EXPECT_GE(stats.node, 2);
  EXPECT_GE(stats.edge, 1);
  EXPECT_EQ(stats.heuristic + stats.ldp_nodes, 0);
}

// Parallel edges given in the input merge by edge elimination.
TEST(FrontierSolve, DuplicateEdgesMerge) {
  ft::CostGraph g = random_graph(3, 3, {{0, 1}, {1, 0}, {1, 2}, {1, 2}}, 3);
  ft::SolveStats stats;
  expect_same_frontier(g, ft::solve_frontier(g, {kExact, kExact, 0}, &stats), ft::brute_force_frontier(g));
  EXPECT_EQ(stats.edge, 2);
}

// K4 (every degree 3) does not reduce: the LDP over all of it is exact.
TEST(FrontierSolve, LdpMatchesBruteForce) {
  ft::CostGraph g = random_graph(5, 3, {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 0}, {4, 1}}, 11);
  ft::SolveStats stats;
  expect_same_frontier(g, ft::solve_frontier(g, {kExact, kExact, 64}, &stats), ft::brute_force_frontier(g));
  EXPECT_GT(stats.ldp_nodes, 0);
  EXPECT_EQ(stats.ldp_states_dropped, 0);
  EXPECT_EQ(stats.heuristic, 0);
}

// Heuristic elimination (LDP disabled) is not exact: every point it returns must be the real cost of its assignment
// and lie on or above the exact frontier.
TEST(FrontierSolve, HeuristicEliminationGivesReachablePoints) {
  ft::CostGraph g = random_graph(5, 3, {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 0}, {4, 1}}, 11);
  ft::SolveStats stats;
  std::vector<FrontierPoint> got = ft::solve_frontier(g, {kExact, kExact, 0}, &stats);
  std::vector<FrontierPoint> exact = ft::brute_force_frontier(g);
  EXPECT_GE(stats.heuristic, 1);
  ASSERT_FALSE(got.empty());
  for (const FrontierPoint &p : got) {
    Cost c = ft::assignment_cost(g, p.choice);
    EXPECT_NEAR(c.time, p.cost.time, 1e-9);
    EXPECT_NEAR(c.memory, p.cost.memory, 1e-9);
    // No returned point beats the exact frontier.
    bool dominated_or_on = false;
    for (const FrontierPoint &e : exact)
      dominated_or_on = dominated_or_on || (e.cost.time <= c.time + 1e-9 && e.cost.memory <= c.memory + 1e-9);
    EXPECT_TRUE(dominated_or_on);
  }
}

// With a guide, heuristic elimination fixes nodes to the guide's configs: the solve is exact over the assignments
// that agree with the guide there, so every exact-frontier assignment, given as the guide, is reached (or beaten in
// both time and memory). Without the guide some are lost on some of these graphs (the fixes go by time alone).
TEST(FrontierSolve, GuidedHeuristicEliminationReachesTheGuide) {
  auto reaches = [](const std::vector<FrontierPoint> &got, Cost want) {
    for (const FrontierPoint &p : got)
      if (p.cost.time <= want.time + 1e-9 && p.cost.memory <= want.memory + 1e-9) return true;
    return false;
  };
  int lost_unguided = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ft::CostGraph g =
        random_graph(5, 3, {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 0}, {4, 1}}, seed);
    ft::SolveStats plain_stats;
    std::vector<FrontierPoint> plain = ft::solve_frontier(g, {kExact, kExact, 0}, &plain_stats);
    for (const FrontierPoint &e : ft::brute_force_frontier(g)) {
      ft::SolveOptions o{kExact, kExact, 0};
      o.guide = e.choice;
      ft::SolveStats stats;
      EXPECT_TRUE(reaches(ft::solve_frontier(g, o, &stats), e.cost)) << "seed " << seed;
      EXPECT_GE(stats.heuristic, 1);
      lost_unguided += !reaches(plain, e.cost);
    }
  }
  EXPECT_GT(lost_unguided, 0);
}

// Bounded sets: at most max_points survive, the least-time point of the exact frontier among them when nothing else
// was lost (a tree: eliminations keep the fastest point exactly).
TEST(FrontierSolve, BoundedSetsKeepTheFastestPoint) {
  ft::CostGraph g = random_graph(7, 3, {{0, 1}, {1, 2}, {1, 3}, {3, 4}, {4, 5}, {4, 6}}, 5);
  std::vector<FrontierPoint> got = ft::solve_frontier(g, {3, kExact, 0, 3});
  std::vector<FrontierPoint> exact = ft::brute_force_frontier(g);
  ASSERT_LE(got.size(), 3u);
  EXPECT_NEAR(got.front().cost.time, exact.front().cost.time, 1e-9);
  EXPECT_NEAR(got.back().cost.memory, exact.back().cost.memory, 1e-9);
}

Graph training_graph(const std::string &model) {
  ImportOptions opts;
  opts.batch = 8;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

// On the tiny models: every frontier plan is valid and lowered by codegen, the printed frontier is non-dominated
// and sorted by time, and the search is deterministic.
TEST(FrontierPlanner, TinyModelsGiveValidNonDominatedPlans) {
  Topology t = preset_topology("k80x8");
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (int devices : {2, 4}) {
      SCOPED_TRACE(std::string(model) + " devices " + std::to_string(devices));
      Graph g = training_graph(model);
      FrontierResult r = frontier_search(g, devices, t);
      ASSERT_FALSE(r.frontier.empty());
      for (size_t i = 0; i < r.frontier.size(); ++i) {
        const FrontierPlan &f = r.frontier[i];
        EXPECT_EQ(plan_problems(g, f.plan), std::vector<std::string>{});
        for (const OpEntry &e : f.plan.ops) {
          const Op &op = g.op(*g.find_op(e.name));
          EXPECT_TRUE(codegen_supports(g, op, describe::describe(g, op), e.config)) << e.name;
        }
        CostReport c = estimate_cost(g, f.plan, t);
        EXPECT_EQ(c.predicted_step_seconds, f.step_seconds);
        EXPECT_EQ(c.peak_memory_bytes, f.peak_memory_bytes);
        if (i > 0) {
          EXPECT_GT(f.step_seconds, r.frontier[i - 1].step_seconds);
          EXPECT_LT(f.peak_memory_bytes, r.frontier[i - 1].peak_memory_bytes);
        }
      }
      FrontierResult again = frontier_search(training_graph(model), devices, t);
      ASSERT_EQ(again.frontier.size(), r.frontier.size());
      for (size_t i = 0; i < r.frontier.size(); ++i)
        EXPECT_EQ(print_plan(again.frontier[i].plan), print_plan(r.frontier[i].plan));
    }
}

// The cost graph prices a plan's communication as estimate_cost does: data parallelism (every op's config among the
// candidates, every device doing the same) costs the same seconds in both; a plan outside the candidates is counted.
TEST(FrontierPlanner, ModelMatchesEstimateCostOnDataPlans) {
  for (const char *name : {"k80x8", "p100-4x4"})
    for (const char *model : {"mlp.onnx", "cnn.onnx"})
      for (int devices : {2, 4, 8}) {
        Topology t = preset_topology(name);
        if (devices > t.devices()) continue;
        SCOPED_TRACE(std::string(model) + " on " + name + " devices " + std::to_string(devices));
        Graph g = training_graph(model);
        Plan data = make_plan(g, "data", devices, &t);
        // Without a profile, and with one that measured only a statement_gap (each device's kernels, collectives,
        // copies and data reads, and its part in each send/recv, one gap each).
        Profile gap;
        gap.statement_gap = 3e-6;
        for (const Profile *profile : std::vector<const Profile *>{nullptr, &gap}) {
          std::vector<ModelledPlan> m = frontier_model_costs(g, devices, t, {data}, profile);
          ASSERT_EQ(m.size(), 1u);
          EXPECT_EQ(m[0].ops_matched, g.num_ops());
          double want = estimate_cost(g, data, t, profile).predicted_step_seconds;
          EXPECT_NEAR(m[0].model.time, want, 1e-9 * want) << (profile ? "with a gap" : "roofline");
        }
      }
}

// Pricing ops ahead of tofu's seed (frontier_search runs it beside tofu's search) gives the graph priced after every
// seed joined: the ops whose configs the last seed adds, and the edges out of them, are priced again.
TEST(FrontierPlanner, PricingAheadOfTheLastSeedGivesTheSameGraph) {
  Topology t = preset_topology("p100-4x4");
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (int devices : {4, 8}) {
      SCOPED_TRACE(std::string(model) + " devices " + std::to_string(devices));
      Graph g = training_graph(model);
      // A random plan last: its configs (device subsets, odd meshes) are seldom candidates already.
      std::vector<Plan> seeds{make_plan(g, "equalchop", devices, &t), make_plan(g, "tofu", devices, &t),
                              random_plan(g, devices, 7)};
      ft::CostGraph ahead = frontier_cost_graph(g, devices, t, seeds, true);
      ft::CostGraph after = frontier_cost_graph(g, devices, t, seeds, false);
      ft::CostGraph without = frontier_cost_graph(g, devices, t, {seeds[0], seeds[1]}, false);
      // The last seed adds configs (else nothing is priced again and this shows nothing).
      size_t added = 0;
      for (size_t v = 0; v < after.nodes.size(); ++v) added += after.nodes[v].size() - without.nodes[v].size();
      EXPECT_GT(added, 0u);
      // ... and some op it adds configs to owns a tensor another op reads: an edge out of it is priced again.
      bool edge_grew = false;
      for (size_t e = 0; e < after.edges.size() && e < without.edges.size(); ++e)
        edge_grew = edge_grew || after.edges[e].cost.size() != without.edges[e].cost.size();
      EXPECT_TRUE(edge_grew);
      EXPECT_EQ(ahead.names, after.names);
      EXPECT_EQ(ahead.nodes, after.nodes);
      ASSERT_EQ(ahead.edges.size(), after.edges.size());
      for (size_t e = 0; e < after.edges.size(); ++e) {
        EXPECT_EQ(ahead.edges[e].a, after.edges[e].a);
        EXPECT_EQ(ahead.edges[e].b, after.edges[e].b);
        EXPECT_EQ(ahead.edges[e].cost, after.edges[e].cost) << "edge " << e;
      }
    }
}

// mini-time: the fastest plan that fits; a limit nothing fits names the flag.
TEST(FrontierPlanner, MiniTimeRespectsTheLimit) {
  Graph g = training_graph("mlp.onnx");
  FrontierResult r = frontier_search(g, 4, preset_topology("k80x8"));
  const FrontierPlan &least = r.frontier.back();
  EXPECT_EQ(&fastest_fitting(r, least.peak_memory_bytes), &least);
  EXPECT_EQ(&fastest_fitting(r, std::numeric_limits<int64_t>::max()), &r.frontier.front());
  try {
    fastest_fitting(r, least.peak_memory_bytes - 1);
    ADD_FAILURE() << "no error";
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find("--memory-limit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cleave::plan
