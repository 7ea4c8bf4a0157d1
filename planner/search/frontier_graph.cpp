// The frontier planner's cost graph: configs, their costs, re-split costs between owners and readers (frontier.h).
#include "planner/search/frontier_graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "planner/search/baselines.h"
#include "planner/cost/cost_model.h"
#include "planner/plan/region.h"
#include "planner/search/strategies.h"
#include "planner/search/tofu.h"
#include "planner/search/tofu_step.h"
#include "planner/plan/validate.h"
#include "planner/search/frontier.h"

namespace cleave::plan {
namespace {


using describe::Description;
using Needs = std::vector<std::optional<Box>>;  // one input slot, per device id (none: the device does not read it)

/** The mesh every config uses (frontier.h): per used topology level, outermost first, its count's prime factors,
 *  descending; `runs` are the lengths of its stretches of one level and one prime. */
struct ConfigMesh {
  std::vector<int64_t> mesh;
  std::vector<size_t> runs;
};

ConfigMesh config_mesh(int devices, const Topology &t) {
  std::vector<int> used = hierarchy_levels(t, devices);  // innermost first
  if (used.empty()) used = {devices};
  ConfigMesh m;
  for (size_t l = used.size(); l-- > 0;) {
    int64_t prev = 0;
    for (int64_t f : default_factors(used[l])) {
      if (f == prev)
        ++m.runs.back();
      else
        m.runs.push_back(1);
      m.mesh.push_back(f);
      prev = f;
    }
  }
  if (m.mesh.empty()) m = {{1}, {1}};
  return m;
}

/** Every assignment of var indices 0..vars-1 to the axes of `m` whose indices never decrease within a run (axes of
 *  one run only permute the devices), in lexicographic order. */
std::vector<std::vector<int>> canonical_picks(const ConfigMesh &m, int vars) {
  std::vector<std::vector<int>> out{{}};
  for (size_t len : m.runs) {
    std::vector<std::vector<int>> next;
    for (const std::vector<int> &head : out) {
      std::vector<int> run(len, 0);
      for (;;) {
        std::vector<int> pick = head;
        pick.insert(pick.end(), run.begin(), run.end());
        next.push_back(std::move(pick));
        // The next non-decreasing run: bump the last index below vars-1, reset what follows to it.
        size_t i = len;
        while (i > 0 && run[i - 1] == vars - 1) --i;
        if (i == 0) break;
        ++run[i - 1];
        for (size_t j = i; j < len; ++j) run[j] = run[i - 1];
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string key_of(const Sharding &s) {
  std::string k;
  for (int d : s.devices) k += std::to_string(d) + ",";
  k += "|";
  for (int64_t m : s.mesh) k += std::to_string(m) + "x";
  k += "|";
  for (const AxisSharding &a : s.axes)
    k += std::to_string(static_cast<int>(a.kind)) + ":" + std::to_string(a.dim) + ",";
  return k;
}

/** The cost graph's parts, per op: its configs' costs and the edges into it from its inputs' owners (in input
 *  order), and whether they are priced for its configs and its owners' as they are now. */
struct PricedOps {
  explicit PricedOps(size_t ops) : nodes(ops), edges(ops), done(ops, 0) {}
  std::vector<std::vector<ft::Cost>> nodes;
  std::vector<std::vector<ft::CostGraph::Edge>> edges;
  std::vector<char> done;  // not vector<bool>: two threads write distinct ops
};

}  // namespace

class FrontierGraphBuilder::Impl {
 public:
  Impl(const Graph &g, int devices, const Topology &t, const Profile *profile)
      : g_(g),
        n_(devices),
        t_(t),
        profile_(profile),
        gap_(profile ? profile->statement_gap : 0),
        priced_(static_cast<size_t>(g.num_ops())) {
    for (int i = 0; i < devices; ++i) all_.push_back(i);
    descs_.reserve(static_cast<size_t>(g.num_ops()));
    candidate_ranges_.resize(static_cast<size_t>(g.num_ops()));
    for (const Op &op : g.ops()) descs_.push_back(describe::describe(g, op));
    enumerate_configs();
    find_owners();  // (reads no config)
  }

  /** Adds a seed plan's configs to the candidates (add_seed_configs). Ops priced ahead whose configs, or whose
   *  inputs' owners' configs, this changes are priced again by cost_graph. */
  void add_seed(const Plan &seed) {
    std::vector<int> before(static_cast<size_t>(g_.num_ops()));
    for (OpId o = 0; o < g_.num_ops(); ++o) before[static_cast<size_t>(o)] = configs(o);
    add_seed_configs(seed);
    auto changed = [&](OpId o) { return o != kNoOp && configs(o) != before[static_cast<size_t>(o)]; };
    for (OpId o = 0; o < g_.num_ops(); ++o) {
      bool stale = changed(o);
      for (TensorId t : g_.op(o).inputs) stale = stale || (t != kNoTensor && changed(owner_[static_cast<size_t>(t)]));
      if (stale) priced_.done[static_cast<size_t>(o)] = 0;
    }
  }

  /** Prices ops in id order until `stop` is set: work done ahead of cost_graph while a seed is still being searched.
   *  Every memo cache is keyed by an op's or owner's config index, or by content, and add_seed only appends configs,
   *  so what is cached stays right. */
  void price_ahead(const std::atomic<bool> &stop) {
    for (OpId o = 0; o < g_.num_ops() && !stop; ++o) price(o, priced_);
  }

  /** The cost graph. The ops not priced ahead are priced on two threads taking blocks of them in turn, each thread
   *  with its own memo caches (they only save work: a price is the same from either), so the graph is the same on
   *  any number of cores and whatever was priced ahead. */
  ft::CostGraph cost_graph() {
    std::vector<OpId> todo;
    for (OpId o = 0; o < g_.num_ops(); ++o)
      if (!priced_.done[static_cast<size_t>(o)]) todo.push_back(o);
    PricedOps parts = std::move(priced_);
    // Nothing is priced any more (another cost_graph prices everything again); `other` copies no parts.
    priced_ = PricedOps(parts.done.size());
    Impl other(*this);
    other.forget_prices();
    std::atomic<size_t> next{0};
    auto take = [&](Impl &b) {
      constexpr size_t kBlock = 8;
      for (size_t i = next.fetch_add(kBlock); i < todo.size(); i = next.fetch_add(kBlock))
        for (size_t k = i; k < std::min(todo.size(), i + kBlock); ++k) b.price(todo[k], parts);
    };
    side_by_side([&] { take(other); }, [&] { take(*this); });
    ft::CostGraph cg;
    for (OpId o = 0; o < g_.num_ops(); ++o) {
      cg.names.push_back(g_.op(o).name);
      cg.nodes.push_back(std::move(parts.nodes[static_cast<size_t>(o)]));
      for (ft::CostGraph::Edge &e : parts.edges[static_cast<size_t>(o)]) cg.edges.push_back(std::move(e));
    }
    return cg;
  }

  int configs(OpId o) const { return static_cast<int>(configs_[static_cast<size_t>(o)].size()); }

  /** The plan of one config per op. */
  Plan plan(const std::vector<int> &choice) {
    Plan p;
    p.devices = n_;
    std::vector<Sharding> sh(static_cast<size_t>(g_.num_tensors()));
    for (OpId o = 0; o < g_.num_ops(); ++o) {
      const Op &op = g_.op(o);
      const ParallelConfig &c = config(o, choice[static_cast<size_t>(o)]);
      for (size_t k = 0; k < op.outputs.size(); ++k)
        if (op.outputs[k] != kNoTensor)
          sh[static_cast<size_t>(op.outputs[k])] = implied_sharding(op, descs_[static_cast<size_t>(o)], c, k);
      p.ops.push_back({op.name, c});
    }
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      if (g_.tensor(t).producer != kNoOp) continue;
      OpId owner = owner_[static_cast<size_t>(t)];
      sh[static_cast<size_t>(t)] =
          owner == kNoOp ? Sharding{all_, {n_}, {AxisSharding{}}} : owned(t, choice[static_cast<size_t>(owner)]);
    }
    for (TensorId t = 0; t < g_.num_tensors(); ++t)
      p.tensors.push_back({g_.tensor(t).name, sh[static_cast<size_t>(t)]});
    return p;
  }

  /** Per op, the index of the candidate with the same var ranges on every device as its config in `p`, or -1. */
  std::vector<int> match(const Plan &p) {
    std::vector<int> out(static_cast<size_t>(g_.num_ops()), -1);
    for (const OpEntry &e : p.ops) {
      std::optional<OpId> o = g_.find_op(e.name);
      if (!o) continue;
      DeviceRanges want = device_ranges(*o, e.config);
      for (int c = 0; c < configs(*o) && out[static_cast<size_t>(*o)] < 0; ++c)
        if (candidate_ranges(*o, c) == want) out[static_cast<size_t>(*o)] = c;
    }
    return out;
  }

  int64_t total_configs() const {
    int64_t n = 0;
    for (const auto &c : configs_) n += static_cast<int64_t>(c.size());
    return n;
  }

 private:
  const ParallelConfig &config(OpId o, int c) const { return configs_[static_cast<size_t>(o)][static_cast<size_t>(c)]; }

  /** Per device id, the ranges of op `o`'s primary description's vars it computes under `c`. */
  using DeviceRanges = std::map<int, std::vector<Interval>>;
  DeviceRanges device_ranges(OpId o, const ParallelConfig &c) const {
    const Description &d = descs_[static_cast<size_t>(o)][primary_output(g_.op(o))];
    DeviceRanges by_device;
    for (size_t i = 0; i < c.devices.size(); ++i) by_device[c.devices[i]] = var_ranges(d, c, static_cast<int64_t>(i));
    return by_device;
  }

  /** device_ranges of candidate `c` of op `o`, kept (match runs once per seed and per FT point). */
  const DeviceRanges &candidate_ranges(OpId o, int c) {
    std::vector<std::optional<DeviceRanges>> &kept = candidate_ranges_[static_cast<size_t>(o)];
    if (kept.size() <= static_cast<size_t>(c)) kept.resize(static_cast<size_t>(c) + 1);
    std::optional<DeviceRanges> &r = kept[static_cast<size_t>(c)];
    if (!r) r = device_ranges(o, config(o, c));
    return *r;
  }

  void enumerate_configs() {
    ConfigMesh mesh = config_mesh(n_, t_);
    std::map<std::string, std::vector<ParallelConfig>> memo;
    for (OpId o = 0; o < g_.num_ops(); ++o) {
      const Op &op = g_.op(o);
      const std::vector<Description> &ds = descs_[static_cast<size_t>(o)];
      auto [it, fresh] = memo.emplace(config_check_key(g_, op), std::vector<ParallelConfig>{});
      if (fresh) {
        const Description &d = ds[primary_output(op)];
        std::vector<std::string> vars{""};
        for (int v : describe::splittable_vars(d)) vars.push_back(d.vars[static_cast<size_t>(v)].name);
        // Fewest distinct vars first (replication counting as one), pure splits before those mixing in replication,
        // then lexicographic.
        std::vector<std::pair<std::array<int, 2>, std::vector<int>>> ranked;
        for (std::vector<int> &pick : canonical_picks(mesh, static_cast<int>(vars.size()))) {
          std::vector<int> distinct = pick;
          std::sort(distinct.begin(), distinct.end());
          distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
          int mixed = distinct.size() > 1 && distinct.front() == 0;
          ranked.push_back({{static_cast<int>(distinct.size()), mixed}, std::move(pick)});
        }
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](const auto &a, const auto &b) { return a.first < b.first; });
        std::vector<ParallelConfig> out;
        for (const auto &[unused, pick] : ranked) {
          if (out.size() == kMaxConfigs) break;
          ParallelConfig c{all_, mesh.mesh, {}};
          for (int v : pick) c.vars.push_back(vars[static_cast<size_t>(v)]);
          if (config_problems(g_, op, ds, c, n_).empty() && codegen_supports(g_, op, ds, c))
            out.push_back(std::move(c));
        }
        it->second = std::move(out);
      }
      configs_.push_back(it->second);
    }
  }

  /** Adds each op's config in `seed` to its candidates where none of them has the same var ranges on every device
   *  (tofu's plans order the axes of a level differently, and mix more vars, than the enumeration keeps). */
  void add_seed_configs(const Plan &seed) {
    std::vector<int> matched = match(seed);
    for (const OpEntry &e : seed.ops) {
      std::optional<OpId> o = g_.find_op(e.name);
      if (o && matched[static_cast<size_t>(*o)] < 0) configs_[static_cast<size_t>(*o)].push_back(e.config);
    }
  }

  void find_owners() {
    std::vector<TensorId> from(static_cast<size_t>(g_.num_tensors()), kNoTensor);
    for (const Assign &a : g_.assigns) from[static_cast<size_t>(a.dst)] = a.src;
    owner_.assign(static_cast<size_t>(g_.num_tensors()), kNoOp);
    owner_tensor_.assign(static_cast<size_t>(g_.num_tensors()), kNoTensor);
    readers_.assign(static_cast<size_t>(g_.num_tensors()), 0);
    saved_.assign(static_cast<size_t>(g_.num_tensors()), false);
    for (const Op &op : g_.ops())
      for (TensorId t : op.inputs)
        if (t != kNoTensor) {
          ++readers_[static_cast<size_t>(t)];
          if (op.phase != Phase::forward) saved_[static_cast<size_t>(t)] = true;
        }
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const Tensor &tensor = g_.tensor(t);
      TensorId src = from[static_cast<size_t>(t)];
      if (tensor.producer != kNoOp) {
        owner_[static_cast<size_t>(t)] = tensor.producer;
        owner_tensor_[static_cast<size_t>(t)] = t;
      } else if (src != kNoTensor && g_.tensor(src).producer != kNoOp) {
        owner_[static_cast<size_t>(t)] = g_.tensor(src).producer;
        owner_tensor_[static_cast<size_t>(t)] = src;
      } else {
        std::vector<OpId> readers = g_.consumers(t);
        if (!readers.empty()) owner_[static_cast<size_t>(t)] = readers.front();
      }
    }
  }

