// ParaDL's oracle: strategies as plans, priced by the cost model (oracle.h).
#include "planner/search/oracle.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/search/data_plan.h"
#include "planner/search/make_plan.h"
#include "planner/cost/simulator.h"
#include "planner/search/tofu_step.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::Expr;
using describe::ExprPtr;
using describe::VarRole;

/** The feature dim of a tensor of rank `rank` (oracle.h), or -1. */
int feature_dim(size_t rank) {
  if (rank == 2 || rank >= 4) return 1;
  if (rank == 3) return 2;
  return -1;
}

/** The output var of `d` indexing output dim `dim`, or -1. */
int output_var_of_dim(const Description &d, int dim) {
  if (dim < 0 || static_cast<size_t>(dim) >= d.output_index.size()) return -1;
  for (size_t v = 0; v < d.vars.size(); ++v)
    if (d.vars[v].role == VarRole::output && d.output_index[static_cast<size_t>(dim)].coef(static_cast<int>(v)) != 0)
      return static_cast<int>(v);
  return -1;
}

/** Does an access of `e` to input `slot` use var `v` in its index at dim `dim`? */
bool indexes_dim(const ExprPtr &e, int slot, int dim, int v) {
  for (const Expr *a : describe::accesses(e, slot))
    if (static_cast<size_t>(dim) < a->index.size() && a->index[static_cast<size_t>(dim)].affine.coef(v) != 0)
      return true;
  return false;
}

/** The var strategy `s` prefers for forward op `op` (oracle.h): nullopt when the strategy has no preference for it
 *  (its output has no such dim), "" when it has one that the description lacks. */
std::optional<std::string> preferred_var(const Graph &g, const Op &op, const Description &d,
                                         const std::vector<int> &batch, OracleStrategy s) {
  TensorId out = op.outputs[primary_output(op)];
  size_t rank = g.tensor(out).shape.size();
  auto by_dim = [&](int dim) -> std::optional<std::string> {
    if (dim < 0) return std::nullopt;
    int v = output_var_of_dim(d, dim);
    return v < 0 ? std::string() : d.vars[static_cast<size_t>(v)].name;
  };
  int bd = batch[static_cast<size_t>(out)];
  switch (s) {
    case OracleStrategy::data:
      return by_dim(bd);
    case OracleStrategy::spatial:
      return rank >= 4 ? by_dim(2) : by_dim(bd);
    case OracleStrategy::filter:
      return by_dim(feature_dim(rank));
    case OracleStrategy::channel:
      // A layer reading a param: the reduction var over its data operand's feature dim.
      for (const describe::OperandInfo &o : d.operands) {
        if (g.tensor(op.inputs[static_cast<size_t>(o.slot)]).role != Role::param) continue;
        for (const describe::OperandInfo &x : d.operands) {
          if (g.tensor(op.inputs[static_cast<size_t>(x.slot)]).role == Role::param) continue;
          int fd = feature_dim(x.shape.size());
          if (fd < 0) continue;
          for (size_t v = 0; v < d.vars.size(); ++v)
            if (d.vars[v].role == VarRole::reduction && indexes_dim(d.body, x.slot, fd, static_cast<int>(v)))
              return d.vars[v].name;
        }
        break;
      }
      return by_dim(feature_dim(rank));
    default:
      CLEAVE_CHECK(false, "preferred_var: not a per-axis strategy");
  }
  return std::nullopt;
}

std::string mesh_str(const std::vector<int64_t> &sizes) {
  std::string s;
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "x" : "") + std::to_string(sizes[i]);
  return s.empty() ? "1" : s;
}

OracleRow score(const Graph &g, const Plan &p, const Topology &t) {
  CostReport r = estimate_cost(g, p, t);
  OracleRow row;
  row.plan = p;
  row.devices = p.devices;
  row.comm_bytes = r.comm_bytes;
  row.peak_memory_bytes = r.peak_memory_bytes;
  for (const DeviceCost &d : r.devices) {
    row.compute_seconds = std::max(row.compute_seconds, d.compute_seconds);
    row.comm_seconds = std::max(row.comm_seconds, d.comm_seconds);
  }
  row.v1_step_seconds = r.predicted_step_seconds;
  row.step_seconds = simulate(g, p, t).makespan();
  return row;
}

}  // namespace

std::string_view oracle_strategy_name(OracleStrategy s) {
  switch (s) {
    case OracleStrategy::data: return "data";
    case OracleStrategy::spatial: return "spatial";
    case OracleStrategy::filter: return "filter";
    case OracleStrategy::channel: return "channel";
    case OracleStrategy::pipeline: return "pipeline";
    case OracleStrategy::data_filter: return "data+filter";
    case OracleStrategy::data_spatial: return "data+spatial";
  }
  return "?";
}

