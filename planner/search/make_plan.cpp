#include "planner/search/make_plan.h"

#include "ir/error.h"
#include "planner/plan/validate.h"
#include "planner/search/baselines.h"
#include "planner/search/data_plan.h"
#include "planner/search/flexflow.h"
#include "planner/search/frontier.h"
#include "planner/search/random_plan.h"
#include "planner/search/tofu.h"

namespace cleave::plan {
namespace {

Plan baseline(const Graph &g, const std::string &name, int devices) { return baseline_plan(g, name, devices); }

}  // namespace

const std::vector<Planner> &planners() {
  static const std::vector<Planner> kPlanners = {
      {"single", "everything on device 0",
       [](const Graph &g, int devices, const PlannerInputs &) { return single_plan(g, devices); }},
      {"data", "data parallelism: every op's batch var split over all devices",
       [](const Graph &g, int devices, const PlannerInputs &) { return data_plan(g, devices); }},
      {"tofu", "Tofu's recursive search minimising communication",
       [](const Graph &g, int devices, const PlannerInputs &in) {
         return tofu_plan(g, devices, TofuOptions{{}, true, in.topology});
       }},
      {"icml18", "Tofu's search without output reductions (ICML'18)",
       [](const Graph &g, int devices, const PlannerInputs &in) {
         return tofu_plan(g, devices, TofuOptions{{}, false, in.topology});
       }},
      {"owt", "one weird trick: data parallel convolutions, model parallel fully connected layers",
       [](const Graph &g, int devices, const PlannerInputs &) { return baseline(g, "owt", devices); }},
      {"allrow", "every tensor split along its first dim",
       [](const Graph &g, int devices, const PlannerInputs &) { return baseline(g, "allrow", devices); }},
      {"spartan", "Spartan's greedy: ops by their largest tensor, each taking its cheapest split",
       [](const Graph &g, int devices, const PlannerInputs &) { return baseline(g, "spartan", devices); }},
      {"equalchop", "every op chops its largest remaining var equally",
       [](const Graph &g, int devices, const PlannerInputs &) { return baseline(g, "equalchop", devices); }},
      {"random", "a random legal plan from --seed (differential tests)",
       [](const Graph &g, int devices, const PlannerInputs &in) { return random_plan(g, devices, in.seed); }},
      {"flexflow", "FlexFlow's MCMC search scored by the simulator",
       [](const Graph &g, int devices, const PlannerInputs &in) {
         FlexFlowOptions o;
         o.topology = in.topology;
         o.seed = in.seed;
         o.profile = in.profile;
         return flexflow_search(g, devices, o).plan;
       }},
      {"frontier", "TensorOpt's time/memory frontier: the fastest plan that fits the device memory",
       [](const Graph &g, int devices, const PlannerInputs &in) {
         return frontier_plan(g, devices, in.topology, in.profile);
       }},
  };
  return kPlanners;
}

std::vector<std::string> planner_names() {
  std::vector<std::string> out;
  for (const Planner &p : planners()) out.push_back(p.name);
  return out;
}

bool is_planner(const std::string &name) {
  for (const Planner &p : planners())
    if (p.name == name) return true;
  return false;
}

std::string planner_list(const std::string &separator) {
  std::string out;
  for (const Planner &p : planners()) out += (out.empty() ? "" : separator) + p.name;
  return out;
}

Plan make_plan(const Graph &g, const std::string &planner, int devices, const Topology *topology, uint64_t seed,
               const Profile *profile) {
  if (devices < 1) CLEAVE_USER_ERROR("device count ", devices, " must be at least 1");
  if (topology && devices > topology->devices())
    CLEAVE_USER_ERROR(devices, " devices, but topology ", topology->name, " has ", topology->devices());
  for (const Planner &p : planners()) {
    if (p.name != planner) continue;
    Plan plan = p.make(g, devices, PlannerInputs{topology, seed, profile});
    validate_plan(g, plan);
    return plan;
  }
  std::string names = planner_list(", ");
  size_t last = names.rfind(", ");
  CLEAVE_USER_ERROR("unknown planner \"", planner, "\" (expected ", names.replace(last, 2, " or "), ")");
}

}  // namespace cleave::plan