  const Needs &needs(OpId o, int c, size_t slot) {
    auto key = std::make_pair(o, c);
    auto it = needs_.find(key);
    if (it == needs_.end()) {
      // Ops of one kind, shapes and attributes (a model's repeated layers) read the same boxes under one config.
      auto [same, fresh] = needs_by_shape_.try_emplace(shape_key(o, c));
      if (fresh) {
        const ParallelConfig &cfg = config(o, c);
        same->second.assign(g_.op(o).inputs.size(), Needs(static_cast<size_t>(n_)));
        for (size_t i = 0; i < cfg.devices.size(); ++i) {
          std::vector<std::optional<Box>> in =
              op_input_regions(g_.op(o), descs_[static_cast<size_t>(o)], cfg, static_cast<int64_t>(i));
          for (size_t s = 0; s < in.size(); ++s) same->second[s][static_cast<size_t>(cfg.devices[i])] = in[s];
        }
      }
      it = needs_.emplace(key, &same->second).first;
    }
    return (*it->second)[slot];
  }

  /** What op `o` computes under config `c` depends on only: its config_check_key and the config. */
  std::string shape_key(OpId o, int c) {
    if (op_keys_.empty())
      for (const Op &op : g_.ops()) op_keys_.push_back(config_check_key(g_, op));
    const ParallelConfig &cfg = config(o, c);
    std::string key = op_keys_[static_cast<size_t>(o)] + "|";
    for (int d : cfg.devices) key += std::to_string(d) + ",";
    key += "|";
    for (int64_t m : cfg.mesh) key += std::to_string(m) + ",";
    key += "|";
    for (const std::string &v : cfg.vars) key += v + ",";
    return key;
  }

