// The frontier planner's search: FT over the cost graph (frontier_graph.h) seeded by tofu and equalchop, the
// candidates re-scored by estimate_cost, the Pareto set kept (frontier.h).
#include "planner/search/frontier.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/search/baselines.h"
#include "planner/search/frontier_graph.h"
#include "planner/search/tofu.h"

namespace cleave::plan {

FrontierResult frontier_search(const Graph &g, int devices, const Topology &t, const ft::SolveOptions &options,
                               const Profile *profile) {
  if (devices < 1) CLEAVE_USER_ERROR("device count ", devices, " must be at least 1");
  if (devices > t.devices()) CLEAVE_USER_ERROR(devices, " devices, but topology ", t.name, " has ", t.devices());
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  auto t0 = now();
  // Two seeds: the tofu plan (the fast end) and the equalchop baseline (the low-memory end: every op chopped equally
  // over all devices). Their per-op configs join the candidates, so the config space holds both plans (each one
  // assignment of the cost graph), and FT decides what it keeps.
  // Tofu's search runs beside the enumeration of the configs, equalchop's configs joining them, and the pricing of the
  // cost graph's ops until tofu is done (all only read the graph); tofu's configs join last and the ops they change
  // are priced again. Tofu's error comes first, as when it ran first.
  Plan tofu_seed;
  std::optional<Plan> equalchop;
  std::optional<FrontierGraphBuilder> built;
  std::atomic<bool> tofu_done{false};
  side_by_side(
      [&] {
        try {
          tofu_seed = tofu_plan(g, devices, TofuOptions{{}, true, &t});
        } catch (...) {
          tofu_done = true;
          throw;
        }
        tofu_done = true;
      },
      [&] {
        if (devices > 1) equalchop = baseline_plan(g, "equalchop", devices);
        built.emplace(g, devices, t, profile);
        if (equalchop) built->add_seed(*equalchop);
        built->price_ahead(tofu_done);
      });
  std::vector<Plan> seeds{std::move(tofu_seed)};
  if (equalchop) seeds.push_back(std::move(*equalchop));
  FrontierGraphBuilder &b = *built;
  b.add_seed(seeds[0]);
  ft::CostGraph cg = b.cost_graph();
  auto t1 = now();
  FrontierResult r;
  r.devices = devices;
  r.ops = g.num_ops();
  r.edges = static_cast<int>(cg.edges.size());
  r.configs = b.total_configs();
  // Heuristic eliminations follow the tofu seed's configs instead of the least time bound: by time alone they lose
  // the seed's neighbourhood, and the frontier found then lies behind the seed plan (WResNet-50-4 at 16 devices: best
  // 0.204 s against tofu's 0.156 s; following the seed: 0.154 s). A second solve following equalchop (or fixing by
  // least memory) found nothing new on the Transformer: the cost graph's memory is 1.7x equalchop's re-scored peak,
  // so FT prunes its neighbourhood as large.
  ft::SolveOptions guided = options;
  guided.guide = b.match(seeds[0]);
  // The seeds are re-scored candidates whatever FT finds: beside FT (whose error comes first, as when it ran first).
  std::vector<CostReport> seed_costs(seeds.size());
  std::vector<ft::FrontierPoint> points;
  CommCache seed_cache;  // the seeds' configs: most of every candidate's (re-scoring starts from a copy)
  side_by_side([&] { points = ft::solve_frontier(cg, guided, &r.stats); },
               [&] {
                 for (size_t i = 0; i < seeds.size(); ++i)
                   seed_costs[i] = estimate_cost(g, seeds[i], t, profile, &seed_cache);
               });
  // Each seed itself is a candidate, so the frontier is never worse than either seed plan.
  std::vector<ft::FrontierPoint> seeded;
  for (const Plan &p : seeds) {
    std::vector<int> choice = b.match(p);
    CLEAVE_CHECK(std::find(choice.begin(), choice.end(), -1) == choice.end(), "a seed plan's config is no candidate");
    seeded.push_back({ft::assignment_cost(cg, choice), choice});
  }
  // Re-scoring is the costly part: each distinct assignment once, only those the cost graph's model does not
  // dominate, and the seeds.
  std::vector<ft::Cost> model;
  for (const ft::FrontierPoint &p : points) model.push_back(p.cost);
  std::vector<const ft::FrontierPoint *> chosen;
  std::set<std::vector<int>> seen;
  for (const ft::FrontierPoint &p : seeded) seen.insert(p.choice);
  for (size_t i : ft::pareto_keep(model, std::numeric_limits<size_t>::max()))
    if (seen.insert(points[i].choice).second) chosen.push_back(&points[i]);
  // A seed is re-scored as itself: the plan of its configs (b.plan) may hold its sources otherwise.
  std::map<const ft::FrontierPoint *, size_t> seed_of;
  std::set<std::vector<int>> seeds_seen;
  for (size_t i = 0; i < seeded.size(); ++i)
    if (seeds_seen.insert(seeded[i].choice).second) {
      chosen.push_back(&seeded[i]);
      seed_of[&seeded[i]] = i;
    }
  r.candidates = static_cast<int>(chosen.size());
  auto t2 = now();
  std::vector<FrontierPlan> all;
  std::vector<char> scored;
  for (const ft::FrontierPoint *pp : chosen) {
    FrontierPlan f;
    auto seed = seed_of.find(pp);
    f.plan = seed != seed_of.end() ? seeds[seed->second] : b.plan(pp->choice);
    f.model = pp->cost;
    if (seed != seed_of.end()) {
      f.step_seconds = seed_costs[seed->second].predicted_step_seconds;
      f.peak_memory_bytes = seed_costs[seed->second].peak_memory_bytes;
    }
    scored.push_back(seed != seed_of.end());
    all.push_back(std::move(f));
  }
  // estimate_cost reads the graph, plan and topology only: the candidates are scored on as many threads as the
  // machine has (each result goes to its own slot, so the frontier is the same on any number).
  std::atomic<size_t> next{0};
  std::exception_ptr failed;
  std::mutex failed_lock;
  auto score = [&] {
    CommCache cache = seed_cache;  // the candidates share most of their configs, with each other and the seeds
    for (size_t i = next++; i < all.size(); i = next++) {
      if (scored[i]) continue;
      try {
        CostReport c = estimate_cost(g, all[i].plan, t, profile, &cache);
        all[i].step_seconds = c.predicted_step_seconds;
        all[i].peak_memory_bytes = c.peak_memory_bytes;
      } catch (...) {
        std::lock_guard<std::mutex> hold(failed_lock);
        if (!failed) failed = std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers(std::min<size_t>(all.size(), std::max(1u, std::thread::hardware_concurrency())) - 1);
  for (std::thread &w : workers) w = std::thread(score);
  score();
  for (std::thread &w : workers) w.join();
  if (failed) std::rethrow_exception(failed);
  std::vector<ft::Cost> costs;
  for (const FrontierPlan &f : all) costs.push_back({f.step_seconds, static_cast<double>(f.peak_memory_bytes)});
  for (size_t i : ft::pareto_keep(costs, std::numeric_limits<size_t>::max())) r.frontier.push_back(std::move(all[i]));
  r.seconds = {secs(t0, t1), secs(t1, t2), secs(t2, now())};
  return r;
}

ft::CostGraph frontier_cost_graph(const Graph &g, int devices, const Topology &t, const std::vector<Plan> &seeds,
                                  bool price_ahead) {
  FrontierGraphBuilder b(g, devices, t);
  for (size_t i = 0; i + 1 < seeds.size(); ++i) b.add_seed(seeds[i]);
  std::atomic<bool> never{false};
  if (price_ahead) b.price_ahead(never);
  if (!seeds.empty()) b.add_seed(seeds.back());
  return b.cost_graph();
}

std::vector<ModelledPlan> frontier_model_costs(const Graph &g, int devices, const Topology &t,
                                               const std::vector<Plan> &plans, const Profile *profile) {
  FrontierGraphBuilder b(g, devices, t, profile);
  ft::CostGraph cg = b.cost_graph();
  std::vector<ModelledPlan> out;
  for (const Plan &p : plans) {
    std::vector<int> choice = b.match(p);
    ModelledPlan m;
    for (int &c : choice) {
      m.ops_matched += c >= 0;
      c = std::max(c, 0);
    }
    m.model = ft::assignment_cost(cg, choice);
    out.push_back(m);
  }
  return out;
}

const FrontierPlan &fastest_fitting(const FrontierResult &r, int64_t memory_limit) {
  for (const FrontierPlan &f : r.frontier)  // least time first
    if (f.peak_memory_bytes <= memory_limit) return f;
  int64_t least = std::numeric_limits<int64_t>::max();
  for (const FrontierPlan &f : r.frontier) least = std::min(least, f.peak_memory_bytes);
  CLEAVE_USER_ERROR("--memory-limit ", memory_limit, ": no frontier plan over ", r.devices,
                    " devices fits (the smallest peak is ", least, " bytes)");
}

Plan frontier_plan(const Graph &g, int devices, const Topology *t, const Profile *profile) {
  std::optional<Topology> fallback;
  if (!t) {
    for (const char *name : {"k80x8", "p100-4x4"})
      if (!fallback && devices <= preset_topology(name).devices()) fallback = preset_topology(name);
    if (!fallback) CLEAVE_USER_ERROR("the frontier planner over ", devices, " devices needs --topology");
    t = &*fallback;
  }
  FrontierResult r = frontier_search(g, devices, *t, {}, profile);
  return fastest_fitting(r, t->device.memory_bytes).plan;
}

}  // namespace cleave::plan
