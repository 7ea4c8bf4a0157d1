// Benchmark (on demand, not in CI; tests/bench/frontier_profile.sh builds and runs it): the frontier search's wall
// time with a full profile against without one. A machine's profile of a big model takes hours on 2 cores, so the
// profile is synthetic, shaped like a measured one: every op's shares under the data plan and the single-device plan
// at their roofline seconds times a factor in [1.5, 4) drawn per op (real kernels are that far from peak), and every
// collective over 2..DEVICES ranks at 4 B..64 MiB at 1.3 times its α-β seconds. The profile is written to
// PROFILE_OUT when given. Prints the search's seconds (cost graph, FT, re-scoring) and the fastest plan's predicted
// step each way.
// Usage: frontier_profile MODEL.onnx BATCH DEVICES TOPOLOGY [PROFILE_OUT]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/search/frontier.h"
#include "planner/search/make_plan.h"
#include "planner/cost/profile.h"
#include "planner/plan/topology.h"

namespace cleave::plan {
namespace {

Profile synthetic_profile(const Graph &g, int devices, const Topology &t) {
  Profile p;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> factor(1.5, 4.0);
  std::vector<double> op_factor;
  for (OpId id = 0; id < g.num_ops(); ++id) op_factor.push_back(factor(rng));
  for (const char *planner : {"data", "single"}) {
    Plan plan = make_plan(g, planner, planner == std::string("single") ? 1 : devices, &t);
    for (const OpEntry &e : plan.ops) {
      OpId id = *g.find_op(e.name);
      const Op &op = g.op(id);
      std::vector<describe::Description> descs = describe::describe(g, op);
      std::vector<double> secs = op_compute_seconds(g, op, descs, e.config, t);
      for (size_t i = 0; i < secs.size(); ++i)
        p.compute[e.name][shard_key(op, descs, e.config, static_cast<int64_t>(i))] =
            secs[i] * op_factor[static_cast<size_t>(id)];
    }
  }
  for (int n = 2; n <= devices; ++n) {
    std::vector<int> group(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) group[static_cast<size_t>(i)] = i;
    GroupLink link = group_link(t, group);
    for (double bytes = 4; bytes <= 64.0 * (1 << 20); bytes *= 2) {
      p.collectives["all_reduce"][n].emplace_back(bytes, 1.3 * all_reduce_seconds(bytes, n, link.bandwidth,
                                                                                   link.latency));
      p.collectives["all_gather"][n].emplace_back(bytes, 1.3 * all_gather_seconds(bytes, n, link.bandwidth,
                                                                                   link.latency));
      p.collectives["reduce_scatter"][n].emplace_back(bytes, 1.3 * all_gather_seconds(bytes, n, link.bandwidth,
                                                                                       link.latency));
      p.collectives["all_to_all"][n].emplace_back(bytes, 1.3 * all_to_all_seconds(bytes / n, n, link.bandwidth,
                                                                                   link.latency));
      p.collectives["send_recv"][n].emplace_back(bytes, 1.3 * (link.latency + bytes / link.bandwidth));
    }
  }
  return p;
}

void report(const char *label, const FrontierResult &r) {
  std::printf("%-16s %8.2f %8.2f %8.2f %8.2f %6zu %14.4g\n", label, r.seconds[0], r.seconds[1], r.seconds[2],
              r.seconds[0] + r.seconds[1] + r.seconds[2], r.frontier.size(), r.frontier.front().step_seconds);
}

int run(int argc, char **argv) {
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr, "error: usage: frontier_profile MODEL.onnx BATCH DEVICES TOPOLOGY [PROFILE_OUT]\n");
    return 2;
  }
  ImportOptions opts;
  opts.batch = std::stoll(argv[2]);
  opts.load_data = false;  // shapes only (generate.py --weights none)
  Graph g = import_onnx(argv[1], opts);
  build_training_graph(g, TrainOptions{});
  int devices = std::stoi(argv[3]);
  Topology t = load_topology(argv[4]);
  Profile profile = synthetic_profile(g, devices, t);
  if (argc == 6) std::ofstream(argv[5]) << profile_json(profile);
  std::printf("%-16s %8s %8s %8s %8s %6s %14s\n", "search", "graph_s", "ft_s", "rescore_s", "total_s", "points",
              "fastest_step_s");
  report("roofline", frontier_search(g, devices, t));
  report("full profile", frontier_search(g, devices, t, {}, &profile));
  return 0;
}

}  // namespace
}  // namespace cleave::plan

int main(int argc, char **argv) {
  try {
    return cleave::plan::run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