  /** The sharding tensor `t` has with its owner under config `oc` (partial axes kept when one op reads it). */
  Sharding owned(TensorId t, int oc) {
    auto key = std::make_pair(t, oc);
    auto it = owned_.find(key);
    if (it != owned_.end()) return it->second;
    OpId o = owner_[static_cast<size_t>(t)];
    const Op &op = g_.op(o);
    const ParallelConfig &cfg = config(o, oc);
    TensorId produced = owner_tensor_[static_cast<size_t>(t)];
    Sharding s;
    if (produced != kNoTensor) {
      size_t k = static_cast<size_t>(std::find(op.outputs.begin(), op.outputs.end(), produced) - op.outputs.begin());
      s = implied_sharding(op, descs_[static_cast<size_t>(o)], cfg, k);
      if (produced != t || readers_[static_cast<size_t>(t)] != 1) s = without_partial(s);
    } else {
      s = source_sharding(t, o, oc);
    }
    owned_.emplace(key, s);
    return s;
  }

  /** A source first read by op `o` under config `oc`: the sharding whose blocks are exactly what o's devices read
   *  (graph data split on its sample axis only), else replicated. */
  Sharding source_sharding(TensorId t, OpId o, int oc) {
    const Tensor &tensor = g_.tensor(t);
    const ParallelConfig &cfg = config(o, oc);
    const Op &op = g_.op(o);
    size_t slot = static_cast<size_t>(std::find(op.inputs.begin(), op.inputs.end(), t) - op.inputs.begin());
    const Needs &need = needs(o, oc, slot);
    std::vector<AxisSharding> choices;
    for (size_t d = 0; d < tensor.shape.size(); ++d)
      if (!is_data(tensor) || static_cast<int>(d) == tensor.sample_axis)
        choices.push_back({AxisSharding::Kind::split, static_cast<int>(d)});
    choices.push_back(AxisSharding{});
    size_t axes = cfg.mesh.size();
    std::vector<size_t> pick(axes, 0);
    for (;;) {
      Sharding s{cfg.devices, cfg.mesh, {}};
      std::map<int, int64_t> parts;
      for (size_t a = 0; a < axes; ++a) {
        s.axes.push_back(choices[pick[a]]);
        if (s.axes.back().kind == AxisSharding::Kind::split) {
          auto [p, unused] = parts.try_emplace(s.axes.back().dim, 1);
          p->second *= cfg.mesh[a];
        }
      }
      bool ok = true;
      for (const auto &[dim, p] : parts) ok = ok && tensor.shape[static_cast<size_t>(dim)] % p == 0;
      for (size_t i = 0; ok && i < cfg.devices.size(); ++i) {
        const std::optional<Box> &b = need[static_cast<size_t>(cfg.devices[i])];
        ok = b && *b == shard_region(tensor.shape, s, static_cast<int64_t>(i));
      }
      if (ok) return s;
      size_t a = 0;
      while (a < axes && ++pick[a] == choices.size()) pick[a++] = 0;
      if (a == axes) break;
    }
    return Sharding{cfg.devices, cfg.mesh, std::vector<AxisSharding>(axes, AxisSharding{})};
  }

