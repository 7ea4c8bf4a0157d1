#pragma once
// The planner registry (DESIGN §5): every planner by name, with what it does, for make_plan, the CLI's --planner
// checks and its --help. `single` and `data` (data_plan.h) search nothing; `tofu` searches (tofu.h); `icml18`, `owt`,
// `allrow`, `spartan` and `equalchop` are Tofu's baselines (baselines.h); `random` draws a random legal plan from a
// seed, for differential tests (random_plan.h); `flexflow` searches by MCMC scored by the simulator (flexflow.h;
// make_plan runs it with its default iterations, the seed, and the topology or its default); `frontier` is TensorOpt's
// time/memory frontier, the fastest plan fitting the device memory (frontier.h).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/cost/profile.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

/** What a planner is given besides the graph and the device count. */
struct PlannerInputs {
  const Topology *topology = nullptr;  // may be null: the planners that weigh links use their default machine
  uint64_t seed = 0;                   // random and flexflow
  const Profile *profile = nullptr;    // may be null: flexflow and frontier search with measured times
};

/** One entry of the registry. */
struct Planner {
  std::string name;
  std::string summary;  // one line, for --help
  Plan (*make)(const Graph &g, int devices, const PlannerInputs &in);
};

/** Every planner, in the order --help lists them. */
const std::vector<Planner> &planners();

/** The names of planners() in order. */
std::vector<std::string> planner_names();

/** Whether `name` is a planner's. */
bool is_planner(const std::string &name);

/** `single | data | ... | frontier`, for --help. */
std::string planner_list(const std::string &separator = " | ");

/** The plan `planner` (a name in planners()) makes for `g` over `devices` devices. `topology` (may be null) is the
 *  machine: tofu and icml18 recurse along its hierarchy (tofu.h); the other planners do not weigh links. `seed` drives
 *  `random` and `flexflow`. `profile` (may be null): the measured times `flexflow` and `frontier` search with.
 *  Deterministic. Throws UserError for an unknown planner, a device count below 1 or above the topology's, or (data) a
 *  batch not divisible by the device count. The result passes validate_plan. */
Plan make_plan(const Graph &g, const std::string &planner, int devices, const Topology *topology = nullptr,
               uint64_t seed = 0, const Profile *profile = nullptr);

}  // namespace cleave::plan
