// `cleave explain`: the cost model's view of a plan (planner/cost/cost_model.h): a per-op table and the totals.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/lower.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/make_plan.h"
#include "planner/plan/validate.h"
#include "tools/cli/commands.h"

namespace cleave::cli {

plan::Plan read_plan_file(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) CLEAVE_USER_ERROR(path, ": is a directory, not a plan file");
  std::ifstream f(path);
  if (!f) CLEAVE_USER_ERROR(path, ": cannot open plan file");
  std::stringstream ss;
  ss << f.rdbuf();
  return plan::parse_plan(ss.str(), path);
}

plan::Plan read_plan_for(const Graph &g, const std::string &path, int devices) {
  plan::Plan p = read_plan_file(path);
  if (p.devices != devices && devices != 1)
    CLEAVE_USER_ERROR(path, ": the plan is for ", p.devices, " devices, --devices says ", devices);
  // Produced tensors' lines may be left out of a hand-written plan: their producers' configs imply them.
  plan::complete_plan(g, p);
  plan::validate_plan(g, p);
  return p;
}

namespace {

struct ExplainArgs {
  std::string model;
  std::string plan_file;
  std::string planner;
  int devices = 1;
  std::optional<int64_t> batch;
  std::string topology = "k80x8";
  std::string format = "text";
  std::string profile;
  TrainFlags train_flags;
};

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

std::string config_str(const plan::ParallelConfig &c) {
  std::string s = "[";
  for (size_t i = 0; i < c.mesh.size(); ++i) s += (i ? "," : "") + std::to_string(c.mesh[i]);
  s += "] ";
  for (size_t i = 0; i < c.vars.size(); ++i) s += (i ? "," : "") + (c.vars[i].empty() ? std::string("-") : c.vars[i]);
  if (!c.devices.empty() && c.devices.front() != 0) s += " @" + std::to_string(c.devices.front());
  return s;
}

std::string text_report(const Graph &g, const plan::Plan &p, const plan::CostReport &r, const std::string &profile) {
  std::string s;
  char buf[1024];
  if (profile.empty())
    std::snprintf(buf, sizeof buf,
                  "# %d device%s on %s; seconds: roofline compute + alpha-beta communication + copies and data reads "
                  "by bytes, no overlap\n", p.devices,
                  p.devices == 1 ? "" : "s", r.topology.c_str());
  else
    std::snprintf(buf, sizeof buf,
                  "# %d device%s on %s; seconds: compute measured for %lld of %lld op shares (the rest roofline, "
                  "%lld of them scaled by their op's measured / roofline ratio) + "
                  "communication measured for %lld of %lld events (the rest alpha-beta) + copies and data reads "
                  "measured for %lld of %lld (the rest by bytes) from profile %s + its statement gap per statement, no "
                  "overlap\n",
                  p.devices, p.devices == 1 ? "" : "s", r.topology.c_str(), static_cast<long long>(r.measured_shares),
                  static_cast<long long>(r.measured_shares + r.roofline_shares),
                  static_cast<long long>(r.calibrated_shares), static_cast<long long>(r.measured_comm),
                  static_cast<long long>(r.measured_comm + r.modelled_comm), static_cast<long long>(r.measured_local),
                  static_cast<long long>(r.measured_local + r.modelled_local), profile.c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "%-48s %-14s %16s %10s %14s %10s\n", "op", "config", "flops", "compute_s",
                "comm_bytes", "comm_s");
  s += buf;
  std::map<std::string, const plan::ParallelConfig *> configs;
  for (const auto &o : p.ops) configs[o.name] = &o.config;
  for (const plan::OpCost &oc : r.ops) {
    std::string name = print_name(g.op(oc.op).name);
    std::snprintf(buf, sizeof buf, "%-48s %-14s %16lld %10s %14lld %10s\n", name.c_str(),
                  config_str(*configs.at(g.op(oc.op).name)).c_str(), static_cast<long long>(oc.flops),
                  sci(oc.compute_seconds).c_str(), static_cast<long long>(oc.comm_bytes), sci(oc.comm_seconds).c_str());
    s += buf;
  }
  if (r.end_comm_bytes > 0) {
    std::snprintf(buf, sizeof buf, "%-48s %-14s %16s %10s %14lld %10s\n", "(end of step)", "", "", "",
                  static_cast<long long>(r.end_comm_bytes), sci(r.end_comm_seconds).c_str());
    s += buf;
  }
  s += "\ndevice   flops            compute_s  comm_s     copy_s     data_s     comm_bytes     peak_memory_bytes  step_s\n";
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const plan::DeviceCost &c = r.devices[d];
    std::snprintf(buf, sizeof buf, "%-8zu %-16lld %-10s %-10s %-10s %-10s %-14lld %-18lld %s\n", d,
                  static_cast<long long>(c.flops), sci(c.compute_seconds).c_str(), sci(c.comm_seconds).c_str(),
                  sci(c.copy_seconds).c_str(), sci(c.data_seconds).c_str(), static_cast<long long>(c.comm_bytes),
                  static_cast<long long>(c.peak_memory_bytes), sci(c.step_seconds).c_str());
    s += buf;
  }
  s += "\nflops " + std::to_string(r.flops) + "\n";
  s += "comm_bytes " + std::to_string(r.comm_bytes) + "\n";
  for (size_t l = 0; l < r.level_names.size(); ++l)
    s += "comm_bytes." + r.level_names[l] + " " + std::to_string(r.comm_bytes_per_level[l]) + "\n";
  s += "peak_memory_bytes";
  for (const auto &d : r.devices) s += " " + std::to_string(d.peak_memory_bytes);
  s += "\npredicted_step_seconds " + sci(r.predicted_step_seconds) + "\n";
  return s;
}

