// `cleave plan --planner frontier`: its flags, checked; the modes, the frontier table and plot are the library's
// (planner/search/frontier_modes.h, frontier.h).
#include <cstdio>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/file_io.h"
#include "planner/search/frontier.h"
#include "planner/search/frontier_modes.h"
#include "planner/search/make_plan.h"
#include "tools/cli/commands.h"

namespace cleave::cli {

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
  std::optional<plan::FrontierMode> mode = plan::parse_frontier_mode(flags.mode);
  if (!mode) CLEAVE_USER_ERROR("--mode: \"", flags.mode, "\" is not mini-time, mini-parallelism or profile");
  std::vector<int> range = parse_device_counts("--devices", devices);
  int hi = range.back();
  if (range.size() > 1 && *mode != plan::FrontierMode::profile)
    CLEAVE_USER_ERROR("--devices: a range ", devices, " needs --mode profile");
  if (flags.memory_limit && *flags.memory_limit < 1)
    CLEAVE_USER_ERROR("--memory-limit: must be a positive byte count, got ", *flags.memory_limit);
  if (flags.memory_limit && *mode == plan::FrontierMode::profile)
    CLEAVE_USER_ERROR("--memory-limit: not used by --mode profile");
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

  if (*mode == plan::FrontierMode::profile) {
    std::vector<plan::FrontierProfileRow> rows =
        plan::frontier_profile(g, range, topo, profile, [](const plan::FrontierResult &r, double seconds) {
          std::fprintf(stderr, "frontier over %d devices: %zu points, search %.2f s\n", r.devices, r.frontier.size(),
                       seconds);
        });
    std::string out = plan::frontier_profile_table(rows, topo.name);
    if (!flags.table.empty()) write_file_atomically("--frontier-table", flags.table, out);
    std::cout << out;
    return std::nullopt;
  }

  int64_t limit = flags.memory_limit.value_or(topo.device.memory_bytes);
  std::string progress;  // for people, printed once a plan is chosen (an error is the only line otherwise)
  auto on_search = [&](const plan::FrontierResult &r, double seconds) {
    std::optional<double> t = plan::fastest_fitting_seconds(r, limit);
    char line[200];
    std::snprintf(line, sizeof line,
                  "frontier over %d devices on %s: %zu points, search %.2f s (cost graph %.2f, FT %.2f, re-scoring "
                  "%.2f), %s %.6e s\n",
                  r.devices, topo.name.c_str(), r.frontier.size(), seconds, r.seconds[0], r.seconds[1], r.seconds[2],
                  t ? "fastest fitting step" : "none fits; fastest step", t ? *t : r.frontier.front().step_seconds);
    progress += line;
  };
  plan::FrontierChoice choice = plan::frontier_choose(g, *mode, hi, topo, limit, profile, on_search);
  std::cerr << progress;
  const plan::FrontierResult &r = choice.result();
  std::vector<plan::FrontierBaseline> points = plan::frontier_baselines(g, r, baselines, topo, profile);
  std::string table = plan::frontier_choice_table(choice, points, topo.name, g.num_ops());
  if (!flags.svg.empty()) {
    std::vector<plan::LabelledPoint> others;
    for (const plan::FrontierBaseline &b : points) others.push_back(b.point);
    write_file_atomically(
        "--frontier-svg", flags.svg,
        plan::frontier_svg(r, others, "frontier over " + std::to_string(r.devices) + " devices on " + topo.name));
  }
  if (!flags.table.empty())
    write_file_atomically("--frontier-table", flags.table, table);
  else
    std::cerr << table;
  return choice.pick().plan;
}

}  // namespace cleave::cli
