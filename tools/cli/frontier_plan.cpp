// `cleave plan --planner frontier`: modes, the frontier table and plot (planner/search/frontier.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/file_io.h"
#include "planner/cost/cost_model.h"
#include "planner/search/frontier.h"
#include "planner/search/make_plan.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

double best_time(const plan::FrontierResult &r, int64_t limit) {
  for (const plan::FrontierPlan &f : r.frontier)
    if (f.peak_memory_bytes <= limit) return f.step_seconds;
  return -1;
}

}  // namespace

void FrontierFlags::add_to(CLI::App &app) {
  app.add_option("--mode", mode,
                 "frontier planner: mini-time (the fastest plan fitting --memory-limit; default), mini-parallelism "
                 "(the fewest devices within 5% of the best time), profile (best time per device count of --devices "
                 "A..B: powers of two and the ends)");
  app.add_option("--memory-limit", memory_limit,
                 "frontier planner: per-device bytes a plan may use (default: the topology's device memory)");
  app.add_option("--frontier-table", table, "frontier planner: write the Pareto set as a table to this file");
  app.add_option("--frontier-svg", svg, "frontier planner: write a time/memory plot of the Pareto set to this file");
  app.add_option("--frontier-baselines", baselines,
                 "frontier planner: comma-separated planners whose (time, memory) points go in the table and plot");
}

