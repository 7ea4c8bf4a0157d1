// `cleave plan`: the plan of a model's training graph, as canonical text (planner/plan/plan.h).
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/search/strategies.h"
#include "planner/plan/topology.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::optional<int64_t> batch;
  int devices = 1;
  /** --devices as given: N, or A..B for the frontier planner's profile mode. */
  std::string devices_text = "1";
  std::string planner = "data";
  SearchFlags search;
  std::string out;
  std::string check;
  std::string topology;
  std::string profile;
  TrainFlags train_flags;
  FrontierFlags frontier;
};

}  // namespace

Command add_plan_command(CLI::App &app) {
  auto args = std::make_shared<PlanArgs>();
  app.footer(
      "Print the plan of a model's training graph: per tensor its sharding, per op its parallel config "
      "(planner/plan/plan.h documents the format). Planners: single (everything on device 0), data (data "
      "parallelism: the batch split over every device, weight gradients partial, params replicated), tofu (Tofu's "
      "recursive search minimising the bytes moved per step), Tofu's baselines icml18, owt, allrow, spartan, "
      "equalchop (planner/search/baselines.h), and random (a random legal plan drawn from --seed, for differential tests: "
      "planner/search/random_plan.h; it prints a one-line summary of the plan to stderr), flexflow (MCMC over per-op configs "
      "scored by the task-graph simulator on --topology: planner/search/flexflow.h; --iterations fixes its result, --budget "
      "caps its wall time; it prints its search's summary to stderr), and frontier (TensorOpt's time/memory Pareto "
      "set, planner/search/frontier.h: the plan of --mode, the frontier table on stderr or --frontier-table)");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  app.add_option("--devices", args->devices_text, "number of devices (default 1; A..B for --mode profile)")
      ->check(CLI::Validator(
          [](std::string &value) {
            std::string a = value.substr(0, value.find(".."));
            std::string b = value.find("..") == std::string::npos ? a : value.substr(value.find("..") + 2);
            std::string e = kPositive(a);
            return e.empty() ? kPositive(b) : e;
          },
          "POSITIVE"));
  add_planner_option(app, args->planner, "(default data; frontier: TensorOpt's search, see --mode)");
  args->search.add_to(app);
  app.add_option("--batch", args->batch, "fix a symbolic batch dimension")->check(kPositive);
  app.add_option("-o,--output", args->out, "write the plan to this file instead of stdout");
  app.add_option("--check", args->check,
                 "compare the plan with this file instead of printing it: exit 1 if they differ (for CI)");
  add_topology_option(app, args->topology);
  add_profile_option(app, args->profile);
  args->train_flags.add_to(app);
  args->frontier.add_to(app);
  return [args, &app] {
    std::optional<plan::Profile> profile;
    if (!args->profile.empty()) profile = plan::load_profile(args->profile);
    args->search.check(args->planner.empty() ? "data" : args->planner);
    if (args->planner != "frontier")
      for (const char *flag : {"--mode", "--memory-limit", "--frontier-table", "--frontier-svg", "--frontier-baselines"})
        if (app.count(flag)) CLEAVE_USER_ERROR(flag, " applies to --planner frontier only");
    bool range = args->devices_text.find("..") != std::string::npos;
    if (range && args->planner != "frontier")
      CLEAVE_USER_ERROR("--devices: a range ", args->devices_text, " needs --planner frontier --mode profile");
    if (!range) args->devices = std::stoi(args->devices_text);
    if (!args->out.empty()) check_output_file("-o", args->out);
    // A plan needs shapes only: no weight is read, so the model's external data may be huge or absent.
    auto t0 = std::chrono::steady_clock::now();
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::shapes_only);
    verify(g);
    std::optional<plan::Topology> topo;
    if (!args->topology.empty() && !range) {
      // tofu and icml18 recurse along the topology's hierarchy (planner/search/tofu.h); the others only need it to hold
      // every device.
      topo = plan::load_topology(args->topology);
      if (args->devices > topo->devices())
        CLEAVE_USER_ERROR("--devices ", args->devices, ": topology ", topo->name, " has ", topo->devices(), " devices");
    }
    auto t1 = std::chrono::steady_clock::now();
    std::clock_t c1 = std::clock();
    plan::Plan p;
    if (args->planner == "frontier") {
      std::optional<plan::Plan> chosen =
          frontier_plan_command(g, args->devices_text, args->topology, args->frontier, profile ? &*profile : nullptr);
      if (!chosen) return 0;  // profile: its table is the output
      p = std::move(*chosen);
      args->devices = p.devices;
    } else {
      args->search.profile = profile ? &*profile : nullptr;
      p = make_plan_with(g, args->planner, args->devices, topo ? &*topo : nullptr, args->search);
    }
    std::clock_t c2 = std::clock();
    auto t2 = std::chrono::steady_clock::now();
    std::string text = plan::print_plan(p);
    if (profile) {
      // flexflow and frontier searched with the profile's times; every plan chosen is priced with them (for people).
      plan::Topology t = topo ? *topo : plan::preset_topology("k80x8");
      plan::CostReport r = plan::estimate_cost(g, p, t, &*profile);
      std::fprintf(stderr, "predicted on %s with profile %s: step %.3e s (%lld of %lld op shares measured)\n",
                   t.name.c_str(), args->profile.c_str(), r.predicted_step_seconds,
                   static_cast<long long>(r.measured_shares),
                   static_cast<long long>(r.measured_shares + r.roofline_shares));
    }
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    if (!args->check.empty()) {
      std::ifstream f(args->check, std::ios::binary);
      if (!f) CLEAVE_USER_ERROR("--check: cannot open ", args->check);
      std::stringstream ss;
      ss << f.rdbuf();
      std::string want = ss.str();
      if (want == text) return 0;
      // Name the first line that differs, so the CI log says what moved.
      size_t line = 1, i = 0;
      while (i < want.size() && i < text.size() && want[i] == text[i]) line += want[i++] == '\n';
      std::fprintf(stderr, "error: --check: the %s plan differs from %s at line %zu (regenerate it with -o)\n",
                   args->planner.c_str(), args->check.c_str(), line);
      return 1;
    }
    if (args->out.empty()) {
      std::cout << text;
    } else {
      write_file_atomically("-o", args->out, text);
      // Timings are for people (stderr): loading (import, autodiff) apart from the search itself.
      // (CPU time too: on a shared machine it is the steadier measure of the search.)
      std::fprintf(stderr,
                   "wrote the %s plan over %d devices to %s (load %.3f s, plan %.3f s, plan cpu %.3f s, %lld bytes "
                   "moved per step)\n",
                   args->planner.c_str(), args->devices, args->out.c_str(), secs(t0, t1), secs(t1, t2),
                   static_cast<double>(c2 - c1) / CLOCKS_PER_SEC, static_cast<long long>(plan::plan_comm_bytes(g, p)));
    }
    return 0;
  };
}

}  // namespace cleave::cli
