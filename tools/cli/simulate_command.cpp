// `cleave simulate`: a plan's step on the task-graph simulator (planner/cost/simulator.h), next to cost model v1; and the
// search flags the planners share (--seed, flexflow's --iterations and --budget).
#include <cstdio>
#include <iostream>

#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/flexflow.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/cost/simulator.h"
#include "planner/plan/validate.h"
#include "tools/cli/commands.h"

namespace cleave::cli {

void SearchFlags::add_to(CLI::App &app) {
  seed_opt = app.add_option("--seed", seed, "seed of the random and flexflow planners (default 0)");
  iterations_opt = app.add_option("--iterations", iterations,
                                  "flexflow: proposals over all its chains, the knob that fixes its result (default " +
                                      std::to_string(plan::FlexFlowOptions{}.iterations) + ")")
                       ->check(kPositive);
  budget_opt = app.add_option("--budget", budget,
                              "flexflow: wall-clock cap in seconds (default none); reaching it makes the plan depend "
                              "on the machine's speed")
                   ->check(CLI::PositiveNumber);
}

void SearchFlags::check(const std::string &planner) const {
  if (seed_opt && seed_opt->count() && planner != "random" && planner != "flexflow")
    CLEAVE_USER_ERROR("--seed applies to --planner random or flexflow only");
  for (CLI::Option *o : {iterations_opt, budget_opt})
    if (o && o->count() && planner != "flexflow") CLEAVE_USER_ERROR(o->get_name(), " applies to --planner flexflow only");
}

plan::Plan make_plan_with(const Graph &g, const std::string &planner, int devices, const plan::Topology *topology,
                          const SearchFlags &flags) {
  if (planner != "flexflow") {
    plan::Plan p = plan::make_plan(g, planner, devices, topology, flags.seed, flags.profile);
    if (planner == "random")
      std::fprintf(stderr, "random plan, seed %llu: %s\n", static_cast<unsigned long long>(flags.seed),
                   plan::plan_summary(g, p).c_str());
    return p;
  }
  if (topology && devices > topology->devices())
    CLEAVE_USER_ERROR(devices, " devices, but topology ", topology->name, " has ", topology->devices());
  plan::FlexFlowOptions o;
  o.topology = topology;
  o.seed = flags.seed;
  o.iterations = flags.iterations;
  o.budget_seconds = flags.budget;
  o.profile = flags.profile;
  plan::FlexFlowResult r = plan::flexflow_search(g, devices, o);
  std::string chains;
  char buf[160];
  for (const auto &c : r.chains) {
    std::snprintf(buf, sizeof buf, "%s%s %.6e -> %.6e", chains.empty() ? "" : ", ", c.start.c_str(), c.start_seconds,
                  c.best_seconds);
    chains += buf;
  }
  std::fprintf(stderr, "flexflow: %lld iterations, %lld accepted%s; simulated step %.6e s; chains (start -> best): %s\n",
               static_cast<long long>(r.iterations), static_cast<long long>(r.accepted),
               r.hit_budget ? ", stopped by --budget (machine-dependent result)" : "", r.simulated_seconds,
               chains.c_str());
  return r.plan;
}

namespace {

struct SimulateArgs {
  std::string model;
  std::optional<int64_t> batch;
  std::string topology = "k80x8";
  std::string timeline, svg;
  std::string profile;
  TrainFlags train_flags;
};

}  // namespace

Command add_simulate_command(CLI::App &app) {
  auto args = std::make_shared<SimulateArgs>();
  auto src = std::make_shared<PlanSource>();
  app.footer(
      "Simulate one training step of a plan as a task graph (planner/cost/simulator.h): per device its kernels, and the "
      "collectives and transfers codegen derives, each channel (compute, send, receive) running its tasks in program "
      "order, compute overlapping communication where the data allow; copies and data reads run on the compute channel. Prints the predicted step time (the makespan) "
      "next to cost model v1's (compute plus communication summed per device, as `cleave explain` prints it), and per "
      "device its busy seconds; --timeline writes every task (start, end, where, name), --svg draws them.");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  add_plan_source_options(app, *src);
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")->check(kPositive);
  add_topology_option(app, args->topology);
  app.add_option("--timeline", args->timeline, "write the timeline as text here (one task per line)");
  app.add_option("--svg", args->svg, "write the timeline as SVG here (rows per device: compute, send, receive)");
  add_profile_option(app, args->profile);
  args->train_flags.add_to(app);
  return [args, src] {
    std::optional<plan::Profile> profile;
    if (!args->profile.empty()) profile = plan::load_profile(args->profile);
    const plan::Profile *prof = profile ? &*profile : nullptr;
    plan::Topology topo = plan::load_topology(args->topology);
    if (!args->timeline.empty()) check_output_file("--timeline", args->timeline);
    if (!args->svg.empty()) check_output_file("--svg", args->svg);
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::shapes_only);
    verify(g);
    src->topology = &topo;
    src->search.profile = prof;
    plan::Plan p = src->make(g);
    if (p.devices > topo.devices())
      CLEAVE_USER_ERROR("the plan uses ", p.devices, " devices, topology ", topo.name, " has ", topo.devices());
    plan::Simulator sim(g, p, topo, prof);
    plan::CostReport v1 = plan::estimate_cost(g, p, topo, prof);
    std::string text = plan::timeline_text(g, sim);
    std::string svg = args->svg.empty() ? "" : plan::timeline_svg(g, sim);
    if (!args->timeline.empty()) write_file_atomically("--timeline", args->timeline, text);
    if (!args->svg.empty()) write_file_atomically("--svg", args->svg, svg);
    std::printf("# %d device%s on %s\n", p.devices, p.devices == 1 ? "" : "s", topo.name.c_str());
    std::printf("simulated_step_seconds %.6e\n", sim.makespan());
    std::printf("cost_model_v1_step_seconds %.6e\n", v1.predicted_step_seconds);
    std::printf("device compute_busy_s comm_busy_s local_busy_s\n");
    std::vector<plan::DeviceBusy> busy = sim.busy();
    for (size_t d = 0; d < busy.size(); ++d)
      std::printf("%zu %.6e %.6e %.6e\n", d, busy[d].compute_seconds, busy[d].comm_seconds, busy[d].local_seconds);
    return 0;
  };
}

}  // namespace cleave::cli
