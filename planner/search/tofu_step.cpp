// One recursion step: choices per op, owners of tensors, and the communication costs of choices (tofu_step.h).
#include "planner/search/tofu_step.h"

#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "ir/printer.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;

/** A memo entry not computed yet (a cost can be negative: a reduce-scatter credit). */
constexpr int64_t kUnknown = std::numeric_limits<int64_t>::min();



std::vector<int> iota(int64_t n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

/** The value of an assign's src becomes its dst: dst -> src. */
std::vector<TensorId> assigned_from(const Graph &g) {
  std::vector<TensorId> src(static_cast<size_t>(g.num_tensors()), kNoTensor);
  for (const Assign &a : g.assigns) src[static_cast<size_t>(a.dst)] = a.src;
  return src;
}



}  // namespace

PartialPlan start_partial(const Graph &g) {
  PartialPlan pp;
  pp.op_vars.resize(static_cast<size_t>(g.num_ops()));
  pp.source_axes.resize(static_cast<size_t>(g.num_tensors()));
  return pp;
}

Plan finish_partial(const Graph &g, int devices, const PartialPlan &pp, const std::vector<int> &order) {
  CLEAVE_CHECK(product(pp.mesh) == devices, "mesh does not cover ", devices, " devices");
  CLEAVE_CHECK(order.empty() || static_cast<int>(order.size()) == devices, "device order of ", order.size(),
               " entries for ", devices, " devices");
  bool flat = pp.mesh.empty();
  std::vector<int64_t> mesh = flat ? std::vector<int64_t>{1} : pp.mesh;
  std::vector<int> all = order.empty() ? iota(devices) : order;
  Plan p;
  p.devices = devices;
  std::vector<Sharding> shardings(static_cast<size_t>(g.num_tensors()));
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    shardings[static_cast<size_t>(t)] =
        Sharding{all, mesh, flat ? std::vector<AxisSharding>{AxisSharding{}} : pp.source_axes[static_cast<size_t>(t)]};
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    ParallelConfig c{all, mesh, flat ? std::vector<std::string>{""} : pp.op_vars[static_cast<size_t>(o)]};
    std::vector<Description> descs = describe::describe(g, op);
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (op.outputs[k] != kNoTensor) shardings[static_cast<size_t>(op.outputs[k])] = implied_sharding(op, descs, c, k);
    p.ops.push_back({op.name, std::move(c)});
  }
  // A source bound by an assign lives on the boxes its new value is produced on (codegen copies shard to shard).
  std::vector<TensorId> from = assigned_from(g);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    TensorId src = from[static_cast<size_t>(t)];
    if (g.tensor(t).producer == kNoOp && src != kNoTensor && g.tensor(src).producer != kNoOp)
      shardings[static_cast<size_t>(t)] = without_partial(shardings[static_cast<size_t>(src)]);
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    p.tensors.push_back({g.tensor(t).name, shardings[static_cast<size_t>(t)]});
  validate_plan(g, p);
  return p;
}

std::vector<int64_t> default_factors(int devices) {
  std::vector<int64_t> f;
  int64_t n = devices;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  if (n > 1) f.push_back(n);
  std::sort(f.rbegin(), f.rend());
  return f;
}

