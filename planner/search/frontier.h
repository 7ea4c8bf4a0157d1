#pragma once
// The `frontier` planner (TensorOpt §3): the Pareto set of (step time, per-device memory) over per-op parallel
// configs, found by the frontier-tracking algorithm (frontier_solve.h) on a cost graph of the training graph.
//
// Cost graph: one node per op. Every config uses every device in order 0..n-1 on one mesh: per topology level used
// (hierarchy_levels), outermost first, its count's prime factors, descending ([2, 2, 2, 2] for 16 devices of v100-2x8;
// without a hierarchy the prime factors of n). Per mesh axis a splittable var of the op's primary description or none
// (replication), so a var is split over any product of axes and several vars mix (Tofu's recursive splits). Axes of
// one run (same level, same prime) only permute devices among themselves, so their vars are kept in var order
// (replication first). Configs go in order of fewest distinct entries (replication counting as one), splits before
// splits mixed with replication, then lexicographically; kept when config_problems and codegen_supports
// (strategies.h) accept them, at most kMaxConfigs per op.
// A config's cost: time = its roofline compute (cost_model.h op_slowest_compute_seconds), plus the all-reduce of
// partial outputs that several ops read, plus the statistics exchanges of synced kernels (cost_model.h
// sync_exchanges), plus the re-split of what it reads of sources it owns; memory = the bytes of its outputs' shards
// that are forward outputs read by a backward or update op (saved activations are what is live at the peak, the start
// of the backward pass), and of the sources it owns (params, optimizer state), on device 0 (every config spans every
// device).
// Tensors have owners (as in tofu_step.h): a produced tensor its producer, a param or optimizer state bound by an
// assign the producer of its new value (it takes that value's sharding, partial axes replicated), another source its
// first reader (split where that reader's boxes are exactly a sharding's blocks, graph data on its sample axis only, else
// replicated). Every other read of a tensor is an edge owner -> reader whose time for a pair of configs is the
// re-split as estimate_cost prices what codegen emits for it (cost_model.h): a partial tensor read by one op is
// reduce-scattered where the reader's boxes tile each group's shard, else all-reduced; then the boxes a device lacks
// are all-gathered where the blocks of the devices wanting one box tile it, else exchanged all-to-all where the
// pattern fits, else fetched by a grouped send/recv; per device the sum of the collectives it is in, the slowest
// device. A partial tensor read by several ops is all-reduced by its producer. The edge's memory is the box a forward
// reader's device assembles when anything moves and the backward pass reads that tensor.
// With a profile every piece is priced as estimate_cost prices it with that profile, and every statement (a kernel,
// collective, copy or data read, a rank's part in a grouped send/recv) costs the profile's statement_gap more: on a
// data plan the graph's time is estimate_cost's (tests/planner/frontier_test.cpp). Elsewhere it charges a gap per
// edge priced: an op fetching k inputs by send/recv pays k gaps per rank, where codegen groups them into one
// statement (edges are priced apart, so the graph cannot see that they share one).
// Seeds: the tofu plan (tofu.h, the fast end) and the equalchop baseline (baselines.h, the low-memory end) over the
// same devices. Their per-op configs join each op's candidates where the enumeration lacks them (tofu orders a
// level's axes freely and mixes more vars), and heuristic elimination fixes a node to the tofu seed's config rather
// than by least time (which loses the seed's neighbourhood). The candidates are the solve's points and both seeds,
// so the frontier is never worse than either seed plan; each distinct assignment the cost graph does not dominate
// is re-scored.
// The FT points' plans are re-scored by estimate_cost; the frontier printed is the non-dominated set of the
// re-scored (predicted_step_seconds, peak_memory_bytes) points, by time. Deterministic.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/search/frontier_solve.h"
#include "planner/plan/plan.h"
#include "planner/cost/profile.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

inline constexpr size_t kMaxConfigs = 32;

struct FrontierPlan {
  Plan plan;
  /** The FT cost graph's additive estimate. */
  ft::Cost model;
  /** estimate_cost's. */
  double step_seconds = 0;
  int64_t peak_memory_bytes = 0;
};

struct FrontierResult {
  int devices = 1;
  /** Non-dominated re-scored plans, least step time first. */
  std::vector<FrontierPlan> frontier;
  ft::SolveStats stats;
  int ops = 0, edges = 0;
  int64_t configs = 0;
  /** FT points before re-scoring. */
  int candidates = 0;
  /** Wall seconds of building the cost graph, FT, re-scoring (for people: not in the table). */
  std::array<double, 3> seconds{};
};

/** The frontier of `g` over `devices` devices of `t` (rules above). With a `profile` (profile.h), every time of the
 *  cost graph and of the re-scoring is measured where the profile has it, as estimate_cost takes it: an op's shares
 *  (by op name and shard key), collectives, send/recv transfers, copies and data reads. Throws UserError when `t`
 *  has fewer devices. */
FrontierResult frontier_search(const Graph &g, int devices, const Topology &t, const ft::SolveOptions &options = {},
                               const Profile *profile = nullptr);

/** The FT cost graph's estimate of each of `plans` (over `devices` devices of `t`), with how many of its ops run a
 *  config equal to one of their candidates (the same var ranges on every device): the estimate is that of the plan
 *  with each such op on its candidate and every other op on its first candidate. For diagnostics: where the search
 *  misses a plan, whether the candidate set lacks it or the model misprices it. */
struct ModelledPlan {
  ft::Cost model;
  int ops_matched = 0;
};
std::vector<ModelledPlan> frontier_model_costs(const Graph &g, int devices, const Topology &t,
                                               const std::vector<Plan> &plans, const Profile *profile = nullptr);

/** The cost graph of `g` with the configs of `seeds` joining the candidates in order, as frontier_search builds it.
 *  With `price_ahead`, every op is priced before the last seed joins, as when tofu's search outlasts the pricing run
 *  beside it (the ops that seed changes are priced again): the graph is the same either way (tests). */
ft::CostGraph frontier_cost_graph(const Graph &g, int devices, const Topology &t, const std::vector<Plan> &seeds,
                                  bool price_ahead);

/** mini-time: the fastest frontier plan whose peak fits `memory_limit` bytes. UserError naming --memory-limit when
 *  none fits. */
const FrontierPlan &fastest_fitting(const FrontierResult &r, int64_t memory_limit);

/** The frontier as a table, one line per plan (deterministic): index, step seconds, peak bytes, the FT model's
 *  seconds and bytes, and how many ops split / replicate. */
std::string frontier_table(const FrontierResult &r, const std::string &topology);

/** A point of another planner to draw beside the frontier. */
struct LabelledPoint {
  std::string label;
  double step_seconds = 0;
  int64_t peak_memory_bytes = 0;
};

/** An SVG scatter plot: step time (x) against peak memory (y), the frontier as a connected line of points, the
 *  `others` as labelled crosses. Deterministic. */
std::string frontier_svg(const FrontierResult &r, const std::vector<LabelledPoint> &others, const std::string &title);

/** The plan make_plan("frontier") returns: the fastest frontier plan fitting the topology's device memory (`t`, or
 *  without one the first of k80x8 and p100-4x4 that holds `devices`), priced with `profile` where given. */
Plan frontier_plan(const Graph &g, int devices, const Topology *t, const Profile *profile = nullptr);

}  // namespace cleave::plan
