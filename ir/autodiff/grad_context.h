#pragma once
// What a gradient rule sees and the small IR builder it emits backward ops with. Internal to ir/autodiff/.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave::autodiff_detail {

/** Multidirectional (numpy) broadcast of two shapes known to be compatible (the forward graph was verified). */
Shape broadcast_shape(const Shape &a, const Shape &b);

/** One forward op being differentiated. Every op emitted through it has phase backward and group = the forward op;
 *  op names are `<fwdop>.grad`, `<fwdop>.grad.1`, ...; tensors are role grad and named after the hint given, or
 *  `<fwdop>.grad.tmp` (made fresh). */
class GradContext {
 public:
  /** `batch`: the batch dim of each forward tensor (ir/describe/batch_dims.h), outliving the context. */
  GradContext(Graph &g, OpId fwd, std::vector<TensorId> dy, std::vector<bool> need, const std::vector<int> &batch);

  Graph &graph() { return g_; }
  OpId fwd_id() const { return fwd_; }
  /** The forward op. A reference into the graph's op vector: re-fetch it after emitting (the vector may grow). */
  const Op &fwd() const { return g_.op(fwd_); }
  TensorId in(size_t i) const { return fwd().input(i); }
  TensorId out(size_t i) const { return fwd().output(i); }
  /** Output slot i as a gradient that reads its values should see it: under --precision bf16/fp16 the rounded copy
   *  when the op's result is low precision, i.e. autocast rounds it (`<y>.f32` -> `<y>`, ir/autocast.cpp) and nothing
   *  else reads it (torch.autocast's op gives that low-precision tensor, and its backward reads it), so the unrounded
   *  result need not live until the backward pass; else out(i). */
  TensorId value_out(size_t i) const;
  /** By value: emitting adds tensors, which would invalidate a reference into the graph's tensor vector. */
  Shape shape(TensorId t) const { return g_.tensor(t).shape; }
  DType dtype(TensorId t) const { return g_.tensor(t).dtype; }
  /** Gradient of output slot i, or kNoTensor if nothing downstream needs it. */
  TensorId dy(size_t i) const { return i < dy_.size() ? dy_[i] : kNoTensor; }
  /** The dim of forward tensor t that carries the batch, or -1 (none, or t was made by a rule). */
  int batch_dim(TensorId t) const {
    return t >= 0 && static_cast<size_t>(t) < batch_.size() ? batch_[static_cast<size_t>(t)] : -1;
  }
  /** Whether input slot i needs a gradient (present, float, on a path from an x). */
  bool need(size_t i) const { return i < need_.size() && need_[i]; }
  /** The name hint for the gradient of input slot i: `<input>.grad`. */
  std::string grad_name(size_t i) const;

  /** Emits one op with one output of the given type. */
  TensorId emit(OpKind kind, std::vector<TensorId> ins, AttrMap attrs, DType dt, Shape shape,
                const std::string &hint = "");
  /** Emits one op with several outputs; outputs whose `present` flag is false are left absent. */
  std::vector<TensorId> emit_multi(OpKind kind, std::vector<TensorId> ins, AttrMap attrs,
                                   const std::vector<bool> &present, const std::vector<DType> &dts,
                                   const std::vector<Shape> &shapes, const std::vector<std::string> &hints);
  /** A constant of role constant filled with `v`. */
  TensorId constant(double v, DType dt, const Shape &shape = {});

  // Composite helpers over forward kinds. Each returns its input unchanged when there is nothing to do.
  TensorId unary(OpKind kind, TensorId x, const std::string &hint = "");
  TensorId binary(OpKind kind, TensorId a, TensorId b, const std::string &hint = "");
  TensorId reshape(TensorId x, const Shape &shape, const std::string &hint = "");
  TensorId expand(TensorId x, const Shape &shape, const std::string &hint = "");
  TensorId reduce_sum(TensorId x, const std::vector<int64_t> &axes, bool keepdims, const std::string &hint = "");
  /** Sums a tensor of a broadcast shape back to `shape` (ReduceSum with keepdims, then Reshape if ranks differ). */
  TensorId sum_to(TensorId x, const Shape &shape, const std::string &hint = "");
  TensorId transpose(TensorId x, const std::vector<int64_t> &perm, const std::string &hint = "");
  /** numpy matmul of operands of rank >= 2, each with its last two dims swapped first where ta / tb (MatMul's transA
   *  and transB: no transposed copy). */
  TensorId matmul(TensorId a, TensorId b, const std::string &hint = "", bool ta = false, bool tb = false);
  /** x * v (skipped when v == 1). */
  TensorId scale(TensorId x, double v, const std::string &hint = "");

 private:
  std::string tensor_name(const std::string &hint) const;

  Graph &g_;
  OpId fwd_;
  std::vector<TensorId> dy_;
  std::vector<bool> need_;
  const std::vector<int> &batch_;
};

/** A rule fills dx (one slot per forward input, pre-set to kNoTensor) for the inputs ctx.need() asks for. */
using GradFn = void (*)(GradContext &ctx, std::vector<TensorId> &dx);

enum class Differentiability : uint8_t {
  differentiable,      // has a rule
  non_differentiable,  // a forward kind whose outputs carry no gradient to its inputs
  no_rule,             // backward and update kinds: never differentiated
};

struct GradRule {
  Differentiability kind = Differentiability::no_rule;
  GradFn fn = nullptr;
};

/** The rule for one op kind (a table indexed by OpKind, generated from ops.def). */
const GradRule &grad_rule(OpKind kind);

}  // namespace cleave::autodiff_detail
