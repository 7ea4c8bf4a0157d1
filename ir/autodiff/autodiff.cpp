// Reverse-mode differentiation over the IR: walks the ops between the xs and y backwards, calling each kind's rule
// (grad_rules.cpp) and summing the gradient contributions of tensors read by several ops.
#include "ir/autodiff/autodiff.h"

#include <algorithm>
#include <functional>

#include "ir/autodiff/grad_context.h"
#include "ir/describe/batch_dims.h"
#include "ir/error.h"
#include "ir/shape_rules.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

using autodiff_detail::Differentiability;
using autodiff_detail::GradContext;

/** One Slice's share of its input's gradient, kept as its dY until the input's total is asked for. */
struct SlicePart {
  OpId slice;
  TensorId dy;
  int64_t start;  // along the tiled axis
};

/** Forward tensors whose readers are all unit-step Slices, of outputs that need gradients, that tile one axis (torch's
 *  q, k and v taken from one projection, chunk and split): tensor -> {axis, number of Slices}. Their gradient is the
 *  Concat of the Slices' gradients along that axis, where zero-padded SliceGrads summed by Adds would write every
 *  element once per Slice. */
std::map<TensorId, std::pair<int64_t, size_t>> tiled_by_slices(const Graph &g,
                                                                const std::function<bool(TensorId)> &active) {
  std::map<TensorId, std::pair<int64_t, size_t>> out;
  std::vector<std::vector<OpId>> readers = g.all_consumers();
  for (TensorId t = 0; t < static_cast<TensorId>(readers.size()); ++t) {
    const std::vector<OpId> &rs = readers[static_cast<size_t>(t)];
    if (rs.size() < 2 || !active(t)) continue;
    const Shape &shape = g.tensor(t).shape;
    int64_t axis = -1;
    std::vector<std::pair<int64_t, int64_t>> spans;  // [start, end) along axis
    bool ok = true;
    for (OpId r : rs) {
      const Op &op = g.op(r);
      if (op.kind != OpKind::Slice || !active(op.output(0))) {
        ok = false;
        break;
      }
      std::vector<SliceDim> dims = resolve_slice(op, shape);
      int64_t cut = -1;
      for (size_t d = 0; d < dims.size() && ok; ++d) {
        bool whole = dims[d].step == 1 && dims[d].start == 0 && dims[d].size == shape[d];
        if (whole) continue;
        if (dims[d].step != 1 || dims[d].size == 0 || cut >= 0) ok = false;
        cut = static_cast<int64_t>(d);
      }
      if (!ok || cut < 0 || (axis >= 0 && cut != axis)) {
        ok = false;
        break;
      }
      axis = cut;
      const SliceDim &sd = dims[static_cast<size_t>(cut)];
      spans.emplace_back(sd.start, sd.start + sd.size);
    }
    if (!ok) continue;
    std::sort(spans.begin(), spans.end());
    int64_t next = 0;
    for (const auto &[begin, end] : spans) {
      if (begin != next) ok = false;
      next = end;
    }
    if (ok && next == shape[static_cast<size_t>(axis)]) out[t] = {axis, rs.size()};
  }
  return out;
}

/** Collects the gradient contributions of each tensor; sums them with Add when first needed. */
class Accumulator {
 public:
  Accumulator(Graph &g, std::map<TensorId, std::pair<int64_t, size_t>> tiled)
      : g_(g), parts_(static_cast<size_t>(g.num_tensors())), tiled_(std::move(tiled)) {}

  void add(TensorId t, TensorId grad) { parts_.at(static_cast<size_t>(t)).push_back(grad); }
  bool has(TensorId t) const { return !parts_.at(static_cast<size_t>(t)).empty() || slices_.count(t); }
  /** Whether the gradient of Slice `op` is a part of its input's Concat (tiled_by_slices). */
  bool concatenates(const Op &op) const { return op.kind == OpKind::Slice && tiled_.count(op.input(0)); }
  void add_slice(OpId slice, TensorId dy) {
    const Op &op = g_.op(slice);
    int64_t axis = tiled_.at(op.input(0)).first;
    int64_t start = resolve_slice(op, g_.tensor(op.input(0)).shape)[static_cast<size_t>(axis)].start;
    slices_[op.input(0)].push_back({slice, dy, start});
  }