StepModel::StepModel(const Graph &g, const std::vector<std::vector<Description>> &descs, const PartialPlan &pp,
                     int64_t factor, bool partial_splits)
    : g_(g), descs_(descs), pp_(pp), factor_(factor) {
  groups_ = product(pp.mesh);
  group_size_ = groups_ * factor;
  devices_ = iota(group_size_);
  mesh_ = pp.mesh;
  mesh_.push_back(factor);
  choices_.resize(static_cast<size_t>(g.num_ops()));
  // Whether a config is valid and lowered depends only on the op's signature and its vars; deep nets repeat a few
  // signatures many times.
  std::map<std::string, bool> ok;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    const std::vector<Description> &ds = descs[static_cast<size_t>(o)];
    const Description &d = ds[primary_output(op)];
    std::vector<std::string> &out = choices_[static_cast<size_t>(o)];
    std::string sig = config_check_key(g, op);
    for (const std::string &v : pp.op_vars[static_cast<size_t>(o)]) sig += "|" + v;
    for (size_t v = 0; v < d.vars.size(); ++v) {
      if (!partial_splits && describe::split_kind(d, static_cast<int>(v)) == describe::SplitKind::partial) continue;
      if (d.vars[v].extent % factor != 0) continue;
      auto [it, fresh] = ok.emplace(sig + "|" + d.vars[v].name, false);
      if (fresh) {
        ParallelConfig c = config(o, d.vars[v].name);
        it->second = config_problems(g, op, ds, c, static_cast<int>(group_size_)).empty() &&
                     codegen_supports(g, op, ds, c);
      }
      if (it->second) out.push_back(d.vars[v].name);
    }
    out.push_back("");
  }
  std::vector<TensorId> from = assigned_from(g);
  owner_.assign(static_cast<size_t>(g.num_tensors()), kNoOp);
  owner_tensor_.assign(static_cast<size_t>(g.num_tensors()), kNoTensor);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    TensorId src = from[static_cast<size_t>(t)];
    if (tensor.producer != kNoOp) {
      owner_[static_cast<size_t>(t)] = tensor.producer;
      owner_tensor_[static_cast<size_t>(t)] = t;
    } else if (src != kNoTensor && g.tensor(src).producer != kNoOp) {
      owner_[static_cast<size_t>(t)] = g.tensor(src).producer;
      owner_tensor_[static_cast<size_t>(t)] = src;
    } else {
      std::vector<OpId> readers = g.consumers(t);
      if (!readers.empty()) owner_[static_cast<size_t>(t)] = readers.front();
    }
  }
  // The only reader of each tensor read by one op (slot included), else kNoOp.
  sole_reader_.assign(static_cast<size_t>(g.num_tensors()), kNoOp);
  std::vector<int> reads(static_cast<size_t>(g.num_tensors()), 0);
  for (OpId o = 0; o < g.num_ops(); ++o)
    for (TensorId t : g.op(o).inputs)
      if (t != kNoTensor && ++reads[static_cast<size_t>(t)] == 1) sole_reader_[static_cast<size_t>(t)] = o;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (reads[static_cast<size_t>(t)] != 1) sole_reader_[static_cast<size_t>(t)] = kNoOp;
  reads_ = std::move(reads);
  unary_.resize(static_cast<size_t>(g.num_ops()));
  edges_of_.resize(static_cast<size_t>(g.num_ops()));
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor) continue;
      OpId owner = owner_[static_cast<size_t>(t)];
      if (owner == kNoOp || owner == o) continue;
      int e = static_cast<int>(edges_.size());
      edges_.push_back({owner, o, t, static_cast<int>(s)});
      edges_of_[static_cast<size_t>(owner)].push_back(e);
      edges_of_[static_cast<size_t>(o)].push_back(e);
    }
  }
  edge_cost_.resize(edges_.size());
  need_.resize(static_cast<size_t>(g.num_ops()));
  own_.resize(static_cast<size_t>(g.num_tensors()));
  fetch_.resize(edges_.size());
}

ParallelConfig StepModel::config(OpId o, const std::string &var) const {
  ParallelConfig c{devices_, mesh_, pp_.op_vars[static_cast<size_t>(o)]};
  c.vars.push_back(var);
  return c;
}

const StepModel::Need &StepModel::need_entry(OpId o, int c) {
  std::vector<Need> &per_choice = need_[static_cast<size_t>(o)];
  if (per_choice.empty()) per_choice.resize(choices(o).size());
  Need &n = per_choice[static_cast<size_t>(c)];
  if (!n.boxes.empty()) return n;
  const Op &op = g_.op(o);
  const std::vector<Description> &ds = descs_[static_cast<size_t>(o)];
  ParallelConfig cfg = config(o, choices(o)[static_cast<size_t>(c)]);
  for (int64_t i = 0; i < factor_; ++i) {
    n.boxes.push_back(op_input_regions(op, ds, cfg, i));
    std::vector<int> &ids = n.ids.emplace_back();
    for (const std::optional<Box> &b : n.boxes.back()) {
      int id = -1;
      if (b) {
        std::vector<std::pair<int64_t, int64_t>> k;
        for (const Interval &iv : *b) k.emplace_back(iv.begin, iv.end);
        id = box_ids_.emplace(std::move(k), static_cast<int>(box_ids_.size())).first->second;
      }
      ids.push_back(id);
    }
  }
  return n;
}

