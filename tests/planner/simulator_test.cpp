// The task-graph simulator (planner/cost/simulator.h) and the flexflow planner (planner/search/flexflow.h):
//  - without communication the makespan is cost model v1's sum of kernels, data reads and copies (up to the rounding
//    of adding them in another order), and the kernels' busy seconds are v1's compute seconds to the bit;
//  - the times obey the rules the header states, checked task by task against a naive fixed-point solver written
//    here (every task's start = max of its predecessors' ends, iterated until nothing changes), over dependencies
//    re-derived here from the plan and the derived communication and local statements (data reads, copies);
//  - delta simulation equals full simulation bit for bit on 1,000 random single-op moves (random_plan.h's per-op
//    draw) on the MLP at 4 devices and on the tiny NMT of models/zoo at 2 devices: makespan and every task; so does
//    undoing every fifth move (what flexflow does with a refused proposal); every 25th (MLP) or 100th (NMT) state
//    also obeys the rules above, with durations from derive_communication itself (both simulations assemble theirs
//    from per-tensor pieces, which only re-derive the tensors a move touches);
//  - flexflow: deterministic per seed, valid, only configs codegen lowers, never slower than its data-parallel start,
//    and the step time it reports is what a fresh full simulation of its plan gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/flexflow.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/cost/simulator.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

Graph training_graph(const std::string &path, int64_t batch) {
  ImportOptions opts;
  opts.batch = batch;
  Graph g = import_onnx(path, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

Graph mlp() { return training_graph(std::string(CLEAVE_SOURCE_DIR) + "/models/mlp.onnx", 8); }

/** The tiny NMT of models/zoo (6 timesteps), written by its generator into the build tree once. */
Graph nmt_tiny() {
  std::string path = std::string(CLEAVE_BINARY_DIR) + "/simulator_test_nmt_tiny.onnx";
  if (!std::filesystem::exists(path)) {
    std::string cmd = "/usr/bin/python3 " + std::string(CLEAVE_SOURCE_DIR) +
                      "/models/zoo/generate.py --family nmt --variant tiny --batch 4 -o " + path + " 2>/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  return training_graph(path, 4);
}

// Two devices on one level; round numbers so that every duration is exact in binary.
const char *kTopology = R"({"name": "two", "device": {"name": "d", "memory_bytes": 1073741824, "peak_flops": 1e9,
  "memory_bandwidth": 1e12}, "levels": [{"name": "link", "count": 4, "bandwidth": 1e9, "latency": 1e-6}]})";

void expect_same_tasks(const Simulator &a, const Simulator &b, const std::string &where) {
  ASSERT_EQ(a.makespan(), b.makespan()) << where;
  std::vector<SimTask> x = a.tasks(), y = b.tasks();
  ASSERT_EQ(x.size(), y.size()) << where;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(x[i].kind, y[i].kind) << where << " task " << i;
    ASSERT_EQ(x[i].op, y[i].op) << where << " task " << i;
    ASSERT_EQ(x[i].device, y[i].device) << where << " task " << i;
    ASSERT_EQ(x[i].peer, y[i].peer) << where << " task " << i;
    ASSERT_EQ(x[i].members, y[i].members) << where << " task " << i;
    // Bit for bit: EXPECT_EQ on doubles is exact.
    ASSERT_EQ(x[i].seconds, y[i].seconds) << where << " task " << i;
    ASSERT_EQ(x[i].start, y[i].start) << where << " task " << i;
    ASSERT_EQ(x[i].end, y[i].end) << where << " task " << i;
  }
}

TEST(Simulator, WithoutCommunicationTheMakespanIsCostModelV1) {
  Graph g = mlp();
  Topology t = parse_topology(kTopology, "two");
  Plan p = make_plan(g, "single", 1);
  Simulator sim(g, p, t);
  CostReport v1 = estimate_cost(g, p, t);
  EXPECT_GT(sim.makespan(), 0);
  // One channel runs everything one after another: the makespan is the sum v1 takes, summed in program order here.
  EXPECT_NEAR(sim.makespan(), v1.predicted_step_seconds, 1e-12 * v1.predicted_step_seconds);
  EXPECT_EQ(sim.busy()[0].compute_seconds, v1.devices[0].compute_seconds);
  EXPECT_EQ(sim.busy()[0].comm_seconds, 0);
  EXPECT_GT(v1.devices[0].data_seconds, 0);  // the inputs are read
  EXPECT_EQ(v1.devices[0].copy_seconds, 0);  // the updates write their params in place
  EXPECT_NEAR(sim.busy()[0].local_seconds, v1.devices[0].data_seconds + v1.devices[0].copy_seconds,
              1e-12 * v1.predicted_step_seconds);
}

