// The random planner and the one-line plan summary (random_plan.h).
#include "planner/search/random_plan.h"

#include <algorithm>
#include <map>
#include <optional>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/plan/region.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;

/** SplitMix64: a fixed algorithm, so a seed draws the same plan with every standard library. */
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /** Uniform in [0, n), n >= 1 (the modulo bias is below 2^-50 for the small n drawn here). */
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> r;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) r.push_back(d);
  return r;
}

/** Every ordered factorisation of n into factors >= 2 ({[1]} for n = 1). */
std::vector<std::vector<int64_t>> factorisations(int64_t n) {
  if (n == 1) return {{1}};
  std::vector<std::vector<int64_t>> out;
  for (int64_t f = 2; f <= n; ++f) {
    if (n % f != 0) continue;
    if (f == n) {
      out.push_back({n});
      continue;
    }
    for (std::vector<int64_t> rest : factorisations(n / f)) {
      rest.insert(rest.begin(), f);
      out.push_back(std::move(rest));
    }
  }
  return out;
}

/** Every tuple of `arity` picks from `n` choices, as index vectors in lexicographic order. */
std::vector<std::vector<size_t>> tuples(size_t n, size_t arity) {
  std::vector<std::vector<size_t>> out{{}};
  for (size_t a = 0; a < arity; ++a) {
    std::vector<std::vector<size_t>> next;
    for (const auto &t : out)
      for (size_t c = 0; c < n; ++c) {
        next.push_back(t);
        next.back().push_back(c);
      }
    out = std::move(next);
  }
  return out;
}

/** A random group and mesh over `devices` devices (random_plan.h), holding device 0 when `with_zero`. */
std::pair<std::vector<int>, std::vector<int64_t>> draw_group(Rng &rng, int devices, bool with_zero) {
  std::vector<int64_t> sizes = divisors(devices);
  int64_t k = rng.below(2) == 0 ? devices : sizes[rng.below(sizes.size())];
  std::vector<int> all;
  for (int d = 0; d < devices; ++d) all.push_back(d);
  // Fisher-Yates with our generator; the first k devices, in their shuffled order, form the group.
  for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng.below(i)]);
  std::vector<int> group(all.begin(), all.begin() + k);
  if (with_zero && std::find(group.begin(), group.end(), 0) == group.end()) group[rng.below(group.size())] = 0;
  std::vector<std::vector<int64_t>> meshes = factorisations(k);
  return {group, meshes[rng.below(meshes.size())]};
}

ParallelConfig draw_config(Rng &rng, const Graph &g, const Op &op, const std::vector<Description> &descs, int devices,
                           bool with_zero) {
  auto [group, mesh] = draw_group(rng, devices, with_zero);
  const Description &d = descs[primary_output(op)];
  std::vector<std::string> choices{""};
  for (int v : describe::splittable_vars(d)) choices.push_back(d.vars[static_cast<size_t>(v)].name);
  std::vector<ParallelConfig> legal;
  for (const std::vector<size_t> &t : tuples(choices.size(), mesh.size())) {
    ParallelConfig c{group, mesh, {}};
    for (size_t i : t) c.vars.push_back(choices[i]);
    if (config_problems(g, op, descs, c, devices).empty() && codegen_supports(g, op, descs, c))
      legal.push_back(std::move(c));
  }
  CLEAVE_CHECK(!legal.empty(), "op ", op.name, ": not even its replicated config is legal");
  return legal[rng.below(legal.size())];
}

/** A random sharding of source `t`: per axis replicate or split(a dim), graph data on its sample axis only. */
Sharding draw_source(Rng &rng, const Tensor &t, int devices) {
  auto [group, mesh] = draw_group(rng, devices, false);
  std::vector<AxisSharding> choices{AxisSharding{}};
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (!is_data(t) || static_cast<int>(d) == t.sample_axis) choices.push_back({AxisSharding::Kind::split, static_cast<int>(d)});
  std::vector<Sharding> legal;
  for (const std::vector<size_t> &tuple : tuples(choices.size(), mesh.size())) {
    Sharding s{group, mesh, {}};
    std::map<int, int64_t> parts;
    for (size_t a = 0; a < tuple.size(); ++a) {
      s.axes.push_back(choices[tuple[a]]);
      if (s.axes.back().kind == AxisSharding::Kind::split) {
        int64_t &p = parts.try_emplace(s.axes.back().dim, 1).first->second;
        p *= mesh[a];
      }
    }
    bool even = true;
    for (const auto &[dim, p] : parts) even = even && t.shape[static_cast<size_t>(dim)] % p == 0;
    if (even) legal.push_back(std::move(s));
  }
  return legal[rng.below(legal.size())];
}


}  // namespace

