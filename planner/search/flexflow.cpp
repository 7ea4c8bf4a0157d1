// The flexflow planner (flexflow.h): Metropolis-Hastings over per-op configs, scored by delta simulation.
#include "planner/search/flexflow.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/search/data_plan.h"
#include "planner/search/random_plan.h"
#include "planner/cost/simulator.h"
#include "planner/search/strategies.h"
#include "planner/search/tofu.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;

/** How strongly a slower proposal is refused: a 0.01% slower plan is accepted with probability e^-0.5, a 0.1% slower
 *  one with e^-5. On the NMT at 16 devices (tests/bench/flexflow_nmt.sh, 1,000 iterations) 50 (1%: e^-0.5) let the
 *  chains drift away from their starts and never improved on tofu's plan; 5,000 took it from 0.1127 to 0.1067 s. */
constexpr double kBeta = 5000;

/** SplitMix64, as random_plan.cpp: the same draws with every standard library. */
uint64_t next(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double uniform(uint64_t &state) { return static_cast<double>(next(state) >> 11) * 0x1.0p-53; }

class Search {
 public:
  Search(const Graph &g, int devices, const Topology &t, const FlexFlowOptions &o)
      : g_(g), devices_(devices), t_(t), o_(o), start_(std::chrono::steady_clock::now()) {
    std::vector<std::vector<OpId>> readers = g.all_consumers();
    for (OpId op = 0; op < g.num_ops(); ++op) {
      descs_.push_back(describe::describe(g, g.op(op)));
      const Op &x = g.op(op);
      makes_loss_.push_back(g.loss != kNoTensor &&
                            std::find(x.outputs.begin(), x.outputs.end(), g.loss) != x.outputs.end());
      std::vector<OpId> near;
      for (TensorId in : x.inputs)
        if (in != kNoTensor && g.tensor(in).producer != kNoOp) near.push_back(g.tensor(in).producer);
      for (TensorId out : x.outputs)
        if (out != kNoTensor)
          for (OpId c : readers[static_cast<size_t>(out)]) near.push_back(c);
      std::sort(near.begin(), near.end());
      near.erase(std::unique(near.begin(), near.end()), near.end());
      neighbours_.push_back(std::move(near));
    }
    group_of_.assign(static_cast<size_t>(g.num_ops()), 0);
    groups_ = coarsen(g);
    for (size_t i = 0; i < groups_.size(); ++i)
      for (OpId o : groups_[i]) group_of_[static_cast<size_t>(o)] = i;
  }

  FlexFlowResult run() {
    FlexFlowResult r;
    Plan start;
    try {
      start = data_plan(g_, devices_);
    } catch (const UserError &) {
      start = single_plan(g_, devices_);
    }
    // Chains: data parallelism, tofu's plan (FlexFlow §6.2 starts from existing strategies, data parallelism and
    // expert-designed ones, and from random ones), then the random restarts.
    std::vector<Plan> starts{start};
    std::vector<std::string> names{"data"};
    try {
      TofuOptions tofu;
      tofu.topology = &t_;
      starts.push_back(tofu_plan(g_, devices_, tofu));
      names.push_back("tofu");
    } catch (const UserError &) {
      // tofu cannot split this graph over these devices: no such chain.
    }
    for (int c = 0; c < std::max(o_.restarts, 0); ++c) {
      starts.push_back(random_plan(g_, devices_, next_seed(c + 1)));
      names.push_back("random");
    }
    int64_t chains = static_cast<int64_t>(starts.size());
    for (int64_t c = 0; c < chains; ++c) {
      int64_t n = o_.iterations / chains + (c < o_.iterations % chains);
      chain(std::move(starts[static_cast<size_t>(c)]), n, static_cast<int>(c), r);
      // Past the budget a chain only scores its start, so the result is still never slower than data or tofu.
      r.chains.push_back({names[static_cast<size_t>(c)], chain_start_, chain_best_});
    }
    r.plan = best_;
    r.simulated_seconds = best_seconds_;
    validate_plan(g_, r.plan);
    for (const OpEntry &e : r.plan.ops) {
      OpId o = *g_.find_op(e.name);
      CLEAVE_CHECK(codegen_supports(g_, g_.op(o), descs_[o], e.config), "flexflow: op ", e.name,
                   " got a config codegen does not lower");
    }
    return r;
  }

 private:
  uint64_t next_seed(int chain) {
    uint64_t s = o_.seed * 0x100000001b3ULL + static_cast<uint64_t>(chain);
    return next(s);
  }

  bool out_of_time() const {
    return o_.budget_seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >= o_.budget_seconds;
  }

  bool legal(OpId o, const ParallelConfig &c) const {
    const Op &op = g_.op(o);
    bool zero_ok = !makes_loss_[static_cast<size_t>(o)] ||
                   std::find(c.devices.begin(), c.devices.end(), 0) != c.devices.end();
    return zero_ok && config_problems(g_, op, descs_[o], c, devices_).empty() && codegen_supports(g_, op, descs_[o], c);
  }

  /** A proposed config for op `o` (flexflow.h: a random one, or a neighbour's when legal for `o`). */
  ParallelConfig propose(OpId o, uint64_t &rng) {
    const Op &op = g_.op(o);
    const auto &near = neighbours_[static_cast<size_t>(o)];
    if (!near.empty() && next(rng) % 2 == 0) {
      const ParallelConfig &c = sim_->plan().ops[static_cast<size_t>(near[next(rng) % near.size()])].config;
      if (legal(o, c)) return c;
    }
    return random_op_config(g_, op, descs_[o], devices_, makes_loss_[static_cast<size_t>(o)], rng);
  }

  void chain(Plan p, int64_t iterations, int index, FlexFlowResult &r) {
    // Plan ops are in IR id order (make_plan and random_plan emit them so): entry o is op o.
    for (OpId o = 0; o < g_.num_ops(); ++o)
      CLEAVE_CHECK(p.ops[static_cast<size_t>(o)].name == g_.op(o).name, "flexflow: plan ops out of IR order");
    sim_.emplace(g_, std::move(p), t_, descs_, o_.profile);
    double cur = sim_->makespan();
    if (index == 0) r.start_seconds = cur;
    chain_start_ = chain_best_ = cur;
    consider(cur);
    uint64_t rng = next_seed(1000 + index);
    for (int64_t i = 0; i < iterations; ++i) {
      if (out_of_time()) {
        r.hit_budget = true;
        return;
      }
      ++r.iterations;
      OpId o = static_cast<OpId>(next(rng) % static_cast<uint64_t>(g_.num_ops()));
      ParallelConfig c = propose(o, rng);
      // Half the proposals move the op's coarsening group (tofu.h coarsen: its backward ops, its copies in the other
      // timesteps of an unrolled RNN, ...): every member for which the config is legal takes it too.
      std::vector<std::pair<OpId, ParallelConfig>> moves;
      bool group = next(rng) % 2 == 0;
      for (OpId m : group ? groups_[group_of_[static_cast<size_t>(o)]] : std::vector<OpId>{o})
        if ((m == o || legal(m, c)) && sim_->plan().ops[static_cast<size_t>(m)].config != c) moves.push_back({m, c});
      if (moves.empty()) continue;
      sim_->set_configs(moves);
      double now = sim_->makespan();
      if (now <= cur || uniform(rng) < std::exp(-kBeta * (now / cur - 1))) {
        cur = now;
        ++r.accepted;
        chain_best_ = std::min(chain_best_, cur);
        consider(cur);
      } else {
        sim_->undo();
      }
    }
  }

  void consider(double seconds) {
    if (have_best_ && !(seconds < best_seconds_)) return;
    have_best_ = true;
    best_seconds_ = seconds;
    best_ = sim_->plan();
  }

  const Graph &g_;
  int devices_;
  const Topology &t_;
  const FlexFlowOptions &o_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::vector<Description>> descs_;
  std::vector<bool> makes_loss_;
  std::vector<std::vector<OpId>> neighbours_;
  std::vector<std::vector<OpId>> groups_;
  std::vector<size_t> group_of_;
  std::optional<Simulator> sim_;
  double chain_start_ = 0, chain_best_ = 0;
  bool have_best_ = false;
  double best_seconds_ = 0;
  Plan best_;
};

}  // namespace

FlexFlowResult flexflow_search(const Graph &g, int devices, const FlexFlowOptions &options) {
  if (devices < 1) CLEAVE_USER_ERROR("device count ", devices, " must be at least 1");
  Topology t;
  if (options.topology) {
    t = *options.topology;
  } else {
    for (const char *name : {"k80x8", "p100-4x4"}) {
      t = preset_topology(name);
      if (devices <= t.devices()) break;
    }
  }
  if (devices > t.devices())
    CLEAVE_USER_ERROR("flexflow planner: ", devices, " devices, but topology ", t.name, " has ", t.devices(),
                      " (give a --topology that holds them)");
  return Search(g, devices, t, options).run();
}

}  // namespace cleave::plan
