// Strategy discovery, the codegen-supported predicate and the derived communication of a plan (strategies.h).
#include "planner/search/strategies.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ir/error.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::SplitKind;



bool is_conv_kind(OpKind k) {
  return k == OpKind::Conv || k == OpKind::ConvGradData || k == OpKind::ConvGradFilter || k == OpKind::ConvTranspose;
}

bool splits_var(const ParallelConfig &c, const std::string &name) {
  return std::find(c.vars.begin(), c.vars.end(), name) != c.vars.end();
}

/** Concat, Split, Slice and SliceGrad: codegen derives the local geometry from the boxes only when the split dims
 *  are not the ones the op cuts or joins, i.e. the split var indexes a dim of the same extent in every operand and
 *  output. */
bool layout_split_ok(const Graph &g, const Op &op, const Description &d, const ParallelConfig &config) {
  for (const std::string &name : config.vars) {
    if (name.empty()) continue;
    int v = d.var(name);
    for (size_t k = 0; k < d.output_index.size(); ++k) {
      if (d.output_index[k].coef(v) == 0) continue;
      int64_t extent = d.output_shape[k];
      for (TensorId t : op.inputs)
        if (t != kNoTensor && (g.tensor(t).shape.size() != d.output_shape.size() || g.tensor(t).shape[k] != extent))
          return false;
      for (TensorId t : op.outputs)
        if (t != kNoTensor && (g.tensor(t).shape.size() != d.output_shape.size() || g.tensor(t).shape[k] != extent))
          return false;
    }
  }
  return true;
}

}  // namespace

std::vector<Strategy> discover_strategies(const Graph &g, const Op &op, int ways) {
  std::vector<Description> descs = describe::describe(g, op);
  const Description &d = descs[primary_output(op)];
  std::vector<Strategy> out;
  std::vector<int> all;
  for (int i = 0; i < ways; ++i) all.push_back(i);
  for (int v : describe::splittable_vars(d)) {
    const std::string &name = d.vars[static_cast<size_t>(v)].name;
    ParallelConfig c{all, {ways}, {name}};
    if (!config_problems(g, op, descs, c, ways).empty()) continue;
    Strategy s;
    s.var = name;
    s.kind = describe::split_kind(d, v);
    s.config = c;
    for (int w = 0; w < ways; ++w) {
      s.inputs.push_back(op_input_regions(g, op, c, w));
      std::vector<Box> outs;
      for (size_t k = 0; k < op.outputs.size(); ++k)
        outs.push_back(op.outputs[k] == kNoTensor ? Box{}
                                                  : op_region(descs[k], var_ranges(descs[k], c, w)).output);
      s.outputs.push_back(std::move(outs));
    }
    for (size_t slot = 0; slot < op.inputs.size() && !s.halo; ++slot)
      for (int a = 0; a + 1 < ways && !s.halo; ++a) {
        const auto &x = s.inputs[static_cast<size_t>(a)][slot], &y = s.inputs[static_cast<size_t>(a) + 1][slot];
        if (!x || !y || *x == *y) continue;
        // Neighbouring workers whose boxes differ yet overlap share a halo.
        if (!box_empty(box_intersect(*x, *y))) s.halo = true;
      }
    out.push_back(std::move(s));
  }
  return out;
}

bool codegen_supports(const Graph &g, const Op &op, const std::vector<Description> &descs,
                      const ParallelConfig &config) {
  bool split = std::any_of(config.vars.begin(), config.vars.end(), [](const std::string &v) { return !v.empty(); });
  if (!split) return true;
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    if (op.outputs[k] == kNoTensor) continue;
    Sharding s = implied_sharding(op, descs, config, k);
    for (const AxisSharding &a : s.axes)
      if (a.kind == AxisSharding::Kind::partial && !partial_ok(op.kind, g.tensor(op.outputs[k]).dtype)) return false;
  }
  const Description &d = descs[primary_output(op)];
  if (is_conv_kind(op.kind) && op.attr_int("group", 1) != 1 && (splits_var(config, "co") || splits_var(config, "ci")))
    return false;
  if (op.kind == OpKind::MaxPool && op.output(1) != kNoTensor) return false;
  if ((op.kind == OpKind::SoftmaxCrossEntropyLossGrad || op.kind == OpKind::NegativeLogLikelihoodLossGrad) &&
      splits_var(config, "c"))
    return false;
  if ((op.kind == OpKind::Concat || op.kind == OpKind::Split || op.kind == OpKind::Slice ||
       op.kind == OpKind::SliceGrad) &&
      !layout_split_ok(g, op, d, config))
    return false;
  // An input the unsplit op reads must be read by every shard (codegen/lower.cpp cannot hand a kernel a missing
  // operand); Reshape boxes must keep the same element order.
  ParallelConfig whole{{0}, {1}, {""}};
  std::vector<std::optional<Box>> unsplit = op_input_regions(op, descs, whole, 0);
  for (size_t i = 0; i < config.devices.size(); ++i) {
    std::vector<std::optional<Box>> in = op_input_regions(op, descs, config, static_cast<int64_t>(i));
    for (size_t s = 0; s < in.size(); ++s)
      if (!in[s] && unsplit[s]) return false;
    if (op.kind == OpKind::Reshape && in[0]) {
      Box out = op_region(d, var_ranges(d, config, static_cast<int64_t>(i))).output;
      if (!reshape_boxes_ok(*in[0], g.tensor(op.inputs[0]).shape, out, g.tensor(op.outputs[0]).shape)) return false;
    }
  }
  return true;
}

