#pragma once
// TensorOpt's frontier-tracking (FT) algorithm (TensorOpt §3) on an abstract cost graph: per node a list of configs,
// each with an additive (time, memory) cost; per edge a (time, memory) cost for every pair of its ends' configs. The
// cost of an assignment (one config per node) is the sum of its nodes' and edges' costs; FT finds the Pareto set of
// (time, memory) over all assignments, each point with the assignment that reaches it.
//
// Every eliminated sub-graph is summarised by Pareto sets, so the graph shrinks while the frontier is kept:
//   - edge elimination: two edges between the same pair of nodes become one, their sets summed (Minkowski sum, then
//     pruned) per config pair;
//   - node elimination: a node v of degree 2 (neighbours u, w) becomes an edge u-w whose set for (cu, cw) is the
//     union over cv of E(u,v)[cu,cv] + N(v)[cv] + E(v,w)[cv,cw];
//   - branch elimination: a node v of degree 1 (neighbour u) folds into u: N(u)[cu] += union over cv of
//     E(u,v)[cu,cv] + N(v)[cv]; a node of degree 0 folds into the global set the same way;
//   Degree 0 and 1 go first (they add no edge), then degree 2, lowest node id first;
//   - heuristic elimination, when none of these applies and more than `ldp_max_nodes` nodes remain: the node of
//     highest degree (it breaks the most cycles) is fixed to the config with the lowest time bound (its own least
//     time plus, per edge, the least edge time plus neighbour time), its edges fold into its neighbours, and it
//     becomes a degree-0 node (not exact: the other configs of that node are lost); with a guide assignment
//     (SolveOptions::guide) it is fixed to the guide's config instead;
//   - LDP: the nodes that remain, in id order, by a linear DP whose state is the configs of the processed nodes that
//     still have an unprocessed neighbour (states with equal frontiers merge their sets); at most `max_states`
//     states survive a step, taken alternately by least time and by least memory (exact when none is dropped).
// Every set is pruned to its Pareto points (least time first; equal points keep the first found), then to at most
// `max_points` of them (`final_points` for the global set) spread evenly by rank, always keeping both ends (least
// time, least memory). With
// max_points and max_states large enough, and no heuristic elimination, the result is the exact frontier.
// Deterministic: no hashing, no threads; ties go to the lower config index.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::plan::ft {

struct Cost {
  double time = 0;
  double memory = 0;
  bool operator==(const Cost &) const = default;
};

struct CostGraph {
  struct Edge {
    int a = 0, b = 0;
    /** cost[ca * configs(b) + cb]. */
    std::vector<Cost> cost;
  };
  /** Per node, for messages and the text form. */
  std::vector<std::string> names;
  /** Per node, per config. Every node has at least one config. */
  std::vector<std::vector<Cost>> nodes;
  /** a != b; several edges may join the same pair. */
  std::vector<Edge> edges;

  int configs(int node) const { return static_cast<int>(nodes[static_cast<size_t>(node)].size()); }
};

/** The text form, for tests: one line per node, then per edge ('#' starts a comment):
 *    node NAME T/M T/M ...          configs in order, each time/memory
 *    edge NAME NAME T/M T/M ...     configs(a) x configs(b) costs, a's config major
 *  Throws UserError `<source>:<line>: <problem>`. */
CostGraph parse_cost_graph(const std::string &text, const std::string &source = "<cost graph>");

/** The cost of one config per node. */
Cost assignment_cost(const CostGraph &g, const std::vector<int> &choice);

struct FrontierPoint {
  Cost cost;
  /** One config per node. */
  std::vector<int> choice;
};

struct SolveOptions {
  size_t max_points = 8;
  size_t max_states = 256;
  size_t ldp_max_nodes = 48;
  /** The global set (the sub-graphs folded away, the LDP's end) keeps up to this many points (at least
   *  max_points): the frontier's candidates. */
  size_t final_points = 16;
  /** When not empty, a config per node: heuristic elimination fixes a node to this config instead of the one with
   *  the lowest time bound, so the solve keeps this assignment reachable (a guide plan's neighbourhood). */
  std::vector<int> guide{};
};

struct SolveStats {
  int edge = 0, node = 0, branch = 0, heuristic = 0, ldp_nodes = 0;
  /** LDP states dropped by max_states (0: the LDP was exact). */
  int64_t ldp_states_dropped = 0;
};

/** The Pareto set of (time, memory) over the assignments of `g`, least time first (rules above). Every point's cost
 *  is assignment_cost of its choice (up to floating-point summation order). */
std::vector<FrontierPoint> solve_frontier(const CostGraph &g, const SolveOptions &options = {},
                                          SolveStats *stats = nullptr);

/** The exact Pareto set by enumerating every assignment (tests; exponential). */
std::vector<FrontierPoint> brute_force_frontier(const CostGraph &g);

/** Indices of the points pruning keeps: the Pareto points of `points` (least time first; among equal points the
 *  first), then at most `max_points` (>= 2) of them spread evenly by rank, both ends kept. */
std::vector<size_t> pareto_keep(const std::vector<Cost> &points, size_t max_points);

}  // namespace cleave::plan::ft