std::string json_report(const Graph &g, const plan::Plan &p, const plan::CostReport &r, const std::string &profile) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["topology"] = r.topology;
  j["devices"] = p.devices;
  j["ops"] = ordered_json::array();
  std::map<std::string, const plan::ParallelConfig *> configs;
  for (const auto &o : p.ops) configs[o.name] = &o.config;
  for (const plan::OpCost &oc : r.ops)
    j["ops"].push_back({{"op", g.op(oc.op).name},
                        {"config", config_str(*configs.at(g.op(oc.op).name))},
                        {"flops", oc.flops},
                        {"compute_seconds", sci(oc.compute_seconds)},
                        {"comm_bytes", oc.comm_bytes},
                        {"comm_seconds", sci(oc.comm_seconds)}});
  j["end_comm_bytes"] = r.end_comm_bytes;
  j["per_device"] = ordered_json::array();
  for (const auto &d : r.devices) {
    ordered_json levels;
    for (size_t l = 0; l < r.level_names.size(); ++l) levels[r.level_names[l]] = d.comm_bytes_per_level[l];
    j["per_device"].push_back({{"flops", d.flops},
                               {"compute_seconds", sci(d.compute_seconds)},
                               {"comm_seconds", sci(d.comm_seconds)},
                               {"copy_seconds", sci(d.copy_seconds)},
                               {"data_seconds", sci(d.data_seconds)},
                               {"statements", d.statements},
                               {"gap_seconds", sci(d.gap_seconds)},
                               {"comm_bytes", d.comm_bytes},
                               {"comm_bytes_per_level", levels},
                               {"persistent_bytes", d.persistent_bytes},
                               {"peak_memory_bytes", d.peak_memory_bytes},
                               {"step_seconds", sci(d.step_seconds)}});
  }
  j["flops"] = r.flops;
  j["comm_bytes"] = r.comm_bytes;
  ordered_json levels;
  for (size_t l = 0; l < r.level_names.size(); ++l) levels[r.level_names[l]] = r.comm_bytes_per_level[l];
  j["comm_bytes_per_level"] = levels;
  ordered_json peaks = ordered_json::array();
  for (const auto &d : r.devices) peaks.push_back(d.peak_memory_bytes);
  j["peak_memory_bytes"] = peaks;
  // Seconds as fixed-format strings, like the table: the same bytes on every machine that computes the same doubles.
  j["predicted_step_seconds"] = sci(r.predicted_step_seconds);
  if (!profile.empty())
    j["profile"] = {{"file", profile},
                    {"measured_op_shares", r.measured_shares},
                    {"roofline_op_shares", r.roofline_shares},
                    {"calibrated_op_shares", r.calibrated_shares},
                    {"measured_comm_events", r.measured_comm},
                    {"modelled_comm_events", r.modelled_comm},
                    {"measured_local_statements", r.measured_local},
                    {"modelled_local_statements", r.modelled_local}};
  return j.dump(1) + "\n";
}

}  // namespace

