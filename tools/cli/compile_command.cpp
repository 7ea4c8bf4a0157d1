// `cleave compile`: a model's training graph and a plan -> a bundle (DESIGN §6) of one program per rank.
#include <cstdio>
#include <filesystem>

#include "codegen/bundle.h"
#include "codegen/lower.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/plan/validate.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

struct CompileArgs {
  std::string model;
  int devices = 1;
  std::string planner;
  SearchFlags search;
  std::string plan_file;
  std::optional<int64_t> batch;
  std::string out;
  std::string topology;
  std::string backend = "cpu";
  std::string profile;
  TrainFlags train_flags;
};

/** The topology the manifest's prediction is made on without --topology: the first of k80x8 (Tofu's machine, the
 *  default of `cleave explain`) and p100-4x4 that holds every rank; none beyond 16 ranks. */
std::optional<plan::Topology> default_topology(int devices) {
  for (const char *name : {"k80x8", "p100-4x4"}) {
    plan::Topology t = plan::preset_topology(name);
    if (devices <= t.devices()) return t;
  }
  return std::nullopt;
}

}  // namespace

Command add_compile_command(CLI::App &app) {
  auto args = std::make_shared<CompileArgs>();
  app.footer("Compile a model's training graph under a plan (--planner, or a plan file with --plan) into a bundle: "
             "plan.txt, src/rank_<r>.cpp (or src/ranks.cpp, one program for ranks that differ only in constants), "
             "CMakeLists.txt, runtime/, weights/, launch/, manifest.json. "
             "Run it with `cleave run DIR`.");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  app.add_option("--devices", args->devices, "number of devices (default 1)")->check(kPositive);
  auto *planner =
      add_planner_option(app, args->planner, "(default data)");
  args->search.add_to(app);
  app.add_option("--plan", args->plan_file, "a plan file (cleave plan -o) instead of a planner")->excludes(planner);
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")
      ->check(kPositive);
  app.add_option("-o,--output", args->out, "the bundle directory to write (replaced if it exists)")->required();
  app.add_option("--backend", args->backend,
                 "cpu | cuda: the backend the bundle builds for by default (manifest.json, CMakeLists, README); "
                 "the rank sources are the same (default cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  add_topology_option(app, args->topology);
  app.get_option("--topology")->description(
      "machine to plan for (tofu, icml18) and to predict the step on (manifest.json): a preset (k80x8, p100-4x4, "
      "v100-2x8, h100x8) or a JSON file (models/topologies/); default k80x8, or p100-4x4 beyond 8 ranks");
  add_profile_option(app, args->profile);
  args->train_flags.add_to(app);
  return [args] {
    std::optional<plan::Profile> profile;
    if (!args->profile.empty()) profile = plan::load_profile(args->profile);
    args->search.check(args->planner.empty() ? "data" : args->planner);
    // A bad topology is reported before anything is read or written; with one, the cost model's prediction for the
    // bundle is printed (stderr) once it is written. The manifest carries the prediction on it, or on a default.
    std::optional<plan::Topology> topo;
    if (!args->topology.empty()) topo = plan::load_topology(args->topology);
    namespace fs = std::filesystem;
    check_output_dir("-o", args->out, "manifest.json");
    // External data is only referenced: a missing or short file is reported in one line naming every file before
    // anything is read or written, and the bundle writer reads the weights one tensor at a time, so compiling a model
    // never holds all of its weights in memory.
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::defer_external);
    verify(g);
    check_external_data(g);
    plan::Plan p;
    if (!args->plan_file.empty()) {
      p = read_plan_for(g, args->plan_file, args->devices);
    } else {
      args->search.profile = profile ? &*profile : nullptr;
      p = make_plan_with(g, args->planner.empty() ? "data" : args->planner, args->devices, topo ? &*topo : nullptr,
                         args->search);
    }
    plan::validate_plan(g, p);
    codegen::Lowered lowered = codegen::lower(g, p);
    if (lowered.precision != "fp64") lowered.precision = args->train_flags.precision;  // fp64: the graph's own dtype
    std::optional<plan::CostReport> predicted;
    const plan::Profile *measured = profile ? &*profile : nullptr;
    if (topo) predicted = plan::estimate_cost(g, p, *topo, measured);
    else if (std::optional<plan::Topology> d = default_topology(p.devices))
      predicted = plan::estimate_cost(g, p, *d, measured);

    write_dir_atomically("-o", args->out, "manifest.json", [&](const std::string &tmp) {
      codegen::write_bundle(g, p, lowered, tmp, fs::absolute(args->model).lexically_normal().string(), args->backend,
                            predicted ? &*predicted : nullptr);
    });
    std::fprintf(stderr, "wrote a %s bundle for %d rank%s to %s\n", args->backend.c_str(), p.devices,
                 p.devices == 1 ? "" : "s", args->out.c_str());
    if (topo) {
      const plan::CostReport &r = *predicted;
      std::fprintf(stderr, "predicted on %s%s%s: step %.3e s, comm %lld bytes, peak memory %lld bytes per device\n",
                   topo->name.c_str(), profile ? " with profile " : "", args->profile.c_str(), r.predicted_step_seconds, static_cast<long long>(r.comm_bytes),
                   static_cast<long long>(r.peak_memory_bytes));
    }
    return 0;
  };
}

}  // namespace cleave::cli
