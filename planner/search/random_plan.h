#pragma once
// The `random` planner: a random legal plan, for differential testing (tests/codegen/random_plans.py): whatever the
// plan, a partitioned run must train exactly like the 1-device run, so random plans probe codegen and the runtime
// where no search planner goes (device subsets, permuted device orders, 2-D and 3-D meshes, a var split on several
// axes, replicated compute next to split compute).
//
// Per op, independently:
//   - group size: every device with probability 1/2, else a divisor of the device count drawn uniformly;
//   - devices: a uniformly random ordered subset of that size (the op computing the loss always includes device 0,
//     which logs it: codegen/lower.cpp);
//   - mesh: an ordered factorisation of the group size into factors >= 2, drawn uniformly ([1] for one device);
//   - vars: per mesh axis a splittable var of the op's primary description or none, the tuple drawn uniformly among
//     those config_problems and codegen_supports (strategies.h) accept (all-none always is).
// Produced tensors take the sharding their producer implies; a param or optimizer state bound by an assign takes its
// new value's (partial axes replicated), since codegen copies the update shard to shard; graph inputs and labels get
// a random group and mesh with each axis replicate or split(0) (codegen reads data split on the batch dim only);
// other sources a random group and mesh with each axis replicate or split(any dim), where the dim divides evenly.
// Deterministic per seed on every platform (its own generator, no std distributions).
#include <cstdint>
#include <string>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** A random legal plan of `g` over `devices` devices (rules above). Passes validate_plan. */
Plan random_plan(const Graph &g, int devices, uint64_t seed);

/** One op's random legal config, drawn as random_plan draws it (rules above; `with_zero`: the group holds device 0,
 *  as the loss's producer must), from the generator whose state is `rng_state` (advanced). descs = describe(g, op).
 *  For searches that move one op at a time (planner/search/flexflow.h). */
ParallelConfig random_op_config(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                int devices, bool with_zero, uint64_t &rng_state);

/** One line for people describing plan `p` of `g`: how many ops are replicated, how many split an output var, a
 *  reduction var (partial outputs), a synced var; how many run on a device subset, on a permuted device order, on a
 *  mesh of rank 2 or more. */
std::string plan_summary(const Graph &g, const Plan &p);

}  // namespace cleave::plan