std::vector<OracleStrategy> oracle_strategies() {
  return {OracleStrategy::data,     OracleStrategy::spatial,     OracleStrategy::filter,      OracleStrategy::channel,
          OracleStrategy::pipeline, OracleStrategy::data_filter, OracleStrategy::data_spatial};
}

Plan strategy_plan(const Graph &g, const std::vector<OracleStrategy> &kinds, const std::vector<int64_t> &sizes,
                   int *fallback_ops) {
  CLEAVE_CHECK(kinds.size() == sizes.size(), "strategy_plan: one kind per mesh axis");
  std::vector<std::vector<Description>> descs;
  for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
  std::vector<int> batch = batch_dims(g);
  std::vector<OpId> order;
  for (OpId o = 0; o < g.num_ops(); ++o) order.push_back(o);
  // Forward ops decide first; backward and update ops follow them.
  std::stable_partition(order.begin(), order.end(), [&](OpId o) { return g.op(o).phase == Phase::forward; });
  std::vector<bool> fell_back(static_cast<size_t>(g.num_ops()), false);
  PartialPlan pp = start_partial(g);
  int devices = 1;
  for (size_t a = 0; a < kinds.size(); ++a) {
    devices *= static_cast<int>(sizes[a]);
    {
      int64_t f = sizes[a];  // one step per mesh axis: a [4] mesh, not [2,2] (which reduces twice)
      StepModel m(g, descs, pp, f, true);
      std::vector<int> choice(static_cast<size_t>(g.num_ops()), -1);
      for (OpId o : order) {
        const Op &op = g.op(o);
        const Description &d = descs[static_cast<size_t>(o)][primary_output(op)];
        std::optional<std::string> want;
        std::vector<int> cands = m.partitioning_choices(o);
        if (kinds[a] == OracleStrategy::data) {
          // Data parallelism everywhere, as the data planner does: every op splits its batch var, ops without one
          // (updates) are replicated, and so is an op whose batch var cannot be split.
          int v = batch_var(op, d, batch);
          want = v < 0 ? std::string() : d.vars[static_cast<size_t>(v)].name;
          cands.push_back(m.none_choice(o));
        } else if (op.phase == Phase::forward) {
          want = preferred_var(g, op, d, batch, kinds[a]);
        }
        bool found = false;
        if (want)
          for (int c : cands) found = found || m.choices(o)[static_cast<size_t>(c)] == *want;
        if (want && !found) {
          if (op.phase == Phase::forward) fell_back[static_cast<size_t>(o)] = true;
          if (kinds[a] == OracleStrategy::data) {
            want = std::string();
            found = true;
          }
        }
        // Lexicographic: (the preferred var first, bytes moved with the ops decided so far, choice order).
        std::tuple<int, int64_t, int> best{0, 0, -1};
        for (int c : cands) {
          int rank = found && m.choices(o)[static_cast<size_t>(c)] != *want ? 1 : 0;
          std::tuple<int, int64_t, int> cand{rank, m.cost_given(o, c, choice), c};
          if (std::get<2>(best) < 0 || cand < best) best = cand;
        }
        choice[static_cast<size_t>(o)] = std::get<2>(best);
      }
      m.commit(choice, pp);
    }
  }
  if (fallback_ops) *fallback_ops = static_cast<int>(std::count(fell_back.begin(), fell_back.end(), true));
  return finish_partial(g, devices, pp);
}

