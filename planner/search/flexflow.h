#pragma once
// The `flexflow` planner (FlexFlow §6): Markov chain Monte Carlo over per-op parallel configs, scored by the task-graph
// simulator (simulator.h) with delta simulation.
//
// Chains (FlexFlow §6.2 starts from existing strategies, data parallelism and expert-designed ones, and from random
// ones): the first from the data-parallel plan (the single-device plan when the batch does not divide), the second
// from tofu's plan on the topology (tofu.h; left out when tofu cannot plan the graph), each restart from a random
// legal plan (random_plan.h, seeded from --seed and the restart's number). Since the best plan seen is kept, the
// result is never slower under the simulator than the data-parallel or tofu plan; FlexFlowResult::chains says what
// each chain found on its own. A proposal picks an
// op uniformly and gives it a new config: half the time a random legal one (random_plan.h random_op_config: device
// subsets and orders, meshes, split vars: FlexFlow's operation parallelism included), else the config of one of its
// neighbours (a producer or reader of its tensors) when that config is legal for it too, so good configs spread
// along chains of similar ops. Half the proposals move the op's whole coarsening group (tofu.h coarsen: a forward op
// with its backward ops, the same op in every timestep of an unrolled RNN, ...): each member for which the proposed
// config is legal takes it too, in one delta simulation (FlexFlow's ops are layers, forward and backward together).
// Metropolis-Hastings acceptance with the relative change of the simulated step time: always when it does not grow,
// else with probability exp(-kBeta·(new/old - 1)), kBeta = 5,000 (nearly greedy; flexflow.cpp says why). The best
// plan seen by any chain is the result (ties: the earlier chain, the earlier iteration).
//
// Memory is not weighed (as in FlexFlow): a plan that keeps more on fewer devices is taken if it is faster; check it
// with `cleave explain` (peak_memory_bytes). A proposal costs one delta simulation (simulator.h: the touched tensors'
// communication derived again, the tasks from the first changed op on timed again): ~15 ms on the NMT at 16
// devices, well under 1 ms on the tiny models.
//
// Determinism: the result depends only on the graph, device count, topology, seed and iteration count; the
// iterations are split evenly between the chains (the earlier ones get the remainder). A wall-clock cap
// (budget_seconds) stops every chain early when reached (the chains not reached yet only score their starts), which
// makes the result depend on the machine's speed: plan files and tests set it off (0) and rely on the iteration count.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/cost/profile.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

struct FlexFlowOptions {
  /** The machine the simulator prices the plans on; null: k80x8 up to 8 devices, p100-4x4 up to 16. */
  const Topology *topology = nullptr;
  uint64_t seed = 0;
  /** Proposals over all chains. */
  int64_t iterations = 2000;
  /** Chains from random plans besides those from the data-parallel and tofu plans. */
  int restarts = 1;
  /** Wall-clock cap in seconds over the whole search; 0: none. */
  double budget_seconds = 0;
  /** Measured times (profile.h) the simulator takes where it has them, as `cleave simulate --profile` does (FlexFlow
   *  measures each op's kernel once per config and device type); null: roofline and α-β. Must outlive the search. */
  const Profile *profile = nullptr;
};

struct FlexFlowResult {
  Plan plan;
  /** Simulated step seconds of the result and of the first chain's start (the data-parallel plan). */
  double simulated_seconds = 0, start_seconds = 0;
  int64_t iterations = 0, accepted = 0;
  struct Chain {
    std::string start;  // data, tofu or random
    double start_seconds = 0, best_seconds = 0;
  };
  std::vector<Chain> chains;
  /** The wall-clock cap stopped the search (the result is then machine-dependent). */
  bool hit_budget = false;
};

/** The flexflow search. The result passes validate_plan and its configs codegen_supports (strategies.h). Throws
 *  UserError when there is no topology holding `devices` devices. */
FlexFlowResult flexflow_search(const Graph &g, int devices, const FlexFlowOptions &options = {});

}  // namespace cleave::plan
