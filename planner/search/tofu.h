#pragma once
// The `tofu` planner (Tofu §5): coarsening, dynamic programming over the coarsened graph, recursion over the
// factors of the device count. It minimises the bytes codegen moves per step (planner/search/tofu_step.h).
//
// Coarsening merges ops that should share a strategy into groups: a forward op with its backward ops (Op::group);
// a param's update op with the param's first reader (a tensor with its gradient: both then live on the same boxes);
// chains of elementwise ops of one shape; the same op of every timestep of an unrolled RNN (Op::unroll_scope).
// A group's choices are its first op's choices; for each, the other members take the choices that minimise the
// group's internal cost (by brute force over their combinations when there are at most kBruteForce of them, else
// one member at a time in op order).
//
// The DP walks the groups in op order, its state the choices of the groups already decided that still have an edge
// to a later group (Tofu's frontier); states with equal frontiers merge, keeping the cheaper. It is exact while the
// states of a layer number at most kMaxStates; beyond that only the cheapest kMaxStates survive (ties by choice
// order), so the search stays polynomial on graphs whose frontier is wide. Deterministic: no hashing, no threads.
//
// Every op is partitioned (Tofu), except update ops whose state (new param, optimizer state) fits, replicated, in the
// slack of Tofu's memory target (per-device peak <= 1.15 x 1-device peak / devices): those may also stay whole, as in
// data parallelism, which moves less where a model's state is small beside its activations (the tiny CNN on 2
// devices: tofu then equals data). Admitted smallest first while (k-1)/k of their outputs' bytes stay within
// 0.15 x the cost model's 1-device peak / k; a model whose params dominate its memory (WResNet-152-10) keeps them
// sharded.
#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

struct TofuOptions {
  /** One recursion step per factor, the first splitting across the slowest link (mesh axis 0 is the most
   *  significant, so devices numbered node by node put it across nodes). Empty: hierarchy_factors(topology, devices)
   *  with a topology, else default_factors(devices), i.e. prime factors in descending order. Their product must be
   *  the device count. */
  std::vector<int64_t> factors;
  /** false: never split a summed var (no partial outputs), the icml18 baseline. */
  bool reduction_splits = true;
  /** The machine (hierarchy-aware recursion, below); null: none, the steps are ordered by factor alone. */
  const Topology *topology = nullptr;
};

/** The tofu plan of `g` over `devices` devices. The result passes validate_plan and only uses splits codegen
 *  lowers (strategies.h codegen_supports). Throws UserError for factors that do not multiply to `devices`, or a
 *  topology with fewer than `devices` devices.
 *
 *  Hierarchy (a topology and no explicit factors): devices 0..devices-1 fill the topology's levels innermost first
 *  (hierarchy_levels). Each level used gets its own recursion steps (its count's prime factors, descending), so a
 *  step's groups never straddle a level boundary and every byte a step moves crosses that step's link. A step's
 *  choice is greedy (Tofu §5.2) and all its bytes cross one link, so weighing them by that link's α-β cost cannot
 *  change it; what the link costs do change is which level is split first, since the first step's bytes are paid
 *  once and a later step's choices adapt to it. Tofu's order splits the slowest level first (mesh axis 0 across
 *  nodes); tofu also runs every other order of the levels (with the plan's device order permuted so that each step's
 *  groups still lie in its level) and keeps the plan whose communication is fastest on the topology (cost_model.h:
 *  the slowest device's α-β communication seconds), ties to the earlier order. */
Plan tofu_plan(const Graph &g, int devices, const TofuOptions &options = {});

/** How devices 0..devices-1 use `t`'s levels (innermost first): per level the count used, each a divisor of the
 *  level's count, every level below a partly used one full. Empty when they do not form such a grid (6 devices on
 *  4 x 4: nodes of 4 and 2), or when `t` has fewer devices. */
std::vector<int> hierarchy_levels(const Topology &t, int devices);

/** The recursion factors of Tofu's order on `t`: the used levels outermost first, each level's count as prime
 *  factors, descending; default_factors(devices) when hierarchy_levels is empty. */
std::vector<int64_t> hierarchy_factors(const Topology &t, int devices);

/** Op groups of Tofu's coarsening, each sorted by op id, groups ordered by their first op. */
std::vector<std::vector<OpId>> coarsen(const Graph &g);

}  // namespace cleave::plan
