#include "ir/autocast.h"

#include <map>
#include <utility>
#include <vector>

#include "ir/error.h"

namespace cleave {
namespace {

bool lower_precision(OpKind k, DType low) {
  return k == OpKind::MatMul || k == OpKind::Gemm || k == OpKind::Conv || k == OpKind::ConvTranspose ||
         (low == DType::f16 && k == OpKind::PRelu);
}

/** Ops that compute in and give float32 whatever their inputs (autocast's fp32 lists). */
bool float32_only(OpKind k, DType low) {
  if (k == OpKind::SoftmaxCrossEntropyLoss || k == OpKind::NegativeLogLikelihoodLoss) return true;
  if (low != DType::f16) return false;
  switch (k) {
    case OpKind::Exp: case OpKind::Log: case OpKind::Pow: case OpKind::Reciprocal: case OpKind::Softplus:
    case OpKind::LayerNormalization: case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::ReduceSum:
    case OpKind::CumSum: case OpKind::Tan: case OpKind::Asin: case OpKind::Acos: case OpKind::Sinh: case OpKind::Cosh:
      return true;
    default:
      return false;
  }
}

/** Output 0 has input 0's type; the other outputs (running or saved statistics) stay float32. */
bool follows_input(OpKind k, DType low) {
  return k == OpKind::BatchNormalization || k == OpKind::InstanceNormalization ||
         (low == DType::bf16 && k == OpKind::LayerNormalization);
}

/** Ops whose outputs are values of their inputs (moved, selected, compared): a rounded input needs no rounding. */
bool keeps_values(OpKind k) {
  switch (k) {
    case OpKind::Relu: case OpKind::MaxPool: case OpKind::Reshape: case OpKind::Transpose: case OpKind::Slice:
    case OpKind::Concat: case OpKind::Split: case OpKind::Gather: case OpKind::Identity: case OpKind::Expand:
    case OpKind::Max: case OpKind::Min:
      return true;
    default:
      return false;
  }
}

/** The arithmetic ONNX decomposes torch's fused pointwise functions into (GELU as Div, Erf, Add, Mul, Mul; SiLU as
 *  Sigmoid, Mul): torch rounds the function's result once, so a chain of these rounds only where it ends. */
bool pointwise_arithmetic(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow: case OpKind::Sqrt:
    case OpKind::Neg: case OpKind::Exp: case OpKind::Log: case OpKind::Erf: case OpKind::Sigmoid: case OpKind::Tanh:
    case OpKind::Reciprocal:
      return true;
    default:
      return false;
  }
}

}  // namespace

