// `cleave oracle`: ParaDL's comparison of parallel strategies over device counts (planner/search/oracle.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/verifier.h"
#include "planner/search/make_plan.h"
#include "planner/search/oracle.h"
#include "planner/plan/topology.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

struct OracleArgs {
  std::string model;
  std::optional<int64_t> batch;
  std::string devices = "1..8";
  std::string topology = "k80x8";
  std::string strategies = "all";
  std::string planners = "data,tofu,owt,icml18";
  std::string format = "text";
  std::string plans_dir;
  TrainFlags train_flags;
};

std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}


std::vector<plan::OracleStrategy> parse_strategies(const std::string &s) {
  if (s == "all") return plan::oracle_strategies();
  std::vector<plan::OracleStrategy> out;
  for (const std::string &name : split_list(s)) {
    bool known = false;
    for (plan::OracleStrategy k : plan::oracle_strategies())
      if (plan::oracle_strategy_name(k) == name) {
        out.push_back(k);
        known = true;
      }
    if (!known)
      CLEAVE_USER_ERROR("--strategies: unknown strategy \"", name,
                        "\" (data, spatial, filter, channel, pipeline, data+filter, data+spatial or all)");
  }
  if (out.empty()) CLEAVE_USER_ERROR("--strategies: no strategy in \"", s, "\"");
  return out;
}

std::string json_rows(const std::vector<plan::OracleRow> &rows) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  auto sci = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3e", v);
    return std::string(buf);
  };
  for (const plan::OracleRow &r : rows) {
    nlohmann::ordered_json row{{"devices", r.devices}, {"strategy", r.strategy}, {"mesh", r.mesh},
                               {"applicable", r.applicable}};
    if (r.applicable) {
      row["fallback_ops"] = r.fallback_ops;
      row["compute_seconds"] = sci(r.compute_seconds);
      row["comm_seconds"] = sci(r.comm_seconds);
      row["v1_step_seconds"] = sci(r.v1_step_seconds);
      row["sim_step_seconds"] = sci(r.step_seconds);
      row["comm_bytes"] = r.comm_bytes;
      row["peak_memory_bytes"] = r.peak_memory_bytes;
    }
    if (!r.note.empty()) row["note"] = r.note;
    j.push_back(row);
  }
  return j.dump(1) + "\n";
}

}  // namespace

Command add_oracle_command(CLI::App &app) {
  auto args = std::make_shared<OracleArgs>();
  app.footer(
      "ParaDL's oracle: the data, spatial, filter, channel, pipeline, data+filter and data+spatial strategies written "
      "as plans and priced by the cost model (cleave explain) at each device count, next to the fastest plan of the "
      "search planners (--planners). Columns: the slowest device's compute and communication seconds, the predicted "
      "step, bytes sent per step, the largest per-device peak memory; a note when some forward ops could not take the "
      "strategy's split (planner/search/oracle.h).");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")->check(kPositive);
  app.add_option("--devices", args->devices,
                 "device counts: A..B (A, then the powers of two up to B) or a list a,b,c (default 1..8)");
  add_topology_option(app, args->topology);
  app.add_option("--strategies", args->strategies, "comma-separated strategies, or all (default)");
  app.add_option("--planners", args->planners,
                 "search planners for the best-plan row (default data,tofu,owt,icml18; empty: none)");
  app.add_option("--format", args->format, "text | json (default text)")->check(CLI::IsMember({"text", "json"}));
  app.add_option("--plans-dir", args->plans_dir,
                 "also write every priced plan there as <devices>-<strategy>.plan (an existing directory), for "
                 "cleave compile --plan");
  args->train_flags.add_to(app);
  return [args] {
    if (!args->plans_dir.empty() && !std::filesystem::is_directory(args->plans_dir))
      CLEAVE_USER_ERROR("--plans-dir: ", args->plans_dir, " is not a directory");
    std::vector<int> counts = parse_device_counts("--devices", args->devices);
    std::vector<plan::OracleStrategy> strategies = parse_strategies(args->strategies);
    std::vector<std::string> planners = split_list(args->planners);
    plan::Topology topo = plan::load_topology(args->topology);
    if (counts.back() > topo.devices())
      CLEAVE_USER_ERROR("--devices: ", counts.back(), " devices, topology ", topo.name, " has ", topo.devices());
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::shapes_only);
    verify(g);
    for (const std::string &name : planners) {
      if (name == "random" || name == "single")
        CLEAVE_USER_ERROR("--planners: \"", name, "\" is not a search planner");
      // An unknown name fails here, before any search runs.
      try {
        plan::make_plan(g, name, 1, &topo);
      } catch (const UserError &e) {
        CLEAVE_USER_ERROR("--planners: ", e.what());
      }
    }
    std::vector<plan::OracleRow> rows = plan::run_oracle(g, counts, strategies, planners, topo);
    if (!args->plans_dir.empty())
      for (const plan::OracleRow &r : rows) {
        if (!r.applicable) continue;
        std::string name = r.strategy.rfind("best:", 0) == 0 ? "best-" + r.strategy.substr(5) : r.strategy;
        std::filesystem::path path =
            std::filesystem::path(args->plans_dir) / (std::to_string(r.devices) + "-" + name + ".plan");
        write_file_atomically("--plans-dir", path.string(), plan::print_plan(r.plan));
      }
    std::cout << (args->format == "json" ? json_rows(rows) : plan::oracle_table(rows));
    return 0;
  };
}

}  // namespace cleave::cli