  int64_t shard_bytes(const Tensor &t, const Sharding &s) {
    return std::max<int64_t>(box_volume(shard_region(t.shape, s, 0)), 1) * dtype_size(t.dtype);
  }

  ft::Cost node_cost(OpId o, int c) {
    const Op &op = g_.op(o);
    const ParallelConfig &cfg = config(o, c);
    ft::Cost cost;
    if (profile_ && profile_->compute.count(op.name)) {
      // Measured shares are the op's own (by name): not shared with the ops of the same shapes.
      std::vector<double> shares = op_compute_seconds(g_, op, descs_[static_cast<size_t>(o)], cfg, t_, profile_);
      cost.time = *std::max_element(shares.begin(), shares.end());
    } else {
      auto [compute, fresh] = compute_by_shape_.try_emplace(shape_key(o, c), 0.0);
      if (fresh) compute->second = op_slowest_compute_seconds(g_, op, descs_[static_cast<size_t>(o)], cfg, t_);
      cost.time = compute->second;
    }
    cost.time += gap_;  // the kernel's statement
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      TensorId t = op.outputs[k];
      if (t == kNoTensor) continue;
      const Tensor &tensor = g_.tensor(t);
      Sharding s = implied_sharding(op, descs_[static_cast<size_t>(o)], cfg, k);
      // The forward activations the backward pass reads are what is live at the peak (its start); other forward
      // outputs, gradients and updates come and go.
      if (op.phase == Phase::forward && saved_[static_cast<size_t>(t)])
        cost.memory += static_cast<double>(shard_bytes(tensor, s));
      if (readers_[static_cast<size_t>(t)] == 1) continue;  // resolved on its one edge
      bool partial = false;
      for (size_t a = 0; a < s.axes.size(); ++a)
        if (s.axes[a].kind == AxisSharding::Kind::partial && s.mesh[a] > 1) {
          cost.time += all_reduce_time(shard_bytes(tensor, s), axis_group(s, a));
          partial = true;
        }
      if (partial) cost.time += gap_;  // codegen reduces every partial axis in one statement
    }
    for (const SyncExchange &x : sync_exchanges(g_, op, descs_[static_cast<size_t>(o)], cfg))
      cost.time += all_reduce_time(x.count * 4, x.group) + gap_;
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor || owner_[static_cast<size_t>(t)] != o) continue;
      Sharding sh = owned(t, c);
      // A source read at several slots is held and read once.
      auto slot = op.inputs.begin() + static_cast<std::ptrdiff_t>(s);
      bool again = std::find(op.inputs.begin(), slot, t) != slot;
      if (g_.tensor(t).producer == kNoOp && !again)
        cost.memory += static_cast<double>(shard_bytes(g_.tensor(t), sh));
      cost.time += (again ? 0.0 : data_read_seconds(t, sh)) + resplit(t, c, o, c, s);
    }
    // Each holder of an assign's destination copies its shard of the new value at the end of the step, unless the
    // update wrote it there.
    for (const Assign &a : g_.assigns)
      if (owner_[static_cast<size_t>(a.dst)] == o) {
        Sharding ds = owned(a.dst, c);
        if (update_writes_in_place(g_, a, owned(a.src, c), ds)) continue;
        double worst = 0;
        for (size_t i = 0; i < ds.devices.size(); ++i) {
          int64_t n = std::max<int64_t>(box_volume(shard_region(g_.tensor(a.dst).shape, ds, static_cast<int64_t>(i))), 1);
          worst = std::max(worst, local_seconds({LocalStatement::Kind::copy, ds.devices[i], kNoOp, true,
                                                 n * dtype_size(g_.tensor(a.dst).dtype)}, t_, profile_));
        }
        cost.time += worst + gap_;
      }
    // Sources bound to this op's outputs by assigns (params, optimizer state) live on their new value's boxes.
    for (const Assign &a : g_.assigns)
      if (g_.tensor(a.src).producer == o && g_.tensor(a.dst).producer == kNoOp &&
          readers_[static_cast<size_t>(a.dst)] == 0)
        cost.memory += static_cast<double>(shard_bytes(g_.tensor(a.dst), owned(a.dst, c)));
    return cost;
  }

  /** An all-reduce of `bytes` over `group` as estimate_cost prices it: α-β over the group's link, or with a profile
   *  its measured curve where it has one (its statement's gap not included). */
  double all_reduce_time(int64_t bytes, const std::vector<int> &group) const {
    CommEvent e;
    e.kind = CommEvent::Kind::all_reduce;
    e.group = group;
    e.count = bytes;
    e.elem_bytes = 1;
    return comm_event_seconds(e, t_, profile_).collective;
  }

  /** Seconds the slowest device spends reading its shard `s` of input or label `t` from .npy at the start of the step
   *  (cost_model.h LocalStatement::Kind::data), its statement's gap included; 0 for other tensors. */
  double data_read_seconds(TensorId t, const Sharding &s) const {
    const Tensor &tensor = g_.tensor(t);
    if (!is_data(tensor)) return 0;
    double worst = 0;
    for (size_t i = 0; i < s.devices.size(); ++i) {
      Box box = shard_region(tensor.shape, s, static_cast<int64_t>(i));
      LocalStatement read{LocalStatement::Kind::data, s.devices[i], kNoOp, false,
                          std::max<int64_t>(box_volume(box), 1) * dtype_size(tensor.dtype),
                          box.empty() ? 1 : box[static_cast<size_t>(tensor.sample_axis)].size()};
      worst = std::max(worst, local_seconds(read, t_, profile_));
    }
    return worst + gap_;
  }

  /** The devices of `s` along mesh axis `a` with every other coordinate 0. */
  static std::vector<int> axis_group(const Sharding &s, size_t a) {
    std::vector<int> group;
    for (int64_t i = 0; i < static_cast<int64_t>(s.devices.size()); ++i) {
      std::vector<int64_t> c = mesh_coords(s.mesh, i);
      bool zero = true;
      for (size_t b = 0; b < c.size(); ++b) zero = zero && (b == a || c[b] == 0);
      if (zero) group.push_back(s.devices[static_cast<size_t>(i)]);
    }
    return group;
  }

  /** resplit_seconds of tensor `t` held as its owner's config `oc` shards it into what op `o` reads at input `slot`
   *  under config `c`, priced once per distinct (sharding, boxes) pair: many config pairs give the same. */
  double resplit(TensorId t, int oc, OpId o, int c, size_t slot) {
    auto [it, fresh] = pair_secs_.try_emplace({owned_id(t, oc), need_id(o, c, slot)}, 0.0);
    if (fresh) it->second = resplit_seconds(t, owned(t, oc), needs(o, c, slot));
    return it->second;
  }

  /** Seconds to turn tensor `t` held as `from` into what the reader's devices need (by device id): the steps the
   *  communication derivation gives for it (communication.h resplit_steps), priced as estimate_cost prices them.
   *  Per device the sum of what it takes part in, added in a fixed order (reductions, cuts of its own shard,
   *  all-gathers, all-to-alls, the grouped send/recv's copies and transfers); the slowest device. */
  double resplit_seconds(TensorId t, const Sharding &from, const Needs &need) const {
    const Tensor &tensor = g_.tensor(t);
    std::map<int, Box> wants;
    for (int r = 0; r < n_; ++r)
      if (need[static_cast<size_t>(r)]) wants.emplace(r, *need[static_cast<size_t>(r)]);
    std::vector<CommStep> steps = resplit_steps(g_, t, from, wants);
    std::vector<double> secs(static_cast<size_t>(n_), 0);
    auto collective = [&](CommEvent::Kind kind, const std::vector<int> &group, int64_t count) {
      CommEvent e;
      e.kind = kind;
      e.group = group;
      e.count = count;
      e.elem_bytes = static_cast<int>(dtype_size(tensor.dtype));
      double s = comm_event_seconds(e, t_, profile_).collective + gap_;
      for (int r : group) secs[static_cast<size_t>(r)] += s;
    };
    // Region copies as derive_communication counts them (cost_model.h LocalStatement::Kind::copy).
    auto copy = [&](int r, int64_t elems) {
      LocalStatement c{LocalStatement::Kind::copy, r, kNoOp, false, std::max<int64_t>(elems, 1) * dtype_size(tensor.dtype)};
      secs[static_cast<size_t>(r)] += local_seconds(c, t_, profile_) + gap_;
    };
    using K = CommStep::Kind;
    for (const CommStep &st : steps) {
      if (st.kind == K::reduce_scatter) {
        collective(CommEvent::Kind::reduce_scatter, st.group, box_volume(st.blocks[0]));
        if (!st.in_order)  // each block copied into its place in the send buffer
          for (int r : st.group)
            for (size_t k = 0; k < st.group.size(); ++k) copy(r, box_volume(st.blocks[0]));
      } else if (st.kind == K::all_reduce) {
        collective(CommEvent::Kind::all_reduce, st.group, std::max<int64_t>(box_volume(st.whole), 1));
      }
    }
    for (const CommStep &st : steps)  // cut out of the device's own block
      if (st.kind == K::fetch && st.source == CommStep::Source::cut) copy(st.rank, box_volume(st.whole));
    for (const CommStep &st : steps)
      if (st.kind == K::all_gather) {
        collective(CommEvent::Kind::all_gather, st.group, box_volume(st.blocks[0]));
        if (!st.in_order)  // blocks copied into their places
          for (int r : st.group)
            for (size_t k = 0; k < st.group.size(); ++k) copy(r, box_volume(st.blocks[0]));
      }
    for (const CommStep &st : steps)
      if (st.kind == K::all_to_all) {
        int64_t count = box_volume(box_intersect(st.blocks[0], st.wanted[0]));
        collective(CommEvent::Kind::all_to_all, st.group, count);
        for (int r : st.group)  // each peer's part packed, then unpacked
          for (size_t k = 0; k < 2 * st.group.size(); ++k) copy(r, count);
      }
    // The grouped send/recv: per receiver, one transfer from each distinct block overlapping its box (its own when it
    // holds that block, else the first device holding it).
    CommEvent sr;
    sr.kind = CommEvent::Kind::send_recv;
    for (const CommStep &st : steps) {
      if (st.kind != K::fetch || st.source != CommStep::Source::parts) continue;
      int r = st.rank;
      for (const CommStep::Part &p : st.parts) {
        int64_t n = box_volume(p.part);
        if (p.src == r) {  // the device's own part copied into place
          copy(r, n);
          continue;
        }
        if (p.part != p.owned) copy(p.src, n);  // packed by the sender
        if (p.part != st.whole) copy(r, n);      // unpacked by the receiver
        sr.transfers.push_back({p.src, r, n * dtype_size(tensor.dtype)});
      }
    }
    if (!sr.transfers.empty()) {
      std::vector<double> tr = comm_event_seconds(sr, t_, profile_).transfers;
      std::vector<double> send(static_cast<size_t>(n_), 0), recv(static_cast<size_t>(n_), 0), gap(send);
      for (size_t i = 0; i < tr.size(); ++i) {
        send[static_cast<size_t>(sr.transfers[i].src)] += tr[i];
        recv[static_cast<size_t>(sr.transfers[i].dst)] += tr[i];
      }
      for (int r : event_ranks(sr)) gap[static_cast<size_t>(r)] = gap_;  // one statement per rank taking part
      for (size_t r = 0; r < secs.size(); ++r) secs[r] += std::max(send[r], recv[r]) + gap[r];
    }
    return *std::max_element(secs.begin(), secs.end());
  }

  std::string tensor_key(TensorId t) const {
    const Tensor &tensor = g_.tensor(t);
    std::string key = std::string(dtype_name(tensor.dtype)) + "[";
    for (int64_t d : tensor.shape) key += std::to_string(d) + ",";
    return key + "]";
  }

  /** The interned id of the boxes config `c` of op `o` reads of input `slot`. */
  int need_id(OpId o, int c, size_t slot) {
    auto [it, fresh] = need_ids_.try_emplace(std::make_tuple(o, c, slot), 0);
    if (fresh) {
      const Needs &need = needs(o, c, slot);
      it->second = need_intern_.emplace(need, static_cast<int>(need_intern_.size())).first->second;
    }
    return it->second;
  }

  /** The interned id of tensor `t`'s shape and its sharding with its owner under config `oc`. */
  int owned_id(TensorId t, int oc) {
    auto [it, fresh] = owned_ids_.try_emplace({t, oc}, 0);
    if (fresh) it->second = intern(tensor_key(t) + key_of(owned(t, oc)));
    return it->second;
  }

  int intern(const std::string &key) { return ids_.emplace(key, static_cast<int>(ids_.size())).first->second; }

  /** The bytes of the box device 0 of a reader assembles. */
  double assembled_bytes(TensorId t, const Needs &need) const {
    return need.empty() || !need[0] ? 0.0 : static_cast<double>(box_volume(*need[0]) * dtype_size(g_.tensor(t).dtype));
  }

  /** The edge from `owner`, which holds tensor `t`, into op `o` reading it at input `slot`: the re-split seconds (and
   *  bytes kept) per pair of their configs. */
  ft::CostGraph::Edge edge(TensorId t, OpId owner, OpId o, size_t slot) {
    const Op &op = g_.op(o);
    ft::CostGraph::Edge e{owner, o, {}};
    // A box assembled for a forward op stays live into the backward pass when its gradient reads it too.
    bool kept = op.phase == Phase::forward && saved_[static_cast<size_t>(t)];
    // Many config pairs give the same sharding and boxes: price each distinct pair once (local indices of the
    // distinct shardings and boxes of this edge, then the table of their pairs).
    std::vector<int> from_ids, need_ids, from_local, need_local, from_first, need_first;
    auto localise = [](const std::vector<int> &ids, std::vector<int> &local, std::vector<int> &first) {
      std::map<int, int> seen;
      for (size_t i = 0; i < ids.size(); ++i) {
        auto [it, fresh] = seen.emplace(ids[i], static_cast<int>(first.size()));
        if (fresh) first.push_back(static_cast<int>(i));
        local.push_back(it->second);
      }
    };
    for (int oc = 0; oc < configs(owner); ++oc) from_ids.push_back(owned_id(t, oc));
    for (int cc = 0; cc < configs(o); ++cc) need_ids.push_back(need_id(o, cc, slot));
    localise(from_ids, from_local, from_first);
    localise(need_ids, need_local, need_first);
    std::vector<const Needs *> need_of;
    for (int n : need_first) need_of.push_back(&needs(o, n, slot));
    std::vector<ft::Cost> table;
    for (int f : from_first)
      for (size_t k = 0; k < need_first.size(); ++k) {
        double secs = resplit(t, f, o, need_first[k], slot);
        table.push_back({secs, kept && secs > 0 ? assembled_bytes(t, *need_of[k]) : 0});
      }
    e.cost.reserve(static_cast<size_t>(configs(owner)) * static_cast<size_t>(configs(o)));
    for (int oc = 0; oc < configs(owner); ++oc)
      for (int cc = 0; cc < configs(o); ++cc)
        e.cost.push_back(table[static_cast<size_t>(from_local[static_cast<size_t>(oc)]) * need_first.size() +
                               static_cast<size_t>(need_local[static_cast<size_t>(cc)])]);
    return e;
  }

  /** Empties the memo caches (a copy's would point into the original's). */
  void forget_prices() {
    needs_.clear();
    needs_by_shape_.clear();
    compute_by_shape_.clear();
    owned_.clear();
    ids_.clear();
    pair_secs_.clear();
    need_ids_.clear();
    need_intern_.clear();
    owned_ids_.clear();
  }

  /** Prices op `o` into `parts`: its configs and the edges into it from its inputs' owners. */
  void price(OpId o, PricedOps &parts) {
    std::vector<ft::Cost> &nodes = parts.nodes[static_cast<size_t>(o)];
    std::vector<ft::CostGraph::Edge> &edges = parts.edges[static_cast<size_t>(o)];
    nodes.clear();
    edges.clear();
    for (int c = 0; c < configs(o); ++c) nodes.push_back(node_cost(o, c));
    const Op &op = g_.op(o);
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor) continue;
      OpId owner = owner_[static_cast<size_t>(t)];
      if (owner == kNoOp || owner == o) continue;
      edges.push_back(edge(t, owner, o, s));
    }
    parts.done[static_cast<size_t>(o)] = 1;
  }

  const Graph &g_;
  int n_;
  const Topology &t_;
  const Profile *profile_;  // measured times where it has them (may be null)
  /** The profile's statement_gap: every statement a device runs costs it this much more (estimate_cost). */
  const double gap_;
  std::vector<int> all_;
  std::vector<std::vector<Description>> descs_;
  std::vector<std::vector<ParallelConfig>> configs_;
  /** candidate_ranges' memo, per op and config index (configs are only appended). */
  std::vector<std::vector<std::optional<DeviceRanges>>> candidate_ranges_;
  PricedOps priced_;
  std::vector<OpId> owner_;
  std::vector<TensorId> owner_tensor_;
  std::vector<int> readers_;
  /** Per tensor: read by a backward or update op (a forward output so read is live at the memory peak). */
  std::vector<bool> saved_;
  std::map<std::pair<OpId, int>, const std::vector<Needs> *> needs_;  // into needs_by_shape_
  std::map<std::string, std::vector<Needs>> needs_by_shape_;
  std::map<std::string, double> compute_by_shape_;
  std::vector<std::string> op_keys_;  // config_check_key per op
  std::map<std::pair<TensorId, int>, Sharding> owned_;
  std::map<std::string, int> ids_;
  std::map<std::pair<int, int>, double> pair_secs_;
  std::map<std::tuple<OpId, int, size_t>, int> need_ids_;
  std::map<Needs, int> need_intern_;  // need ids: their own numbering (pair_secs_ keys pair a sharding id with one)
  std::map<std::pair<TensorId, int>, int> owned_ids_;
};