  /** The total gradient of `t` (kNoTensor if none). The Adds belong to t's producer, or for a source tensor to its
   *  first reader, as the gradient they finish is that op's. */
  TensorId total(TensorId t) {
    std::vector<TensorId> &p = parts_.at(static_cast<size_t>(t));
    auto it = slices_.find(t);
    if (it == slices_.end() && p.size() <= 1) return p.empty() ? kNoTensor : p[0];
    OpId group = g_.tensor(t).producer;
    if (group == kNoOp) group = g_.consumers(t).front();
    if (it != slices_.end()) {
      std::vector<SlicePart> slices = std::move(it->second);
      slices_.erase(it);
      join_slices(t, group, slices, p);
    }
    if (p.size() == 1) return p[0];
    TensorId sum = p[0];
    for (size_t i = 1; i < p.size(); ++i) sum = emit(OpKind::Add, {sum, p[i]}, {}, t, group);
    p = {sum};
    return sum;
  }

 private:
  /** Every Slice's gradient present: their Concat. Some missing (an output with no gradient after all): each a
   *  SliceGrad, as grad_Slice emits it, summed with the rest. */
  void join_slices(TensorId t, OpId group, std::vector<SlicePart> &slices, std::vector<TensorId> &p) {
    if (slices.size() == tiled_.at(t).second) {
      std::sort(slices.begin(), slices.end(), [](const SlicePart &a, const SlicePart &b) { return a.start < b.start; });
      std::vector<TensorId> ins;
      for (const SlicePart &s : slices) ins.push_back(s.dy);
      p.push_back(emit(OpKind::Concat, ins, {{"axis", tiled_.at(t).first}}, t, group));
      return;
    }
    for (const SlicePart &s : slices) p.push_back(emit(OpKind::SliceGrad, {s.dy}, g_.op(s.slice).attrs, t, s.slice));
  }

  /** An op of `group` (phase backward) with one output of t's type, named `<group op>.grad` / `<t>.grad`. */
  TensorId emit(OpKind kind, std::vector<TensorId> ins, AttrMap attrs, TensorId t, OpId group) {
    Op op;
    op.name = g_.fresh_op_name(g_.op(group).name + ".grad");
    op.kind = kind;
    op.inputs = std::move(ins);
    op.attrs = std::move(attrs);
    const Tensor &tt = g_.tensor(t);
    TensorId out = g_.add_tensor(g_.fresh_tensor_name(tt.name + ".grad"), tt.dtype, Shape(tt.shape), Role::grad);
    op.outputs = {out};
    op.phase = Phase::backward;
    op.group = group;
    g_.add_op(std::move(op));
    return out;
  }

  Graph &g_;
  std::vector<std::vector<TensorId>> parts_;
  std::map<TensorId, std::pair<int64_t, size_t>> tiled_;
  std::map<TensorId, std::vector<SlicePart>> slices_;
};

}  // namespace