/** Every task's times by a naive fixed point over dependencies rebuilt here from the simulator.h rules. */
void check_against_fixed_point(const Graph &g, const Simulator &sim, const Topology &t) {
  const Plan &p = sim.plan();
  std::vector<SimTask> tasks = sim.tasks();
  // Durations: the cost model's, recomputed from the plan here.
  Communication comm = derive_communication(g, p);
  std::map<OpId, const ParallelConfig *> config;
  for (OpId o = 0; o < g.num_ops(); ++o) config[o] = &p.ops[static_cast<size_t>(o)].config;
  size_t next_event = 0, i = 0;
  std::vector<std::vector<size_t>> preds(tasks.size());
  std::map<std::pair<OpId, int>, size_t> kernel;  // (op, device) -> task
  auto runs = [&](OpId o, int d) {
    const auto &ds = config[o]->devices;
    return std::find(ds.begin(), ds.end(), d) != ds.end();
  };
  auto wait_producers = [&](size_t k, const std::vector<TensorId> &ts, int d) {
    for (TensorId x : ts)
      if (x != kNoTensor && g.tensor(x).producer != kNoOp && runs(g.tensor(x).producer, d))
        preds[k].push_back(kernel.at({g.tensor(x).producer, d}));
  };
  // Local statements by segment (data reads with the first op), each segment's packing copies before its unpacking
  // ones; derive_communication lists each segment's in program order per rank.
  std::vector<std::vector<LocalStatement>> local(static_cast<size_t>(g.num_ops()) + 1);
  for (const LocalStatement &l : comm.local)
    local[l.kind == LocalStatement::Kind::data ? 0 : l.op == kNoOp ? local.size() - 1 : static_cast<size_t>(l.op)]
        .push_back(l);
  auto local_task = [&](const LocalStatement &l, SimTask::Kind kind) {
    EXPECT_EQ(tasks[i].kind, kind);
    EXPECT_EQ(tasks[i].device, l.rank);
    EXPECT_EQ(tasks[i].seconds, local_seconds(l, t));
  };
  for (OpId o = 0; o <= g.num_ops(); ++o) {
    bool end = o == g.num_ops();
    std::vector<TensorId> inputs = end ? std::vector<TensorId>{} : g.op(o).inputs;
    std::vector<std::pair<size_t, std::vector<int>>> comm_tasks;  // task, devices taking part
    std::vector<size_t> packs;
    for (const LocalStatement &l : local[static_cast<size_t>(o)])
      if (l.kind == LocalStatement::Kind::data) {
        local_task(l, SimTask::Kind::data);
        ++i;
      }
    for (const LocalStatement &l : local[static_cast<size_t>(o)])
      if (l.kind == LocalStatement::Kind::copy && !l.after) {
        local_task(l, SimTask::Kind::copy);
        wait_producers(i, inputs, l.rank);
        packs.push_back(i++);
      }
    auto wait_packs = [&](size_t k, const std::vector<int> &ds) {
      for (size_t pk : packs)
        if (std::find(ds.begin(), ds.end(), tasks[pk].device) != ds.end()) preds[k].push_back(pk);
    };
    for (; next_event < comm.events.size() && (comm.events[next_event].op == (end ? kNoOp : o)); ++next_event) {
      const CommEvent &e = comm.events[next_event];
      CommSeconds secs = comm_event_seconds(e, t);
      if (e.kind == CommEvent::Kind::send_recv) {
        for (size_t j = 0; j < e.transfers.size(); ++j, ++i) {
          EXPECT_EQ(tasks[i].kind, SimTask::Kind::transfer);
          EXPECT_EQ(tasks[i].seconds, secs.transfers[j]);
          EXPECT_EQ(tasks[i].device, e.transfers[j].src);
          EXPECT_EQ(tasks[i].peer, e.transfers[j].dst);
          wait_producers(i, inputs, e.transfers[j].src);
          wait_packs(i, {e.transfers[j].src, e.transfers[j].dst});
          comm_tasks.push_back({i, {e.transfers[j].src, e.transfers[j].dst}});
        }
      } else {
        EXPECT_EQ(tasks[i].kind, SimTask::Kind::collective);
        EXPECT_EQ(tasks[i].seconds, secs.collective);
        EXPECT_EQ(tasks[i].members, e.group);
        for (int m : e.group) wait_producers(i, e.tensor == kNoTensor ? inputs : std::vector<TensorId>{e.tensor}, m);
        wait_packs(i, e.group);
        comm_tasks.push_back({i, e.group});
        ++i;
      }
    }
    for (const LocalStatement &l : local[static_cast<size_t>(o)])
      if (l.kind == LocalStatement::Kind::copy && l.after) {
        local_task(l, SimTask::Kind::copy);
        for (const auto &[c, ds] : comm_tasks)
          if (std::find(ds.begin(), ds.end(), l.rank) != ds.end()) preds[i].push_back(c);
        ++i;
      }
    if (end) break;
    std::vector<double> secs = op_compute_seconds(g, g.op(o), describe::describe(g, g.op(o)), *config[o], t);
    for (size_t j = 0; j < config[o]->devices.size(); ++j, ++i) {
      int d = config[o]->devices[j];
      EXPECT_EQ(tasks[i].kind, SimTask::Kind::compute);
      EXPECT_EQ(tasks[i].device, d);
      EXPECT_EQ(tasks[i].seconds, secs[j]);
      wait_producers(i, inputs, d);
      for (const auto &[c, ds] : comm_tasks)
        if (std::find(ds.begin(), ds.end(), d) != ds.end()) preds[i].push_back(c);
      kernel[{o, d}] = i;
    }
  }
  ASSERT_EQ(i, tasks.size());
  // Channels: compute per device; send and receive per device (a collective takes both of each member).
  std::map<std::pair<int, int>, std::vector<size_t>> channel;
  for (size_t k = 0; k < tasks.size(); ++k) {
    const SimTask &x = tasks[k];
    if (x.kind == SimTask::Kind::compute || x.kind == SimTask::Kind::copy || x.kind == SimTask::Kind::data)
      channel[{x.device, 0}].push_back(k);
    if (x.kind == SimTask::Kind::transfer) {
      channel[{x.device, 1}].push_back(k);
      channel[{x.peer, 2}].push_back(k);
    }
    if (x.kind == SimTask::Kind::collective)
      for (int m : x.members) {
        channel[{m, 1}].push_back(k);
        channel[{m, 2}].push_back(k);
      }
  }
  for (const auto &[key, ks] : channel)
    for (size_t j = 1; j < ks.size(); ++j) preds[ks[j]].push_back(ks[j - 1]);
  std::vector<double> start(tasks.size(), 0), finish(tasks.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = tasks.size(); k-- > 0;) {  // backwards: many sweeps, nothing relies on program order
      double s = 0;
      for (size_t q : preds[k]) s = std::max(s, finish[q]);
      double f = s + tasks[k].seconds;
      if (s != start[k] || f != finish[k]) changed = true;
      start[k] = s;
      finish[k] = f;
    }
  }
  double makespan = 0;
  for (size_t k = 0; k < tasks.size(); ++k) {
    EXPECT_EQ(tasks[k].start, start[k]) << "task " << k;
    EXPECT_EQ(tasks[k].end, finish[k]) << "task " << k;
    makespan = std::max(makespan, finish[k]);
  }
  EXPECT_EQ(sim.makespan(), makespan);
}