bool source_sharding_supported(const Tensor &t, const Sharding &s) {
  if (!is_data(t)) return true;
  for (const AxisSharding &a : s.axes)
    if (a.kind == AxisSharding::Kind::partial || (a.kind == AxisSharding::Kind::split && a.dim != t.sample_axis))
      return false;
  return true;
}

int64_t plan_comm_bytes(const Graph &g, const Plan &p) {
  std::vector<const Sharding *> sharding(static_cast<size_t>(g.num_tensors()), nullptr);
  for (const TensorEntry &e : p.tensors) sharding[static_cast<size_t>(*g.find_tensor(e.name))] = &e.sharding;
  // What every rank of every op reads: rank -> per input slot.
  std::vector<std::map<int, std::vector<std::optional<Box>>>> needs(static_cast<size_t>(g.num_ops()));
  for (const OpEntry &e : p.ops) {
    OpId o = *g.find_op(e.name);
    std::vector<Description> descs = describe::describe(g, g.op(o));
    for (size_t i = 0; i < e.config.devices.size(); ++i)
      needs[static_cast<size_t>(o)][e.config.devices[i]] =
          op_input_regions(g.op(o), descs, e.config, static_cast<int64_t>(i));
  }
  int64_t bytes = 0;
  // Partial tensors, reduced where their first reader reads them, by one collective per group of members that differ
  // only along the partial axes: a reduce-scatter into the reader's blocks when they tile the shard (f32), each rank
  // then owning its block; else a ring all-reduce (2(n-1)/n of the shard per member), every member owning the whole.
  std::map<std::pair<TensorId, int>, Box> owned;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Sharding &s = *sharding[static_cast<size_t>(t)];
    const Tensor &tensor = g.tensor(t);
    std::vector<size_t> axes;
    for (size_t a = 0; a < s.axes.size(); ++a)
      if (s.axes[a].kind == AxisSharding::Kind::partial) axes.push_back(a);
    if (axes.empty()) continue;
    std::vector<OpId> readers = g.consumers(t);
    const Op *reader = readers.empty() ? nullptr : &g.op(readers.front());
    size_t slot = reader ? static_cast<size_t>(std::find(reader->inputs.begin(), reader->inputs.end(), t) -
                                               reader->inputs.begin())
                         : 0;
    int64_t elem = dtype_size(tensor.dtype);
    std::map<std::vector<int64_t>, std::vector<int64_t>> groups;  // other coords -> member indices
    for (int64_t i = 0; i < static_cast<int64_t>(s.devices.size()); ++i) {
      std::vector<int64_t> c = mesh_coords(s.mesh, i);
      for (size_t a : axes) c[a] = 0;
      groups[c].push_back(i);
    }
    for (const auto &[key, members] : groups) {
      int64_t n = static_cast<int64_t>(members.size());
      if (n < 2) continue;
      Box whole = shard_region(tensor.shape, s, members[0]);
      std::vector<Box> blocks;
      for (int64_t i : members) {
        if (!reader) break;
        const auto &want = needs[static_cast<size_t>(readers.front())];
        auto it = want.find(s.devices[static_cast<size_t>(i)]);
        if (it != want.end() && it->second[slot]) blocks.push_back(*it->second[slot]);
      }
      if (tensor.dtype == DType::f32 && blocks.size() == members.size() && tiles(blocks, whole)) {
        for (size_t m = 0; m < members.size(); ++m) {
          bytes += (n - 1) * box_volume(blocks[m]) * elem;
          owned[{t, s.devices[static_cast<size_t>(members[m])]}] = blocks[m];
        }
      } else {
        bytes += n * 2 * (n - 1) * box_volume(whole) * elem / n;
      }
    }
  }
  // Reads: what a needed box lacks beyond the reader's own shard, fetched once per step per (rank, tensor, box), as
  // codegen assembles a box once and reuses it for every later reader of it.
  std::set<std::tuple<int, TensorId, std::string>> fetched;
  for (const OpEntry &e : p.ops) {
    OpId o = *g.find_op(e.name);
    const Op &op = g.op(o);
    for (const auto &[rank, need] : needs[static_cast<size_t>(o)]) {
      for (size_t slot = 0; slot < need.size(); ++slot) {
        if (!need[slot]) continue;
        TensorId t = op.inputs[slot];
        const Sharding &s = *sharding[static_cast<size_t>(t)];
        int64_t have = 0;
        auto mine = owned.find({t, rank});
        auto at = std::find(s.devices.begin(), s.devices.end(), rank);
        if (mine != owned.end())
          have = box_volume(box_intersect(*need[slot], mine->second));
        else if (at != s.devices.end())
          have = box_volume(box_intersect(*need[slot], shard_region(g.tensor(t).shape, s, at - s.devices.begin())));
        if (have == box_volume(*need[slot]) || !fetched.emplace(rank, t, box_str(*need[slot])).second) continue;
        bytes += (box_volume(*need[slot]) - have) * dtype_size(g.tensor(t).dtype);
      }
    }
  }
  return bytes;
}

}  // namespace cleave::plan
