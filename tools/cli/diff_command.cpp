// `cleave diff A.plan B.plan --model M`: the plans' differences and the cost model's totals before and after
// (planner/plan/plan_diff.h); --fail-on makes it a CI gate.
#include <cstdio>
#include <iostream>

#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/cost_diff.h"
#include "planner/plan/validate.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

struct DiffArgs {
  std::string a, b, model, topology = "k80x8", fail_on;
  std::optional<int64_t> batch;
  TrainFlags train_flags;
};

}  // namespace

Command add_diff_command(CLI::App &app) {
  auto args = std::make_shared<DiffArgs>();
  app.footer(
      "Print one line per tensor and op whose sharding or config differs between plan A and plan B (`+`/`-` for "
      "entries only in B/A), then the cost model's totals for both (comm_bytes, peak_memory_bytes, "
      "predicted_step_seconds) with their deltas. --fail-on comm=+5%,memory=+0%,time=+5% exits 1 when B's growth "
      "over A exceeds a limit, naming each one exceeded on stderr.");
  app.add_option("a", args->a, "the old plan file")->required();
  app.add_option("b", args->b, "the new plan file")->required();
  app.add_option("--model", args->model, "the model both plans are for (.onnx, or IR text)")->required();
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")
      ->check(kPositive);
  add_topology_option(app, args->topology);
  app.add_option("--fail-on", args->fail_on, "limits on growth, e.g. comm=+5%,memory=+0%,time=+5%");
  args->train_flags.add_to(app);
  return [args] {
    std::vector<plan::Threshold> limits;
    if (!args->fail_on.empty()) limits = plan::parse_thresholds(args->fail_on);
    plan::Topology topo = plan::load_topology(args->topology);
    plan::Plan a = read_plan_file(args->a), b = read_plan_file(args->b);
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::shapes_only);
    verify(g);
    plan::validate_plan(g, a);
    plan::validate_plan(g, b);
    std::vector<std::string> changes = plan::plan_changes(a, b);
    for (const std::string &line : changes) std::cout << line << "\n";
    std::cout << changes.size() << " change" << (changes.size() == 1 ? "" : "s") << "\n";
    plan::CostReport ca = plan::estimate_cost(g, a, topo), cb = plan::estimate_cost(g, b, topo);
    std::cout << plan::totals_diff(ca, cb);
    std::vector<std::string> failed = plan::threshold_failures(ca, cb, limits);
    std::cout.flush();
    if (failed.empty()) return 0;
    std::string msg;
    for (const std::string &f : failed) msg += (msg.empty() ? "" : "; ") + f;
    std::fprintf(stderr, "error: --fail-on: %s\n", msg.c_str());
    return 1;
  };
}

}  // namespace cleave::cli