Plan pipeline_plan(const Graph &g, int devices) {
  std::vector<OpId> forward;
  for (OpId o = 0; o < g.num_ops(); ++o)
    if (g.op(o).phase == Phase::forward) forward.push_back(o);
  if (static_cast<int>(forward.size()) < devices)
    CLEAVE_USER_ERROR("pipeline: ", forward.size(), " forward ops cannot fill ", devices, " stages");
  // Weight of a forward op: its FLOPs and those of the ops of its group (its backward ops).
  std::map<OpId, int64_t> weight;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    OpId grp = op.phase == Phase::forward ? o : op.group;
    if (grp != kNoOp && g.op(grp).phase == Phase::forward) weight[grp] += describe::op_flops(g, op);
  }
  int64_t total = 0;
  for (OpId f : forward) total += weight[f];
  // Contiguous stages: stage s ends once the running sum reaches (s+1)/devices of the total, or when the forward ops
  // left are just enough to give every later stage one.
  std::vector<int> stage(static_cast<size_t>(g.num_ops()), -1);
  int s = 0;
  int64_t run = 0;
  for (size_t i = 0; i < forward.size(); ++i) {
    stage[static_cast<size_t>(forward[i])] = s;
    run += weight[forward[i]];
    int remaining = static_cast<int>(forward.size() - i - 1);
    if (s < devices - 1 && (remaining <= devices - 1 - s || run * devices >= (s + 1) * total)) ++s;
  }
  // Backward ops follow their forward op; other ops (updates) the first forward reader of a param they read, else
  // the producer of their first produced input.
  std::vector<OpId> first_forward_reader(static_cast<size_t>(g.num_tensors()), kNoOp);
  for (OpId f : forward)
    for (TensorId t : g.op(f).inputs)
      if (t != kNoTensor && first_forward_reader[static_cast<size_t>(t)] == kNoOp)
        first_forward_reader[static_cast<size_t>(t)] = f;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    if (stage[static_cast<size_t>(o)] >= 0) continue;
    if (op.group != kNoOp && op.group != o && g.op(op.group).phase == Phase::forward) {
      stage[static_cast<size_t>(o)] = stage[static_cast<size_t>(op.group)];
      continue;
    }
    int st = -1;
    for (TensorId t : op.inputs)
      if (t != kNoTensor && g.tensor(t).role == Role::param && first_forward_reader[static_cast<size_t>(t)] != kNoOp) {
        st = stage[static_cast<size_t>(first_forward_reader[static_cast<size_t>(t)])];
        break;
      }
    for (TensorId t : op.inputs)
      if (st < 0 && t != kNoTensor && g.tensor(t).producer != kNoOp)
        st = stage[static_cast<size_t>(g.tensor(t).producer)];
    stage[static_cast<size_t>(o)] = std::max(st, 0);
  }
  // Stage s on device devices-1-s: the last stage holds the loss, which rank 0 logs.
  auto device_of = [&](OpId o) { return devices - 1 - stage[static_cast<size_t>(o)]; };
  Plan p;
  p.devices = devices;
  std::vector<int> home(static_cast<size_t>(g.num_tensors()), -1);
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    int d = device_of(o);
    p.ops.push_back({op.name, ParallelConfig{{d}, {1}, {""}}});
    for (TensorId t : op.outputs)
      if (t != kNoTensor) home[static_cast<size_t>(t)] = d;
    for (TensorId t : op.inputs)
      if (t != kNoTensor && home[static_cast<size_t>(t)] < 0 && g.tensor(t).producer == kNoOp)
        home[static_cast<size_t>(t)] = d;
  }
  // A param and its state live where their update runs (the assign's source), which is where they are read.
  for (const Assign &a : g.assigns)
    if (g.tensor(a.src).producer != kNoOp) home[static_cast<size_t>(a.dst)] = home[static_cast<size_t>(a.src)];
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    int d = std::max(home[static_cast<size_t>(t)], 0);
    p.tensors.push_back({g.tensor(t).name, Sharding{{d}, {1}, {AxisSharding{}}}});
  }
  validate_plan(g, p);
  return p;
}