TEST(Simulator, TimesFollowTheRules) {
  Graph g = mlp();
  Topology t = parse_topology(kTopology, "two");
  for (const char *planner : {"data", "tofu"}) {
    SCOPED_TRACE(planner);
    Plan p = make_plan(g, planner, 4);
    Simulator sim(g, p, t);
    check_against_fixed_point(g, sim, t);
    // Data parallelism's gradient all-reduces overlap the backward kernels: faster than v1's per-device sums.
    if (std::string(planner) == "data") {
      EXPECT_LT(sim.makespan(), estimate_cost(g, p, t).predicted_step_seconds);
    }
  }
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE("random seed " + std::to_string(seed));
    check_against_fixed_point(g, Simulator(g, random_plan(g, 4, seed), t), t);
  }
}

// Measured on the cpu backend, a collective holds its members' CPUs: each device's kernels, collectives and local
// statements then run one after another, while with the same times measured on cuda the gradient all-reduces
// overlap the backward kernels.
TEST(Simulator, CpuProfiledCollectivesBlockTheKernels) {
  Graph g = mlp();
  Topology t = parse_topology(kTopology, "two");
  Plan p = make_plan(g, "data", 4);
  Profile cpu;
  cpu.backend = "cpu";
  cpu.collectives["all_reduce"][4] = {{4, 1e-3}, {1 << 20, 2e-3}};  // slow enough to hide kernels under
  Profile cuda = cpu;
  cuda.backend = "cuda";
  Simulator on_cpu(g, p, t, &cpu), on_cuda(g, p, t, &cuda);
  for (int d = 0; d < 4; ++d) {
    DeviceBusy c = on_cpu.busy()[d], u = on_cuda.busy()[d];
    EXPECT_GT(c.comm_seconds, 0);
    EXPECT_GE(on_cpu.makespan(), c.compute_seconds + c.comm_seconds + c.local_seconds - 1e-12) << d;
    EXPECT_LT(on_cuda.makespan(), u.compute_seconds + u.comm_seconds + u.local_seconds) << d;
  }
}