const std::vector<std::optional<Box>> &StepModel::need(OpId o, int c, int64_t index) {
  return need_entry(o, c).boxes[static_cast<size_t>(index)];
}

int StepModel::need_id(OpId o, int c, int64_t index, size_t slot) {
  return need_entry(o, c).ids[static_cast<size_t>(index)][slot];
}

Sharding StepModel::owned_sharding(TensorId t, int oc) {
  OpId o = owner_[static_cast<size_t>(t)];
  const Op &op = g_.op(o);
  const Tensor &tensor = g_.tensor(t);
  TensorId produced = owner_tensor_[static_cast<size_t>(t)];
  if (produced != kNoTensor) {
    size_t slot = static_cast<size_t>(std::find(op.outputs.begin(), op.outputs.end(), produced) - op.outputs.begin());
    return without_partial(implied_sharding(op, descs_[static_cast<size_t>(o)], config(o, choices(o)[static_cast<size_t>(oc)]),
                                     slot));
  }
  // A source read first by `op`: split along the dim whose blocks are exactly what op's devices read, else whole.
  Sharding s{devices_, mesh_, pp_.source_axes[static_cast<size_t>(t)]};
  s.axes.push_back(AxisSharding{});
  size_t slot = static_cast<size_t>(std::find(op.inputs.begin(), op.inputs.end(), t) - op.inputs.begin());
  for (size_t d = 0; d < tensor.shape.size(); ++d) {
    if (is_data(tensor) && static_cast<int>(d) != tensor.sample_axis) continue;
    Sharding cand = s;
    cand.axes.back() = {AxisSharding::Kind::split, static_cast<int>(d)};
    int64_t n = 1;
    for (size_t a = 0; a < cand.axes.size(); ++a)
      if (cand.axes[a].kind == AxisSharding::Kind::split && cand.axes[a].dim == static_cast<int>(d)) n *= mesh_[a];
    if (tensor.shape[d] % n != 0) continue;
    bool match = true;
    for (int64_t i = 0; i < factor_ && match; ++i) {
      const std::optional<Box> &b = need(o, oc, i)[slot];
      match = b && *b == shard_region(tensor.shape, cand, i);
    }
    if (match) return cand;
  }
  return s;
}

const Box &StepModel::own(TensorId t, int oc, int64_t index) {
  std::vector<std::vector<Box>> &per_choice = own_[static_cast<size_t>(t)];
  if (per_choice.empty()) per_choice.resize(choices(owner_[static_cast<size_t>(t)]).size());
  std::vector<Box> &boxes = per_choice[static_cast<size_t>(oc)];
  if (boxes.empty()) {
    Sharding s = owned_sharding(t, oc);
    for (int64_t i = 0; i < factor_; ++i) boxes.push_back(shard_region(g_.tensor(t).shape, s, i));
  }
  return boxes[static_cast<size_t>(index)];
}

const std::vector<int64_t> &StepModel::fetch(int e, int oc, int cc) {
  const Edge &edge = edges_[static_cast<size_t>(e)];
  std::vector<std::vector<int64_t>> &memo = fetch_[static_cast<size_t>(e)];
  size_t width = choices(edge.consumer).size();
  if (memo.empty()) memo.resize(choices(edge.owner).size() * width);
  std::vector<int64_t> &elems = memo[static_cast<size_t>(oc) * width + static_cast<size_t>(cc)];
  if (!elems.empty()) return elems;
  for (int64_t i = 0; i < factor_; ++i) {
    const std::optional<Box> &b = need(edge.consumer, cc, i)[static_cast<size_t>(edge.slot)];
    elems.push_back(b ? box_volume(*b) - box_overlap(*b, own(edge.tensor, oc, i)) : 0);
  }
  return elems;
}