void add_plan_source_options(CLI::App &app, PlanSource &src) {
  auto *planner =
      add_planner_option(app, src.planner, "(default data)", {"frontier"});
  src.search.add_to(app);
  app.add_option("--plan", src.plan_file, "a plan file (cleave plan -o) instead of a planner")->excludes(planner);
  app.add_option("--devices", src.devices, "number of devices (default 1; a --plan file says its own)")
      ->check(kPositive);
}

plan::Plan PlanSource::make(const Graph &g) const {
  plan::Plan p;
  if (!plan_file.empty()) {
    p = read_plan_for(g, plan_file, devices);
    codegen::lower(g, p, /*need_values=*/false);  // codegen's refusals (e.g. an update not held where its tensor lives) are the plan's
    return p;
  } else {
    search.check(planner.empty() ? "data" : planner);
    if (topology && devices > topology->devices())
      CLEAVE_USER_ERROR("the plan uses ", devices, " devices, topology ", topology->name, " has ", topology->devices());
    p = make_plan_with(g, planner.empty() ? "data" : planner, devices, topology, search);
  }
  plan::validate_plan(g, p);
  return p;
}

void add_profile_option(CLI::App &app, std::string &profile) {
  app.add_option("--profile", profile,
                 "a profile from `cleave profile`: measured op times where it has the op's shard, collective times "
                 "interpolated from its curves (else roofline and alpha-beta)");
}

void add_topology_option(CLI::App &app, std::string &topology) {
  app.add_option("--topology", topology,
                 "machine to cost the plan on: a preset (k80x8, p100-4x4, v100-2x8, h100x8) or a JSON file "
                 "(models/topologies/)" + std::string(topology.empty() ? "" : "; default " + topology));
}

Command add_explain_command(CLI::App &app) {
  auto args = std::make_shared<ExplainArgs>();
  auto src = std::make_shared<PlanSource>();
  app.footer(
      "Print what a plan costs on a topology (planner/cost/cost_model.h): per op its config (mesh and split vars), FLOPs "
      "over its devices, roofline compute seconds and the bytes and alpha-beta seconds of the communication before "
      "it; per device FLOPs, compute, communication, copy and data-read seconds, bytes sent and peak memory; totals comm_bytes (per link level), "
      "peak_memory_bytes per device and predicted_step_seconds (v1: compute and communication do not overlap).");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  add_plan_source_options(app, *src);
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")
      ->check(kPositive);
  add_topology_option(app, args->topology);
  app.add_option("--format", args->format, "text | json (default text)")->check(CLI::IsMember({"text", "json"}));
  add_profile_option(app, args->profile);
  args->train_flags.add_to(app);
  return [args, src] {
    std::optional<plan::Profile> profile;
    if (!args->profile.empty()) profile = plan::load_profile(args->profile);
    plan::Topology topo = plan::load_topology(args->topology);
    Graph g = load_training_graph(args->model, args->batch, args->train_flags, Weights::shapes_only);
    verify(g);
    src->topology = &topo;
    src->search.profile = profile ? &*profile : nullptr;
    plan::Plan p = src->make(g);
    plan::CostReport r = plan::estimate_cost(g, p, topo, profile ? &*profile : nullptr);
    std::cout << (args->format == "json" ? json_report(g, p, r, args->profile) : text_report(g, p, r, args->profile));
    return 0;
  };
}

}  // namespace cleave::cli
