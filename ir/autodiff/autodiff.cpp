// Reverse-mode differentiation over the IR: walks the ops between the xs and y backwards, calling each kind's rule
// (grad_rules.cpp) and summing the gradient contributions of tensors read by several ops.
#include "ir/autodiff/autodiff.h"

#include <algorithm>

#include "ir/autodiff/grad_context.h"
#include "ir/describe/batch_dims.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

using autodiff_detail::Differentiability;
using autodiff_detail::GradContext;

/** Collects the gradient contributions of each tensor; sums them with Add when first needed. */
class Accumulator {
 public:
  explicit Accumulator(Graph &g) : g_(g), parts_(static_cast<size_t>(g.num_tensors())) {}

  void add(TensorId t, TensorId grad) { parts_.at(static_cast<size_t>(t)).push_back(grad); }
  bool has(TensorId t) const { return !parts_.at(static_cast<size_t>(t)).empty(); }

  /** The total gradient of `t` (kNoTensor if none). The Adds belong to t's producer, or for a source tensor to its
   *  first reader, as the gradient they finish is that op's. */
  TensorId total(TensorId t) {
    std::vector<TensorId> &p = parts_.at(static_cast<size_t>(t));
    if (p.empty()) return kNoTensor;
    if (p.size() == 1) return p[0];
    OpId group = g_.tensor(t).producer;
    if (group == kNoOp) group = g_.consumers(t).front();
    const Tensor &tt = g_.tensor(t);
    DType dt = tt.dtype;
    Shape shape = tt.shape;
    std::string tname = tt.name;
    TensorId sum = p[0];
    for (size_t i = 1; i < p.size(); ++i) {
      Op op;
      op.name = g_.fresh_op_name(g_.op(group).name + ".grad");
      op.kind = OpKind::Add;
      op.inputs = {sum, p[i]};
      sum = g_.add_tensor(g_.fresh_tensor_name(tname + ".grad"), dt, shape, Role::grad);
      op.outputs = {sum};
      op.phase = Phase::backward;
      op.group = group;
      g_.add_op(std::move(op));
    }
    p = {sum};
    return sum;
  }

 private:
  Graph &g_;
  std::vector<std::vector<TensorId>> parts_;
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
  Accumulator acc(g);
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
