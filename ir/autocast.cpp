#include "ir/autocast.h"

#include <cmath>
#include <cstdint>
#include <cstring>
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

/** A Dropout that keeps every element as it is: ratio 0, or not training. */
bool identity_dropout(const Op &op) {
  return op.kind == OpKind::Dropout && (op.attr_int("training_mode", 0) == 0 || op.attr_float("ratio", 0.5) == 0.0);
}

/** Ops whose outputs are values of their inputs (moved, selected, compared): a rounded input needs no rounding. */
bool keeps_values(const Op &op) {
  if (identity_dropout(op)) return true;
  switch (op.kind) {
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


/** Whether `v` is a value of type `low` (bf16: a float whose low 16 bits are zero; f16: a binary16 normal or
 *  subnormal). */
bool holds_exactly(double v, DType low) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return false;
  if (low == DType::bf16) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return (u & 0xffffu) == 0;
  }
  float a = std::fabs(f);
  if (a > 65504.0f) return false;
  // binary16 has 11 significant bits above 2^-14 and a fixed step of 2^-24 below it.
  float step = a < 0x1p-14f ? 0x1p-24f : std::ldexp(1.0f, std::ilogb(a) - 10);
  return std::fmod(a, step) == 0.0f;
}

/** The inputs whose values an op's float outputs are made of, when the op only moves, selects or zeroes them (its
 *  other inputs are indices, masks or conditions); empty when its outputs may hold new values. */
std::vector<size_t> value_inputs(const Op &op) {
  if (identity_dropout(op)) return {0};  // its mask output is not float
  switch (op.kind) {
    case OpKind::Relu: case OpKind::Reshape: case OpKind::Transpose: case OpKind::Slice: case OpKind::SliceGrad:
    case OpKind::Split: case OpKind::Identity: case OpKind::Expand: case OpKind::Neg: case OpKind::MaxPool:
    case OpKind::ReluGrad: case OpKind::ClipGrad: case OpKind::Gather: case OpKind::GatherElements:
    case OpKind::GatherND: case OpKind::Pad: case OpKind::Clip:
      return {0};
    case OpKind::Where:
      return {1, 2};
    case OpKind::Concat: case OpKind::Max: case OpKind::Min: {
      std::vector<size_t> all(op.inputs.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      return all;
    }
    default:
      return {};
  }
}

/** Whether the values an op adds of its own (Pad's constant, Clip's bounds) are values of `low`. */
bool own_values_hold(const Op &op, DType low) {
  if (op.kind == OpKind::Pad)
    return (op.has_attr("mode") && op.attr_string("mode") != "constant") ||
           holds_exactly(op.attr_float("value", 0.0), low);
  if (op.kind == OpKind::Clip)
    return (!op.has_attr("min") || holds_exactly(op.attr_float("min"), low)) &&
           (!op.has_attr("max") || holds_exactly(op.attr_float("max"), low));
  return true;
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
      if (y == kNoTensor || !is_low[static_cast<size_t>(y)] || keeps_values(op) || inside_chain(id, y) ||
          feeds_bias[static_cast<size_t>(id)])
        continue;
      op.outputs[k] = add_like(y, ".f32");  // the name autodiff's GradContext::value_out recognises
      to_round.emplace_back(k, y);
    }
    std::string name = op.name;
    new_id[static_cast<size_t>(id)] = out.add_op(std::move(op));
    for (auto &[k, y] : to_round) round_op(out.op(new_id[static_cast<size_t>(id)]).outputs[k], y, name + low_suffix);
  }
  g = std::move(out);
  return added;
}

std::vector<DType> exact_low_types(const Graph &g) {
  std::vector<DType> exact(static_cast<size_t>(g.num_tensors()), DType::f32);
  for (const Op &op : g.ops()) {
    DType low = DType::f32;
    if (op.kind == OpKind::RoundToBf16) low = DType::bf16;
    if (op.kind == OpKind::RoundToFp16) low = DType::f16;
    if (low == DType::f32) {
      // Every value input must hold one type's values; an op without value inputs makes new ones.
      for (size_t i : value_inputs(op)) {
        TensorId in = op.input(i);
        if (in == kNoTensor) continue;
        DType t = exact[static_cast<size_t>(in)];
        if (t == DType::f32 || (low != DType::f32 && t != low)) {
          low = DType::f32;
          break;
        }
        low = t;
      }
      if (low != DType::f32 && !own_values_hold(op, low)) low = DType::f32;
    }
    if (low == DType::f32) continue;
    for (TensorId out : op.outputs)
      if (out != kNoTensor && g.tensor(out).dtype == DType::f32) exact[static_cast<size_t>(out)] = low;
  }
  return exact;
}

}  // namespace cleave
