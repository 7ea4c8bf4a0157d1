#pragma once
// The IR data model (DESIGN §2).
//
// Invariants (checked by verify()):
//  - Tensors and ops live in vectors and refer to each other by dense ids, never pointers.
//  - Tensor names are unique; op names are unique.
//  - Ops are in topological order: every input of op i is a source tensor (no producer) or an output of an op j < i.
//  - Every tensor has at most one producer. Sources are tensors of role input, label, param, optimizer_state or
//    constant; activations and grads always have a producer.
//  - Graph data (roles input and label: `is_data`) is fed per step; `sample_axis` is the dim that indexes samples,
//    0 <= sample_axis < rank (0 for every other tensor).
//  - Every shape is static; constants carry their data (dtype-native little-endian bytes). A param whose values were
//    not loaded may instead name where they are (`external`); its `data` is then empty (ir/tensor_data.h reads it).
//  - `group` of a forward op is itself; backward ops name the forward op they differentiate; update ops themselves.
//  - assigns bind state across steps: after a step, `dst` (a param/optimizer_state/input tensor) takes the value of
//    `src`. Optimizer updates and BatchNormalization running statistics are bound this way.
#include <optional>
#include <string>
#include <vector>

#include "ir/attr.h"
#include "ir/types.h"

namespace cleave {

/** Values kept in a file instead of memory (ONNX external data): `length` bytes at `offset` of `file`, an absolute
 *  canonical path (the frontend checked that it lies inside the model's directory). */
struct ExternalData {
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
  bool operator==(const ExternalData &) const = default;
};

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  Role role = Role::activation;
  /** Constants: always set. Params/optimizer state: initial values when loaded, else empty. */
  std::vector<uint8_t> data;
  /** Maintained by Graph::add_op. */
  OpId producer = kNoOp;
  /** Params only: where the initial values are when `data` was not loaded (planning never reads them). */
  std::optional<ExternalData> external;
  /** Optimizer state created by the training graph: starts at zero and `data` stays empty, so building the graph of
   *  a model with billions of params allocates nothing (Adam's moments of WResNet-152-10 would be 46 GB).
   *  tensor_bytes() gives the zeros when a consumer needs the bytes. */
  bool zero_init = false;
  /** Graph data only: the dim of `shape` that indexes samples (ONNX's symbolic batch dim, or --batch-axis). Data
   *  files are sample-major whatever it is; every planner splits data on this dim only. */
  int sample_axis = 0;
};

/** Inputs and labels: the tensors read from data files every step. */
inline bool is_data(const Tensor &t) { return t.role == Role::input || t.role == Role::label; }

/** A data tensor's shape without its sample axis: one sample's shape, as data files hold it after dim 0. */
inline Shape sample_shape(const Tensor &t) {
  Shape s = t.shape;
  if (!s.empty()) s.erase(s.begin() + t.sample_axis);
  return s;
}

struct Op {
  std::string name;
  OpKind kind = OpKind::Identity;
  /** kNoTensor marks an absent optional operand. */
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  AttrMap attrs;
  Phase phase = Phase::forward;
  OpId group = kNoOp;
  /** Set on the per-timestep ops a frontend unrolled from one recurrent node (frontend/translate_rnn.cpp): the
   *  node's name and the 0-based timestep (in processing order), so a coarsening pass can merge the same op of every
   *  timestep. Empty scope (step -1): not unrolled. Printed as `unroll=SCOPE t=K`. */
  std::string unroll_scope;
  int64_t unroll_step = -1;

