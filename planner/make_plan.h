#pragma once
// The planners (DESIGN §5): `single` puts everything on device 0; `data` is data parallelism over every device,
// splitting each op's batch var on a 1-D mesh; `tofu` searches (planner/tofu.h); `icml18`, `owt`, `allrow`,
// `spartan` and `equalchop` are Tofu's baselines (planner/baselines.h); `random` draws a random legal plan from a
// seed, for differential tests (planner/random_plan.h); `flexflow` searches by MCMC scored by the simulator
// (planner/flexflow.h; make_plan runs it with its default iterations, the seed, and the topology or its default);
// `frontier` is TensorOpt's time/memory frontier, the fastest plan fitting the device memory (planner/frontier.h).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan.h"
#include "planner/profile.h"
#include "planner/topology.h"

namespace cleave::plan {

/** Per tensor, the dim that carries the batch, or -1: dim 0 of every input and label, propagated through the ops in
 *  order (an op's batch var is a var indexing a batch dim of an operand exactly; the output dims it indexes carry the
 *  batch). */
std::vector<int> batch_dims(const Graph &g);

/** The batch var of `op` (whose primary description is `d`) given `batch` = batch_dims(g): the var indexing a batch dim
 *  of an operand exactly (coefficient 1, no offset, no division, not indirect), operands in slot order; -1 if none. */
int batch_var(const Op &op, const describe::Description &d, const std::vector<int> &batch);

/** The planner names make_plan accepts, for messages and --help. */
inline constexpr const char *kPlannerNames =
    "single, data, tofu, icml18, owt, allrow, spartan, equalchop, random, flexflow or frontier";

/** The plan `planner` (one of kPlannerNames) makes for `g` over `devices` devices. `topology` (may be null) is the
 *  machine: tofu and icml18 recurse along its hierarchy (tofu.h); the other planners do not weigh links. `seed` drives
 *  `random` and `flexflow`. `profile` (may be null): the measured times `flexflow` and `frontier` search with. Deterministic. Throws UserError for an unknown planner, a device count below 1 or above the
 *  topology's, or (data) a batch not divisible by the device count. The result passes validate_plan. */
Plan make_plan(const Graph &g, const std::string &planner, int devices, const Topology *topology = nullptr,
               uint64_t seed = 0, const Profile *profile = nullptr);

}  // namespace cleave::plan