std::optional<plan::Plan> frontier_plan_command(const Graph &g, const std::string &devices, const std::string &topology,
                                                const FrontierFlags &flags, const plan::Profile *profile) {
  if (flags.mode != "mini-time" && flags.mode != "mini-parallelism" && flags.mode != "profile")
    CLEAVE_USER_ERROR("--mode: \"", flags.mode, "\" is not mini-time, mini-parallelism or profile");
  std::vector<int> range = parse_device_counts("--devices", devices);
  int hi = range.back();
  if (range.size() > 1 && flags.mode != "profile") CLEAVE_USER_ERROR("--devices: a range ", devices, " needs --mode profile");
  if (flags.memory_limit && *flags.memory_limit < 1)
    CLEAVE_USER_ERROR("--memory-limit: must be a positive byte count, got ", *flags.memory_limit);
  if (flags.memory_limit && flags.mode == "profile") CLEAVE_USER_ERROR("--memory-limit: not used by --mode profile");
  std::vector<std::string> baselines;
  for (std::stringstream ss(flags.baselines); ss.good();) {
    std::string b;
    std::getline(ss, b, ',');
    if (b.empty()) continue;
    if (b == "frontier" || b == "random" || !plan::is_planner(b))
      CLEAVE_USER_ERROR("--frontier-baselines: unknown planner \"", b, "\"");
    baselines.push_back(b);
  }
  plan::Topology topo;
  if (!topology.empty()) {
    topo = plan::load_topology(topology);
  } else {
    const char *name = hi <= 8 ? "k80x8" : "p100-4x4";
    topo = plan::preset_topology(name);
  }
  if (hi > topo.devices())
    CLEAVE_USER_ERROR("--devices ", devices, ": topology ", topo.name, " has ", topo.devices(), " devices");
  if (!flags.table.empty()) check_output_file("--frontier-table", flags.table);
  if (!flags.svg.empty()) check_output_file("--frontier-svg", flags.svg);
  int64_t limit = flags.memory_limit.value_or(topo.device.memory_bytes);
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };

  if (flags.mode == "profile") {
    std::ostringstream out;
    out << "# frontier profile topology=" << topo.name << "\n# devices best_step_seconds peak_memory_bytes points\n";
    for (int n : range) {
      auto t0 = std::chrono::steady_clock::now();
      plan::FrontierResult r = plan::frontier_search(g, n, topo, {}, profile);
      const plan::FrontierPlan &f = r.frontier.front();
      char line[160];
      std::snprintf(line, sizeof line, "%d %.6e %lld %zu\n", n, f.step_seconds,
                    static_cast<long long>(f.peak_memory_bytes), r.frontier.size());
      out << line;
      std::fprintf(stderr, "frontier over %d devices: %zu points, search %.2f s\n", n, r.frontier.size(),
                   secs(t0, std::chrono::steady_clock::now()));
    }
    if (!flags.table.empty()) write_file_atomically("--frontier-table", flags.table, out.str());
    std::cout << out.str();
    return std::nullopt;
  }

  std::vector<int> counts = flags.mode == "mini-parallelism" ? parse_device_counts("--devices", "1.." + std::to_string(hi)) : std::vector<int>{hi};
  std::vector<plan::FrontierResult> results;
  double best = -1;
  std::string progress;  // for people, printed once a plan is chosen (an error is the only line otherwise)
  for (int n : counts) {
    auto t0 = std::chrono::steady_clock::now();
    results.push_back(plan::frontier_search(g, n, topo, {}, profile));
    double t = best_time(results.back(), limit);
    char line[200];
    const std::array<double, 3> &phase = results.back().seconds;
    std::snprintf(line, sizeof line,
                  "frontier over %d devices on %s: %zu points, search %.2f s (cost graph %.2f, FT %.2f, re-scoring "
                  "%.2f), %s %.6e s\n",
                  n, topo.name.c_str(), results.back().frontier.size(), secs(t0, std::chrono::steady_clock::now()),
                  phase[0], phase[1], phase[2], t >= 0 ? "fastest fitting step" : "none fits; fastest step",
                  t >= 0 ? t : results.back().frontier.front().step_seconds);
    progress += line;
    if (t >= 0 && (best < 0 || t < best)) best = t;
  }
  size_t chosen = results.size() - 1;
  if (flags.mode == "mini-parallelism") {
    if (best < 0) (void)plan::fastest_fitting(results.back(), limit);  // throws, naming --memory-limit
    for (size_t i = 0; i < results.size(); ++i) {
      double t = best_time(results[i], limit);
      if (t >= 0 && t <= 1.05 * best) {
        chosen = i;
        break;
      }
    }
  }
  const plan::FrontierResult &r = results[chosen];
  const plan::FrontierPlan &pick = plan::fastest_fitting(r, limit);
  std::cerr << progress;
  std::vector<plan::LabelledPoint> points;
  std::vector<plan::Plan> plans;
  for (const std::string &b : baselines) {
    plans.push_back(plan::make_plan(g, b, r.devices, &topo, 0, profile));
    plan::CostReport c = plan::estimate_cost(g, plans.back(), topo, profile);
    points.push_back({b, c.predicted_step_seconds, c.peak_memory_bytes});
  }
  std::string table = plan::frontier_table(r, topo.name);
  for (const plan::LabelledPoint &p : points) {
    // below: the baseline dominates a frontier point (a failure of the search); dominated: a frontier point is at
    // least as good in both; beside: neither (the frontier does not reach that far along the other axis).
    bool below = false, dominated = false;
    for (const plan::FrontierPlan &f : r.frontier) {
      below = below || (p.step_seconds <= f.step_seconds && p.peak_memory_bytes <= f.peak_memory_bytes &&
                        (p.step_seconds < f.step_seconds || p.peak_memory_bytes < f.peak_memory_bytes));
      dominated = dominated || (f.step_seconds <= p.step_seconds && f.peak_memory_bytes <= p.peak_memory_bytes);
    }
    char line[200];
    std::snprintf(line, sizeof line, "# baseline %s %.6e %lld %s\n", p.label.c_str(), p.step_seconds,
                  static_cast<long long>(p.peak_memory_bytes),
                  below       ? "dominates-a-frontier-point"
                  : dominated ? "dominated"
                              : "beside");
    table += line;
  }
  if (!baselines.empty()) {
    // The search's own model of each baseline, beside the re-scored points: where a baseline beats the frontier, the
    // model's numbers tell whether the candidates lack it (few ops matched) or the model misprices it.
    std::vector<plan::ModelledPlan> modelled = plan::frontier_model_costs(g, r.devices, topo, plans, profile);
    for (size_t i = 0; i < baselines.size(); ++i) {
      char line[200];
      std::snprintf(line, sizeof line, "# baseline-model %s ft_seconds=%.6e ft_memory_bytes=%lld ops_among_candidates=%d/%d\n",
                    baselines[i].c_str(), modelled[i].model.time, static_cast<long long>(std::llround(modelled[i].model.memory)),
                    modelled[i].ops_matched, g.num_ops());
      table += line;
    }
  }
  char line[200];
  std::snprintf(line, sizeof line, "# chosen %s devices=%d step_seconds=%.6e peak_memory_bytes=%lld limit=%lld\n",
                flags.mode.c_str(), r.devices, pick.step_seconds, static_cast<long long>(pick.peak_memory_bytes),
                static_cast<long long>(limit));
  table += line;
  if (!flags.svg.empty())
    write_file_atomically(
        "--frontier-svg", flags.svg,
        plan::frontier_svg(r, points, "frontier over " + std::to_string(r.devices) + " devices on " + topo.name));
  if (!flags.table.empty())
    write_file_atomically("--frontier-table", flags.table, table);
  else
    std::cerr << table;
  return pick.plan;
}

}  // namespace cleave::cli