Plan random_plan(const Graph &g, int devices, uint64_t seed) {
  Rng rng(seed);
  Plan p;
  p.devices = devices;
  std::vector<Sharding> shardings(static_cast<size_t>(g.num_tensors()));
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    std::vector<Description> descs = describe::describe(g, op);
    bool makes_loss =
        g.loss != kNoTensor && std::find(op.outputs.begin(), op.outputs.end(), g.loss) != op.outputs.end();
    ParallelConfig c = draw_config(rng, g, op, descs, devices, makes_loss);
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (op.outputs[k] != kNoTensor) shardings[static_cast<size_t>(op.outputs[k])] = implied_sharding(op, descs, c, k);
    p.ops.push_back({op.name, std::move(c)});
  }
  std::vector<TensorId> assigned(static_cast<size_t>(g.num_tensors()), kNoTensor);
  for (const Assign &a : g.assigns) assigned[static_cast<size_t>(a.dst)] = a.src;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    if (tensor.producer != kNoOp) continue;
    TensorId src = assigned[static_cast<size_t>(t)];
    if (src != kNoTensor && g.tensor(src).producer != kNoOp)
      shardings[static_cast<size_t>(t)] = without_partial(shardings[static_cast<size_t>(src)]);
    else
      shardings[static_cast<size_t>(t)] = draw_source(rng, tensor, devices);
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    p.tensors.push_back({g.tensor(t).name, shardings[static_cast<size_t>(t)]});
  validate_plan(g, p);
  return p;
}

ParallelConfig random_op_config(const Graph &g, const Op &op, const std::vector<Description> &descs, int devices,
                                bool with_zero, uint64_t &rng_state) {
  Rng rng(rng_state);
  ParallelConfig c = draw_config(rng, g, op, descs, devices, with_zero);
  rng_state = rng.state();
  return c;
}

std::string plan_summary(const Graph &g, const Plan &p) {
  int replicated = 0, output = 0, reduction = 0, synced = 0, subset = 0, permuted = 0, meshes = 0;
  for (const OpEntry &e : p.ops) {
    const ParallelConfig &c = e.config;
    subset += static_cast<int>(c.devices.size()) < p.devices;
    permuted += !std::is_sorted(c.devices.begin(), c.devices.end());
    meshes += c.mesh.size() > 1;
    std::optional<OpId> id = g.find_op(e.name);
    CLEAVE_CHECK(id.has_value(), "plan op ", e.name, " not in graph");
    const Op &op = g.op(*id);
    std::vector<Description> descs = describe::describe(g, op);
    const Description &d = descs[primary_output(op)];
    bool split = false, is_output = false, is_reduction = false, is_synced = false;
    for (const std::string &name : c.vars) {
      if (name.empty()) continue;
      split = true;
      int v = d.var(name);
      describe::SplitKind kind = v < 0 ? describe::SplitKind::none : describe::split_kind(d, v);
      is_output = is_output || kind == describe::SplitKind::concat;
      is_reduction = is_reduction || kind == describe::SplitKind::partial;
      is_synced = is_synced || kind == describe::SplitKind::synced;
    }
    replicated += !split;
    output += is_output;
    reduction += is_reduction;
    synced += is_synced;
  }
  return std::to_string(p.ops.size()) + " ops: " + std::to_string(replicated) + " replicated, " +
         std::to_string(output) + " split an output var, " + std::to_string(reduction) + " a reduction var, " +
         std::to_string(synced) + " a synced var; " + std::to_string(subset) + " on a device subset, " +
         std::to_string(permuted) + " in permuted order, " + std::to_string(meshes) + " on a 2-D+ mesh";
}

}  // namespace cleave::plan
