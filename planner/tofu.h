#pragma once
// The `tofu` planner (Tofu §5): coarsening, dynamic programming over the coarsened graph, recursion over the
// factors of the device count. It minimises the bytes codegen moves per step (planner/tofu_step.h).
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
#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "planner/plan.h"

namespace cleave::plan {

struct TofuOptions {
  /** One recursion step per factor, the first splitting across the slowest link (mesh axis 0 is the most
   *  significant, so devices numbered node by node put it across nodes). Empty: default_factors(devices), i.e.
   *  prime factors in descending order. Their product must be the device count. */
  std::vector<int64_t> factors;
  /** false: never split a summed var (no partial outputs), the icml18 baseline. */
  bool reduction_splits = true;
};

/** The tofu plan of `g` over `devices` devices. The result passes validate_plan and only uses splits codegen
 *  lowers (strategies.h codegen_supports). Throws UserError for factors that do not multiply to `devices`. */
Plan tofu_plan(const Graph &g, int devices, const TofuOptions &options = {});

/** Op groups of Tofu's coarsening, each sorted by op id, groups ordered by their first op. */
std::vector<std::vector<OpId>> coarsen(const Graph &g);

}  // namespace cleave::plan