std::vector<OracleRow> run_oracle(const Graph &g, const std::vector<int> &device_counts,
                                  const std::vector<OracleStrategy> &strategies,
                                  const std::vector<std::string> &planners, const Topology &t) {
  std::vector<OracleRow> rows;
  for (int p : device_counts) {
    for (OracleStrategy s : strategies) {
      OracleRow row;
      row.devices = p;
      row.strategy = oracle_strategy_name(s);
      row.mesh = std::to_string(p);
      try {
        if (s == OracleStrategy::pipeline) {
          OracleRow scored = score(g, pipeline_plan(g, p), t);
          scored.strategy = row.strategy;
          scored.mesh = row.mesh;
          row = scored;
        } else if (s == OracleStrategy::data_filter || s == OracleStrategy::data_spatial) {
          OracleStrategy other = s == OracleStrategy::data_filter ? OracleStrategy::filter : OracleStrategy::spatial;
          std::optional<OracleRow> best;
          for (int p1 = 2; p1 <= p / 2; ++p1) {
            if (p % p1 != 0) continue;
            std::vector<int64_t> sizes{p1, p / p1};
            int fallback = 0;
            Plan plan = strategy_plan(g, {OracleStrategy::data, other}, sizes, &fallback);
            OracleRow scored = score(g, plan, t);
            scored.fallback_ops = fallback;
            scored.mesh = mesh_str(sizes);
            // Fewest fallbacks, then fastest, then the first factorisation.
            if (!best || std::make_pair(scored.fallback_ops, scored.step_seconds) <
                             std::make_pair(best->fallback_ops, best->step_seconds))
              best = scored;
          }
          if (!best) {
            row.applicable = false;
            row.note = "needs p1 x p2 devices with p1, p2 >= 2";
          } else {
            row = *best;
            row.strategy = oracle_strategy_name(s);
          }
        } else {
          int fallback = 0;
          std::vector<OracleStrategy> kinds;
          std::vector<int64_t> sizes;
          if (p > 1) {
            kinds.push_back(s);
            sizes.push_back(p);
          }
          Plan plan = strategy_plan(g, kinds, sizes, &fallback);
          row = score(g, plan, t);
          row.strategy = oracle_strategy_name(s);
          row.mesh = std::to_string(p);
          row.fallback_ops = fallback;
        }
      } catch (const UserError &e) {
        row.applicable = false;
        row.note = e.what();
      }
      if (row.applicable && row.fallback_ops > 0)
        row.note = std::to_string(row.fallback_ops) + " forward ops could not take the strategy's split";
      rows.push_back(row);
    }
    std::optional<OracleRow> best;
    for (const std::string &name : planners) {
      Plan plan;
      try {
        plan = make_plan(g, name, p, &t);
      } catch (const UserError &) {
        continue;  // e.g. data parallelism with a batch the devices do not divide
      }
      OracleRow scored = score(g, plan, t);
      if (!best || scored.step_seconds < best->step_seconds) {
        best = scored;
        best->strategy = "best:" + name;
      }
    }
    if (best) {
      best->mesh = std::to_string(p);
      rows.push_back(*best);
    }
  }
  return rows;
}

std::string oracle_table(const std::vector<OracleRow> &rows) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-7s %-14s %-6s %11s %11s %11s %11s %16s %18s  %s\n", "devices", "strategy",
                "mesh", "compute_s", "comm_s", "v1_step_s", "sim_step_s", "comm_bytes", "peak_memory_bytes", "note");
  s += buf;
  // Per device count: the fastest strategy whose forward ops all took its split, the fastest strategy row at all,
  // and the search planners' best.
  auto flush_best = [&](int devices, size_t from, size_t to) {
    const OracleRow *pure = nullptr, *any = nullptr, *planner = nullptr;
    for (size_t i = from; i < to; ++i) {
      const OracleRow &r = rows[i];
      if (!r.applicable) continue;
      if (r.strategy.rfind("best:", 0) == 0) {
        planner = &r;
        continue;
      }
      if (!any || r.step_seconds < any->step_seconds) any = &r;
      if (r.fallback_ops == 0 && (!pure || r.step_seconds < pure->step_seconds)) pure = &r;
    }
    std::string line = "# " + std::to_string(devices) + " devices:";
    auto part = [&](const char *what, const OracleRow *r) {
      if (!r) return;
      std::snprintf(buf, sizeof buf, " %s %s (%s) %.3e s;", what, r->strategy.c_str(), r->mesh.c_str(),
                    r->step_seconds);
      line += buf;
    };
    part("fastest pure strategy", pure);
    if (any != pure) part("fastest with fallbacks", any);
    if (planner) {
      std::snprintf(buf, sizeof buf, " best plan %s %.3e s;", planner->strategy.c_str() + 5, planner->step_seconds);
      line += buf;
    }
    line.back() = '\n';
    s += line;
  };
  size_t start = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const OracleRow &r = rows[i];
    if (i > 0 && r.devices != rows[i - 1].devices) {
      flush_best(rows[i - 1].devices, start, i);
      start = i;
    }
    if (!r.applicable) {
      std::snprintf(buf, sizeof buf, "%-7d %-14s %-6s %11s %11s %11s %11s %16s %18s  %s\n", r.devices,
                    r.strategy.c_str(), r.mesh.c_str(), "-", "-", "-", "-", "-", "-", ("n/a: " + r.note).c_str());
    } else {
      std::snprintf(buf, sizeof buf, "%-7d %-14s %-6s %11.3e %11.3e %11.3e %11.3e %16lld %18lld  %s\n", r.devices,
                    r.strategy.c_str(), r.mesh.c_str(), r.compute_seconds, r.comm_seconds, r.v1_step_seconds,
                    r.step_seconds,
                    static_cast<long long>(r.comm_bytes), static_cast<long long>(r.peak_memory_bytes),
                    r.note.c_str());
    }
    s += buf;
  }
  if (!rows.empty()) flush_best(rows.back().devices, start, rows.size());
  return s;
}

}  // namespace cleave::plan