FrontierGraphBuilder::FrontierGraphBuilder(const Graph &g, int devices, const Topology &t, const Profile *profile)
    : impl_(std::make_unique<Impl>(g, devices, t, profile)) {}
FrontierGraphBuilder::~FrontierGraphBuilder() = default;
FrontierGraphBuilder::FrontierGraphBuilder(FrontierGraphBuilder &&) noexcept = default;
void FrontierGraphBuilder::add_seed(const Plan &seed) { impl_->add_seed(seed); }
void FrontierGraphBuilder::price_ahead(const std::atomic<bool> &stop) { impl_->price_ahead(stop); }
ft::CostGraph FrontierGraphBuilder::cost_graph() { return impl_->cost_graph(); }
Plan FrontierGraphBuilder::plan(const std::vector<int> &choice) { return impl_->plan(choice); }
std::vector<int> FrontierGraphBuilder::match(const Plan &p) { return impl_->match(p); }
int64_t FrontierGraphBuilder::total_configs() const { return impl_->total_configs(); }

void side_by_side(const std::function<void()> &first, const std::function<void()> &second) {
  std::exception_ptr first_failed, second_failed;
  auto run = [](const std::function<void()> &f, std::exception_ptr &failed) {
    try {
      f();
    } catch (...) {
      failed = std::current_exception();
    }
  };
  if (std::thread::hardware_concurrency() > 1) {
    std::thread helper([&] { run(first, first_failed); });
    run(second, second_failed);
    helper.join();
  } else {
    run(first, first_failed);
    run(second, second_failed);
  }
  if (first_failed) std::rethrow_exception(first_failed);
  if (second_failed) std::rethrow_exception(second_failed);
}

}  // namespace cleave::plan