std::map<TensorId, TensorId> append_gradients(Graph &g, TensorId y, const std::vector<TensorId> &xs,
                                              TensorId seed) {
  CLEAVE_CHECK(y >= 0 && y < g.num_tensors(), "bad y");
  const int num_fwd_ops = g.num_ops();
  const size_t nt = static_cast<size_t>(g.num_tensors());
  // A tensor is differentiated iff it is float, depends on some x and y depends on it.
  std::vector<char> from_x(nt, 0), to_y(nt, 0);
  for (TensorId x : xs)
    if (is_float(g.tensor(x).dtype)) from_x[static_cast<size_t>(x)] = 1;
  for (OpId i = 0; i < num_fwd_ops; ++i) {
    const Op &op = g.op(i);
    bool reached = std::any_of(op.inputs.begin(), op.inputs.end(),
                               [&](TensorId t) { return t != kNoTensor && from_x[static_cast<size_t>(t)]; });
    if (!reached) continue;
    for (TensorId t : op.outputs)
      if (t != kNoTensor && is_float(g.tensor(t).dtype)) from_x[static_cast<size_t>(t)] = 1;
  }
  to_y[static_cast<size_t>(y)] = 1;
  for (OpId i = num_fwd_ops - 1; i >= 0; --i) {
    const Op &op = g.op(i);
    bool feeds = std::any_of(op.outputs.begin(), op.outputs.end(),
                             [&](TensorId t) { return t != kNoTensor && to_y[static_cast<size_t>(t)]; });
    if (!feeds) continue;
    for (TensorId t : op.inputs)
      if (t != kNoTensor) to_y[static_cast<size_t>(t)] = 1;
  }
  auto active = [&](TensorId t) {
    return t != kNoTensor && t < static_cast<TensorId>(nt) && from_x[static_cast<size_t>(t)] &&
           to_y[static_cast<size_t>(t)];
  };
  std::map<TensorId, TensorId> result;
  if (!active(y)) return result;

  const Tensor &yt = g.tensor(y);
  if (seed == kNoTensor) {
    Tensor ones;
    ones.name = g.fresh_tensor_name(yt.name + ".grad.seed");
    ones.dtype = yt.dtype;
    ones.shape = yt.shape;
    ones.role = Role::constant;
    ones.data = encode_doubles(yt.dtype, std::vector<double>(static_cast<size_t>(num_elements(yt.shape)), 1.0));
    seed = g.add_tensor(std::move(ones));
  } else {
    CLEAVE_CHECK(g.tensor(seed).shape == yt.shape, "seed shape ", shape_str(g.tensor(seed).shape), " vs y ",
                 shape_str(yt.shape));
  }

  // Rules for ops on time-major activations keep the batch apart (grad_MatMul).
  const std::vector<int> batch = describe::batch_dims(g);
  Accumulator acc(g, tiled_by_slices(g, active));
  acc.add(y, seed);
  for (OpId i = num_fwd_ops - 1; i >= 0; --i) {
    std::vector<bool> need;
    bool any_need = false;
    for (TensorId t : g.op(i).inputs) {
      need.push_back(active(t));
      any_need = any_need || need.back();
    }
    if (!any_need) continue;
    std::vector<TensorId> dy;
    bool any_dy = false;
    for (TensorId t : std::vector<TensorId>(g.op(i).outputs)) {
      dy.push_back(t != kNoTensor && acc.has(t) ? acc.total(t) : kNoTensor);
      any_dy = any_dy || dy.back() != kNoTensor;
    }
    if (!any_dy) continue;
    const Op &op = g.op(i);
    if (acc.concatenates(op)) {
      acc.add_slice(i, dy[0]);
      continue;
    }
    const autodiff_detail::GradRule &rule = autodiff_detail::grad_rule(op.kind);
    if (rule.kind != Differentiability::differentiable)
      CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): no gradient rule, but the loss ",
                        "depends on it through a float input");
    std::vector<TensorId> inputs = op.inputs;
    std::vector<TensorId> dx(inputs.size(), kNoTensor);
    GradContext ctx(g, i, std::move(dy), need, batch);
    rule.fn(ctx, dx);
    for (size_t k = 0; k < inputs.size(); ++k)
      if (need[k] && dx[k] != kNoTensor) acc.add(inputs[k], dx[k]);
  }

  for (TensorId x : xs) {
    if (result.count(x) || !acc.has(x)) continue;
    TensorId total = acc.total(x);
    if (g.tensor(total).role != Role::grad) {
      // x == y, or the seed passed straight through: give the caller a grad tensor of its own.
      Op op;
      op.name = g.fresh_op_name(g.tensor(x).name + ".grad");
      op.kind = OpKind::Identity;
      op.inputs = {total};
      const Tensor &xt = g.tensor(x);
      TensorId copy = g.add_tensor(g.fresh_tensor_name(xt.name + ".grad"), xt.dtype, xt.shape, Role::grad);
      op.outputs = {copy};
      op.phase = Phase::backward;
      OpId producer = g.tensor(x).producer;
      op.group = producer != kNoOp ? producer : g.consumers(x).empty() ? kNoOp : g.consumers(x).front();
      g.add_op(std::move(op));
      total = copy;
    }
    result[x] = total;
  }
  return result;
}

}  // namespace cleave