  bool has_attr(const std::string &key) const { return attrs.count(key) != 0; }
  /** Typed getters: throw InternalError if the attribute is missing or of another type (the frontend and the
   *  parser normalise attributes, so a mismatch here is a bug). The two-argument forms return `def` if absent. */
  int64_t attr_int(const std::string &key) const;
  int64_t attr_int(const std::string &key, int64_t def) const;
  double attr_float(const std::string &key) const;
  double attr_float(const std::string &key, double def) const;
  const std::string &attr_string(const std::string &key) const;
  const std::vector<int64_t> &attr_ints(const std::string &key) const;
  std::vector<int64_t> attr_ints(const std::string &key, std::vector<int64_t> def) const;
  const std::vector<double> &attr_floats(const std::string &key) const;

  /** The i-th input, or kNoTensor if absent or beyond the list. */
  TensorId input(size_t i) const { return i < inputs.size() ? inputs[i] : kNoTensor; }
  TensorId output(size_t i) const { return i < outputs.size() ? outputs[i] : kNoTensor; }
};

struct Assign {
  TensorId dst = kNoTensor;
  TensorId src = kNoTensor;
};

/** Dynamic loss scaling, as torch.cuda.amp.GradScaler does it with its default factors. The backward pass is seeded
 *  with `scale` (a float32 optimizer_state tensor shaped like the loss, holding the current scale) instead of 1.
 *  Between the gradients and the updates (after --accumulate's averaging, before --clip-grad-norm): when any gradient
 *  element is not finite the step's updates are skipped (parameters and optimizer state keep their values; Adam's
 *  step count does not advance) and the scale is halved; otherwise the gradients are multiplied by 1/scale (in
 *  float32) and, after `growth_interval` such steps in a row, the scale doubles. The runtime and `cleave eval` own
 *  this logic (rt::TrainingRun::unscale_grads); the graph only carries the seed. */
struct LossScaling {
  TensorId scale = kNoTensor;
  int64_t growth_interval = 0;
};

class Graph {
 public:
  std::string name = "main";
  /** Graph outputs, in order. */
  std::vector<TensorId> outputs;
  /** The scalar loss of a training graph, or kNoTensor. */
  TensorId loss = kNoTensor;
  std::vector<Assign> assigns;
  /** Set when the loss is scaled (--precision fp16, --loss-scale); scale is kNoTensor otherwise. */
  LossScaling loss_scaling;

  /** Adds a tensor; throws UserError if the name is taken. */
  TensorId add_tensor(Tensor t);
  /** Convenience: adds a data-less tensor. */
  TensorId add_tensor(std::string name, DType dtype, Shape shape, Role role);
  /** Appends an op (so it runs after every op already present); records it as the producer of its outputs.
   *  Throws UserError if an op name is taken or an output already has a producer. Sets group to itself if unset. */
  OpId add_op(Op op);

  const Tensor &tensor(TensorId id) const { return tensors_.at(static_cast<size_t>(id)); }
  Tensor &tensor(TensorId id) { return tensors_.at(static_cast<size_t>(id)); }
  const Op &op(OpId id) const { return ops_.at(static_cast<size_t>(id)); }
  Op &op(OpId id) { return ops_.at(static_cast<size_t>(id)); }
  const std::vector<Tensor> &tensors() const { return tensors_; }
  const std::vector<Op> &ops() const { return ops_; }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  int num_ops() const { return static_cast<int>(ops_.size()); }

  std::optional<TensorId> find_tensor(const std::string &name) const;
  std::optional<OpId> find_op(const std::string &name) const;
  /** A tensor name not used yet: `base`, else `base.1`, `base.2`, ... (deterministic). */
  std::string fresh_tensor_name(const std::string &base) const;
  std::string fresh_op_name(const std::string &base) const;
  /** Ops reading `t`, in op order. */
  std::vector<OpId> consumers(TensorId t) const;
  /** consumers() of every tensor at once (one pass over the ops), indexed by TensorId. */
  std::vector<std::vector<OpId>> all_consumers() const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<Op> ops_;
  // Sorted name indices (deterministic, no hashing).
  std::map<std::string, TensorId> tensor_by_name_;
  std::map<std::string, OpId> op_by_name_;
};

}  // namespace cleave