int64_t StepModel::edge_cost(int e, int oc, int cc) {
  const Edge &edge = edges_[static_cast<size_t>(e)];
  std::vector<int64_t> &memo = edge_cost_[static_cast<size_t>(e)];
  size_t width = choices(edge.consumer).size();
  if (memo.empty()) memo.assign(choices(edge.owner).size() * width, kUnknown);
  int64_t &slot = memo[static_cast<size_t>(oc) * width + static_cast<size_t>(cc)];
  if (slot != kUnknown) return slot;
  int64_t elems = 0;
  for (int64_t n : fetch(e, oc, cc)) elems += n;
  slot = elems * dtype_size(g_.tensor(edge.tensor).dtype) * groups_ - reduce_scatter_credit(edge, oc, cc);
  return slot;
}

int64_t StepModel::Reads::add(int e, int oc, int cc) {
  const Edge &edge = m_.edges_[static_cast<size_t>(e)];
  TensorId t = edge.tensor;
  if (m_.reads_[static_cast<size_t>(t)] < 2) return m_.edge_cost(e, oc, cc);  // nothing to reuse
  if (seeded_.insert(t).second) {
    // The owner's own reads of t (a param its update reads, a source its first reader owns) are unary()'s.
    const Op &op = m_.g_.op(edge.owner);
    for (size_t s = 0; s < op.inputs.size(); ++s)
      if (op.inputs[s] == t)
        for (int64_t i = 0; i < m_.factor_; ++i) {
          int id = m_.need_id(edge.owner, oc, i, s);
          if (id >= 0) seen_.emplace(t, i, id);
        }
  }
  const std::vector<int64_t> &fetched = m_.fetch(e, oc, cc);
  int64_t elems = 0, reused = 0;
  for (int64_t i = 0; i < m_.factor_; ++i) {
    int id = m_.need_id(edge.consumer, cc, i, static_cast<size_t>(edge.slot));
    if (id < 0) continue;
    if (seen_.emplace(t, i, id).second)
      elems += fetched[static_cast<size_t>(i)];
    else
      reused += fetched[static_cast<size_t>(i)];
  }
  // edge_cost less what is reused (its reduce-scatter credit included).
  return m_.edge_cost(e, oc, cc) - reused * dtype_size(m_.g_.tensor(t).dtype) * m_.groups_;
}

int64_t StepModel::reduce_scatter_credit(const Edge &edge, int oc, int cc) {
  const Tensor &t = g_.tensor(edge.tensor);
  // A tensor with other readers would leave them to fetch from the blocks: no credit then (the model stays
  // pairwise).
  if (t.producer != edge.owner || t.dtype != DType::f32 || sole_reader_[static_cast<size_t>(edge.tensor)] != edge.consumer)
    return 0;
  const Op &op = g_.op(edge.owner);
  size_t k = static_cast<size_t>(std::find(op.outputs.begin(), op.outputs.end(), edge.tensor) - op.outputs.begin());
  Sharding s = implied_sharding(op, descs_[static_cast<size_t>(edge.owner)],
                                config(edge.owner, choices(edge.owner)[static_cast<size_t>(oc)]), k);
  int64_t n = 1;
  for (size_t a = 0; a < s.axes.size(); ++a)
    if (s.axes[a].kind == AxisSharding::Kind::partial) n *= s.mesh[a];
  if (n < 2) return 0;
  // Codegen reduces the tensor by one collective per group of devices differing only along its partial axes: a
  // reduce-scatter when the reader's boxes tile the shard. The group of device 0 stands for all of them.
  const Op &reader = g_.op(edge.consumer);
  ParallelConfig rc = config(edge.consumer, choices(edge.consumer)[static_cast<size_t>(cc)]);
  Box whole = shard_region(t.shape, s, 0);
  std::vector<Box> blocks;
  for (int64_t i = 0; i < group_size_; ++i) {
    std::vector<int64_t> at = mesh_coords(mesh_, i);
    bool member = true;
    for (size_t a = 0; a < s.axes.size(); ++a)
      member = member && (s.axes[a].kind == AxisSharding::Kind::partial || at[a] == 0);
    if (!member) continue;
    std::optional<Box> b = i < factor_ ? need(edge.consumer, cc, i)[static_cast<size_t>(edge.slot)]
                                       : op_input_regions(reader, descs_[static_cast<size_t>(edge.consumer)], rc,
                                                       i)[static_cast<size_t>(edge.slot)];
    if (!b) return 0;
    blocks.push_back(*b);
  }
  if (!tiles(blocks, whole)) return 0;
  // unary() charged a ring all-reduce (2(n-1)/n of the shard per device); a reduce-scatter moves (n-1) blocks.
  int64_t elem = dtype_size(t.dtype);
  return group_size_ * 2 * (n - 1) * box_volume(whole) * elem / n - group_size_ / n * (n - 1) * box_volume(whole) * elem;
}