/** `moves` random moves, each checked against a full simulation; every `rules_every`-th also against the rules and
 *  derive_communication (check_against_fixed_point): the full simulation assembles its communication from the same
 *  per-tensor pieces (cost_model.h CommPiece) as the delta one, derive_communication does not. */
int delta_equals_full(const Graph &g, int devices, int moves, uint64_t seed, int rules_every,
                      const Profile *profile = nullptr) {
  Topology t = preset_topology("p100-4x4");
  Simulator delta(g, make_plan(g, "data", devices), t, profile);
  std::vector<std::vector<describe::Description>> descs;
  for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
  uint64_t rng = seed;
  int64_t recomputed = 0, changed = 0;
  int with_issue = 0;  // moves after which some task is a send/recv's issue task
  for (int i = 0; i < moves; ++i) {
    OpId o = static_cast<OpId>((rng = rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % g.num_ops();
    const Op &op = g.op(o);
    bool loss = std::find(op.outputs.begin(), op.outputs.end(), g.loss) != op.outputs.end();
    double before = delta.makespan();
    std::string plan_before = i % 5 == 4 ? print_plan(delta.plan()) : "";
    ParallelConfig c = random_op_config(g, op, descs[static_cast<size_t>(o)], devices, loss, rng);
    if (i % 7 == 6 && o + 1 < g.num_ops()) {  // now and then two ops at once (flexflow's group moves)
      const Op &next = g.op(o + 1);
      bool next_loss = std::find(next.outputs.begin(), next.outputs.end(), g.loss) != next.outputs.end();
      delta.set_configs({{o, c}, {o + 1, random_op_config(g, next, descs[static_cast<size_t>(o) + 1], devices,
                                                          next_loss, rng)}});
    } else {
      delta.set_config(o, c);
    }
    recomputed += delta.last_recomputed();
    changed += delta.makespan() != before;
    Simulator full(g, delta.plan(), t, descs, profile);  // from scratch but for describing the ops
    expect_same_tasks(delta, full, "move " + std::to_string(i) + " (op " + op.name + ")");
    if (::testing::Test::HasFatalFailure()) return with_issue;
    for (const SimTask &k : full.tasks())
      if (k.kind == SimTask::Kind::issue) {
        ++with_issue;
        break;
      }
    if (!profile && i % rules_every == rules_every - 1) {  // the rules are rebuilt without a profile
      SCOPED_TRACE("rules after move " + std::to_string(i));
      check_against_fixed_point(g, delta, t);
      if (::testing::Test::HasFailure()) return with_issue;
    }
    if (i % 5 == 4) {  // every fifth move is taken back (as flexflow refuses a proposal): the state before it returns
      delta.undo();
      expect_same_tasks(delta, Simulator(g, delta.plan(), t, descs, profile), "undo of move " + std::to_string(i));
      EXPECT_EQ(print_plan(delta.plan()), plan_before) << "undo of move " << i;
      if (::testing::Test::HasFatalFailure()) return with_issue;
    }
  }
  // The moves did move the step time, and delta simulation re-timed fewer tasks than a full one would.
  EXPECT_GT(changed, moves / 4);
  std::printf("%d moves: step time changed %lld times; %.1f tasks re-timed per move of %zu\n", moves,
              static_cast<long long>(changed), static_cast<double>(recomputed) / moves, delta.tasks().size());
  return with_issue;
}

TEST(Simulator, DeltaEqualsFullOnMlp) { EXPECT_EQ(delta_equals_full(mlp(), 4, 1000, 7, 25), 0); }

// With a statement_gap every statement's task lasts longer and grouped send/recvs get issue tasks.
TEST(Simulator, DeltaEqualsFullWithAStatementGap) {
  Profile gap;
  gap.statement_gap = 2e-6;
  EXPECT_GT(delta_equals_full(mlp(), 4, 1000, 13, 0, &gap), 100);
}

// 2 devices: the full simulation each move checks against is what takes the time (~7,900 tasks at 4 devices).
TEST(Simulator, DeltaEqualsFullOnZooNmtTiny) { delta_equals_full(nmt_tiny(), 2, 1000, 11, 100); }

TEST(FlexFlow, DeterministicValidAndNoSlowerThanItsStart) {
  Graph g = mlp();
  Topology t = preset_topology("p100-4x4");
  for (int devices : {2, 4}) {
    SCOPED_TRACE(devices);
    FlexFlowOptions o;
    o.topology = &t;
    o.iterations = 300;
    o.seed = 5;
    FlexFlowResult a = flexflow_search(g, devices, o), b = flexflow_search(g, devices, o);
    EXPECT_EQ(print_plan(a.plan), print_plan(b.plan));
    EXPECT_EQ(plan_problems(g, a.plan), std::vector<std::string>{});
    for (const OpEntry &e : a.plan.ops) {
      const Op &op = g.op(*g.find_op(e.name));
      EXPECT_TRUE(codegen_supports(g, op, describe::describe(g, op), e.config)) << e.name;
    }
    EXPECT_EQ(a.iterations, 300);
    EXPECT_FALSE(a.hit_budget);
    EXPECT_EQ(a.simulated_seconds, Simulator(g, a.plan, t).makespan());
    EXPECT_EQ(a.start_seconds, Simulator(g, make_plan(g, "data", devices), t).makespan());
    EXPECT_LE(a.simulated_seconds, a.start_seconds);
    o.seed = 6;
    EXPECT_NE(print_plan(flexflow_search(g, devices, o).plan), "") << "another seed also plans";
  }
}

TEST(FlexFlow, ABudgetStopsTheChainsButEveryStartIsScored) {
  Graph g = mlp();
  Topology t = preset_topology("p100-4x4");
  FlexFlowOptions o;
  o.topology = &t;
  o.iterations = 1000000;
  o.budget_seconds = 1e-9;  // past before the first proposal
  FlexFlowResult r = flexflow_search(g, 4, o);
  EXPECT_TRUE(r.hit_budget);
  EXPECT_EQ(r.iterations, 0);
  ASSERT_EQ(r.chains.size(), 3u);
  EXPECT_EQ(r.chains[0].start, "data");
  EXPECT_EQ(r.chains[1].start, "tofu");
  EXPECT_EQ(r.chains[0].start_seconds, Simulator(g, make_plan(g, "data", 4), t).makespan());
  EXPECT_EQ(r.chains[1].start_seconds, Simulator(g, make_plan(g, "tofu", 4, &t), t).makespan());
  double best = std::min({r.chains[0].start_seconds, r.chains[1].start_seconds, r.chains[2].start_seconds});
  EXPECT_EQ(r.simulated_seconds, best);
  EXPECT_EQ(Simulator(g, r.plan, t).makespan(), best);
}

TEST(FlexFlow, TooManyDevicesForTheTopology) {
  Graph g = mlp();
  Topology t = preset_topology("k80x8");
  FlexFlowOptions o;
  o.topology = &t;
  try {
    flexflow_search(g, 16, o);
    FAIL() << "no error";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()),
              "flexflow planner: 16 devices, but topology k80x8 has 8 (give a --topology that holds them)");
  }
}

}  // namespace
}  // namespace cleave::plan