int autocast(Graph &g, DType low) {
  CLEAVE_CHECK(low == DType::bf16 || low == DType::f16, "autocast to ", dtype_name(low));
  const OpKind round_kind = low == DType::bf16 ? OpKind::RoundToBf16 : OpKind::RoundToFp16;
  const std::string low_suffix = low == DType::bf16 ? ".bf16" : ".fp16";
  for (const Op &op : g.ops())
    CLEAVE_CHECK(op.phase == Phase::forward, "autocast runs on a forward graph; op ", op.name, " is not");
  Graph out;
  out.name = g.name;
  out.outputs = g.outputs;
  out.loss = g.loss;
  out.assigns = g.assigns;  // tensor ids are kept: BatchNorm's running-statistics updates stay as they are
  for (Tensor t : g.tensors()) {
    t.producer = kNoOp;
    out.add_tensor(std::move(t));
  }
  std::vector<bool> is_low(static_cast<size_t>(g.num_tensors()), false);
  std::vector<std::vector<OpId>> readers = g.all_consumers();
  std::vector<bool> is_output(static_cast<size_t>(g.num_tensors()), false);
  for (TensorId t : g.outputs) is_output[static_cast<size_t>(t)] = true;
  // A pointwise result whose only reader continues the chain stays unrounded (pointwise_arithmetic).
  // torch's Linear on more than 2 dims exports as MatMul (or Gemm between Reshapes) and an Add of the bias; torch
  // runs it as one low-precision op, rounding once after the bias. Such an Add rounds its bias and result like a GEMM,
  // and the product before it is not rounded.
  auto single_reader = [&](TensorId t) -> OpId {
    const std::vector<OpId> &r = readers[static_cast<size_t>(t)];
    return r.size() == 1 && !is_output[static_cast<size_t>(t)] ? r[0] : kNoOp;
  };
  std::vector<bool> bias_add(static_cast<size_t>(g.num_ops()), false), feeds_bias(bias_add.size(), false);
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op &op = g.op(id);
    if (op.kind != OpKind::MatMul && op.kind != OpKind::Gemm) continue;
    OpId at = single_reader(op.output(0));
    while (at != kNoOp && g.op(at).kind == OpKind::Reshape) at = single_reader(g.op(at).output(0));
    if (at == kNoOp || g.op(at).kind != OpKind::Add) continue;
    for (TensorId in : g.op(at).inputs) {
      const Tensor &t = g.tensor(in);
      if (t.role == Role::param && t.dtype == DType::f32 && t.shape.size() == 1) {
        bias_add[static_cast<size_t>(at)] = true;
        feeds_bias[static_cast<size_t>(id)] = true;
      }
    }
  }
  auto is_float32 = [&](TensorId t) { return t != kNoTensor && g.tensor(t).dtype == DType::f32; };
  // First the types: which float tensors torch would hold in low precision (the rules in autocast.h).
  auto lower = [&](OpId id) { return lower_precision(g.op(id).kind, low) || bias_add[static_cast<size_t>(id)]; };
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op &op = g.op(id);
    bool gives_low = false;
    if (lower(id)) {
      gives_low = true;
    } else if (follows_input(op.kind, low)) {
      gives_low = op.input(0) != kNoTensor && is_low[static_cast<size_t>(op.input(0))];
    } else if (!float32_only(op.kind, low)) {
      bool any = false, promoted = false;
      for (TensorId in : op.inputs) {
        if (!is_float32(in)) continue;
        if (is_low[static_cast<size_t>(in)]) any = true;
        else if (num_elements(g.tensor(in).shape) > 1) promoted = true;
      }
      gives_low = any && !promoted;
    }
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (gives_low && is_float32(op.outputs[k]) && !(follows_input(op.kind, low) && k > 0))
        is_low[static_cast<size_t>(op.outputs[k])] = true;
  }
  // A pointwise result read only by the next piece of a low-precision pointwise chain stays unrounded (but not a GEMM's
  // bias add: torch rounds its Linear's result before the next op).
  auto inside_chain = [&](OpId id, TensorId y) {
    OpId r = single_reader(y);
    return pointwise_arithmetic(g.op(id).kind) && !lower(id) && r != kNoOp && pointwise_arithmetic(g.op(r).kind) &&
           is_low[static_cast<size_t>(g.op(r).output(0))];
  };

  // Then the graph, with the rounding ops.
  std::map<TensorId, TensorId> rounded;  // float32 tensor -> its rounded copy, made once
  std::vector<OpId> new_id(static_cast<size_t>(g.num_ops()), kNoOp);
  int added = 0;
  // A new activation shaped like `like`, named after it (the fields are copied first: adding moves the tensors).
  auto add_like = [&](TensorId like, const char *suffix) {
    std::string name = out.fresh_tensor_name(out.tensor(like).name + suffix);
    DType dtype = out.tensor(like).dtype;
    Shape shape = out.tensor(like).shape;
    return out.add_tensor(std::move(name), dtype, std::move(shape), Role::activation);
  };
  auto round_op = [&](TensorId in, TensorId result, const std::string &name) {
    Op r;
    r.name = out.fresh_op_name(name);
    r.kind = round_kind;
    r.inputs = {in};
    r.outputs = {result};
    out.add_op(std::move(r));
    ++added;
  };
  for (OpId id = 0; id < g.num_ops(); ++id) {
    Op op = g.op(id);
    if (op.group != kNoOp) op.group = op.group == id ? kNoOp : new_id[static_cast<size_t>(op.group)];
    if (lower(id)) {
      for (TensorId &in : op.inputs) {
        if (!is_float32(in) || is_low[static_cast<size_t>(in)]) continue;
        auto it = rounded.find(in);
        if (it == rounded.end()) {
          TensorId copy = add_like(in, low_suffix.c_str());
          round_op(in, copy, out.tensor(in).name + ".to_" + low_suffix.substr(1));
          it = rounded.emplace(in, copy).first;
        }
        in = it->second;
      }
    }
    std::vector<std::pair<size_t, TensorId>> to_round;  // low-precision outputs this op may not hold as such
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      TensorId y = op.outputs[k];
      if (y == kNoTensor || !is_low[static_cast<size_t>(y)] || keeps_values(op.kind) || inside_chain(id, y) ||
          feeds_bias[static_cast<size_t>(id)])
        continue;
      op.outputs[k] = add_like(y, ".f32");
      to_round.emplace_back(k, y);
    }
    std::string name = op.name;
    new_id[static_cast<size_t>(id)] = out.add_op(std::move(op));
    for (auto &[k, y] : to_round) round_op(out.op(new_id[static_cast<size_t>(id)]).outputs[k], y, name + low_suffix);
  }
  g = std::move(out);
  return added;
}

}  // namespace cleave