int64_t StepModel::unary(OpId o, int c) {
  std::vector<int64_t> &memo = unary_[static_cast<size_t>(o)];
  if (memo.empty()) memo.assign(choices(o).size(), kUnknown);
  if (memo[static_cast<size_t>(c)] != kUnknown) return memo[static_cast<size_t>(c)];
  const Op &op = g_.op(o);
  ParallelConfig cfg = config(o, choices(o)[static_cast<size_t>(c)]);
  int64_t bytes = 0;
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    if (op.outputs[k] == kNoTensor) continue;
    Sharding s = implied_sharding(op, descs_[static_cast<size_t>(o)], cfg, k);
    // One ring all-reduce over the product of the partial axes (edge_cost credits a reduce-scatter into the first
    // reader's blocks).
    const Tensor &t = g_.tensor(op.outputs[k]);
    int64_t n = 1;
    for (size_t a = 0; a < s.axes.size(); ++a)
      if (s.axes[a].kind == AxisSharding::Kind::partial) n *= s.mesh[a];
    if (n > 1) bytes += group_size_ * 2 * (n - 1) * box_volume(shard_region(t.shape, s, 0)) * dtype_size(t.dtype) / n;
  }
  // Sources this op owns and reads itself.
  for (size_t s = 0; s < op.inputs.size(); ++s) {
    TensorId t = op.inputs[s];
    if (t == kNoTensor || owner_[static_cast<size_t>(t)] != o) continue;
    int64_t elems = 0;
    for (int64_t i = 0; i < factor_; ++i) {
      const std::optional<Box> &b = need(o, c, i)[s];
      if (b) elems += box_volume(*b) - box_overlap(*b, own(t, c, i));
    }
    bytes += elems * dtype_size(g_.tensor(t).dtype) * groups_;
  }
  memo[static_cast<size_t>(c)] = bytes;
  return bytes;
}

void StepModel::commit(const std::vector<int> &choice, PartialPlan &pp) {
  // Everything is read before `pp` (which this model may alias) changes.
  std::vector<AxisSharding> axes(static_cast<size_t>(g_.num_tensors()));
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    OpId o = owner_[static_cast<size_t>(t)];
    if (g_.tensor(t).producer == kNoOp && o != kNoOp)
      axes[static_cast<size_t>(t)] = owned_sharding(t, choice[static_cast<size_t>(o)]).axes.back();
  }
  for (TensorId t = 0; t < g_.num_tensors(); ++t)
    if (g_.tensor(t).producer == kNoOp) pp.source_axes[static_cast<size_t>(t)].push_back(axes[static_cast<size_t>(t)]);
  for (OpId o = 0; o < g_.num_ops(); ++o)
    pp.op_vars[static_cast<size_t>(o)].push_back(choices(o)[static_cast<size_t>(choice[static_cast<size_t>(o)])]);
  pp.mesh.push_back(factor_);
}

int64_t StepModel::cost_given(OpId o, int c, const std::vector<int> &choice) {
  int64_t cost = unary(o, c);
  for (int e : edges_of(o)) {
    const Edge &edge = edges_[static_cast<size_t>(e)];
    OpId other = edge.owner == o ? edge.consumer : edge.owner;
    int oc = choice[static_cast<size_t>(other)];
    if (oc < 0) continue;
    cost += edge.owner == o ? edge_cost(e, c, oc) : edge_cost(e, oc, c);
  }
  return cost;
}

}  // namespace cleave::plan
