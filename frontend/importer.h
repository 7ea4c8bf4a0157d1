#pragma once
// Internal to the frontend: the state of one import (the IR graph being built, the ONNX name -> value table, constant
// folding) and the interface every op-family translator uses.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "frontend/node_attrs.h"
#include "frontend/onnx_import.h"
#include "ir/describe/batch_dims.h"
#include "ir/graph.h"
#include "ir/shape_rules.h"

namespace onnx {
class NodeProto;
}

namespace cleave {

/** One IR op to emit, operands named by ONNX names ("" = absent). */
struct OpSpec {
  OpKind kind = OpKind::Identity;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  AttrMap attrs;
  Phase phase = Phase::forward;
  /** False for ops whose result must not be computed at compile time (random, stateful). */
  bool foldable = true;
};

/** The node being translated. */
struct NodeCtx {
  const onnx::NodeProto &node;
  /** Unique IR op name (the node's name, or `<OpType>_<index>`). */
  std::string name;
  std::string op_type;
  std::string domain;
  int64_t opset = 0;
  /** `node "n" (Conv, opset 13)`. */
  std::string label;
  NodeAttrs attrs;
  /** Phase of the ops emitted for this node (forward in the main graph, update in a training algorithm). */
  Phase phase = Phase::forward;

  /** Input/output i's ONNX name, "" if absent or beyond the list. */
  std::string in(size_t i) const;
  std::string out(size_t i) const;
  size_t num_in() const;
  size_t num_out() const;
  [[noreturn]] void fail(const std::string &msg) const { attrs.fail(msg); }
};

class Importer {
 public:
  /** `reserved` holds every name of the ONNX model (tensors and nodes), so generated names never collide with a name
   *  defined later. */
  Importer(std::set<std::string> reserved_tensor_names, std::set<std::string> reserved_op_names);

  Graph g;
  /** The model was exported by PyTorch (producer_name "pytorch"): its BatchNormalization nodes keep torch's running
   *  variance (the batch's unbiased variance), which its exporter does not encode (ONNX's update uses the biased
   *  one). */
  bool from_torch = false;
  /** ONNX's inferred types by name (static shapes only), used to cross-check the IR's shape rules. */
  std::map<std::string, TensorType> onnx_types;
  /** Transposed operands not emitted (frontend/transposed_weights.h): XT -> X. A MatMul reading one reads X with its
   *  transA / transB (or, by a 2-D weight, is a Gemm with transB). */
  std::map<std::string, std::string> pending_transposes;
  /** Widening float Casts not emitted (frontend/class_test_casts.h): result -> input. The IsNaN and IsInf nodes
   *  that read the result test the input. */
  std::map<std::string, std::string> widened;
  /** The batch dim of each tensor of `g` so far (ir/describe/batch_dims.h), brought up to date where a translation
   *  needs it. */
  describe::BatchDims batch_dims;

  bool defined(const std::string &name) const { return slots_.count(name) != 0; }
  /** A value known at compile time: a constant, or a param whose data was loaded. nullptr otherwise. */
  const Tensor *known_value(const std::string &name) const;
  bool is_const(const std::string &name) const;
  TensorType type_of(const std::string &name, const NodeCtx &at) const;
  /** The graph tensor of `name`, adding a pending constant to the graph on first use. */
  TensorId use(const std::string &name, const NodeCtx *at = nullptr);
  /** Records a compile-time constant (role constant); it enters the graph only when used. */
  void define_const(Tensor t);
  /** Adds a source tensor (input, label, param, optimizer_state) to the graph now. */
  TensorId define_source(Tensor t);

  /** Emits `spec` as op `name`, or folds it into constants when every present input is a constant. Output types come
   *  from the IR's shape rules (cross-checked against ONNX's inference). Returns the output ids (kNoTensor where
   *  absent or folded). */
  std::vector<TensorId> emit(const OpSpec &spec, const std::string &name, const NodeCtx &at);

  std::string fresh_tensor_name(const std::string &base);
  std::string fresh_op_name(const std::string &base);

 private:
  struct Slot {
    TensorId id = kNoTensor;
    std::optional<Tensor> value;  // constants (pending or materialised)
  };
  void fold(const OpSpec &spec, const std::string &name, const NodeCtx &at);
  void check_against_onnx(const std::string &name, const TensorType &t, const NodeCtx &at) const;

  std::map<std::string, Slot> slots_;
  std::set<std::string> reserved_tensors_, reserved_ops_;
};

// ---- helpers for translators (importer.cpp) ----

/** The constant value of input i as int64s; fails naming the node and `what` if absent or not constant. */
std::vector<int64_t> const_ints(Importer &im, const NodeCtx &n, size_t i, const std::string &what);
/** Same, as doubles. */
std::vector<double> const_doubles(Importer &im, const NodeCtx &n, size_t i, const std::string &what);
/** Normalises an axis in [-rank, rank) to [0, rank); fails naming the node otherwise. */
int64_t norm_axis(const NodeCtx &n, int64_t axis, int64_t rank, const std::string &what = "axis");
/** The shape a Reshape node gives an input of shape `in` by its shape input `spec` (ONNX's 0 copies a dim unless
 *  `allowzero`, one -1 is inferred); fails naming the node where it cannot. */
Shape reshape_target(const NodeCtx &n, const Shape &in, const std::vector<int64_t> &spec, bool allowzero);
/** One IR op of kind `k` reading the node's inputs and writing its outputs, as named by ONNX. */
OpSpec same_operands(const NodeCtx &n, OpKind k);

// ---- op families: each translates one ONNX node (translate_*.cpp) ----
using Translator = void (*)(Importer &, const NodeCtx &);
/** The translator of (domain, op_type), or nullptr if unsupported. Domain "" is ai.onnx. */
Translator find_translator(const std::string &domain, const std::string &op_type);
/** Translates node `n` by its translator (which must exist); errors name the node, except the unsupported-node line
 *  (kUnsupportedNodeLine) of an If or a Loop or their subgraphs, which names its node itself. */
void translate_node(Importer &im, const NodeCtx &n);
/** How the error listing one unsupported node starts (model_loader.cpp's check_nodes_supported writes the list). */
inline constexpr const char *kUnsupportedNodeLine = "1 unsupported node: ";

void translate_elementwise(Importer &, const NodeCtx &);  // Add..Tanh, Identity, Where, comparisons, logic, Max/Min,
                                                          // trigonometric and hyperbolic functions
void translate_matmul(Importer &, const NodeCtx &);        // MatMul, Gemm
void translate_softmax(Importer &, const NodeCtx &);       // Softmax, LogSoftmax
void translate_loss(Importer &, const NodeCtx &);          // SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss
void translate_reshape(Importer &, const NodeCtx &);       // Reshape, Flatten, Squeeze, Unsqueeze
void translate_transpose(Importer &, const NodeCtx &);
void translate_concat(Importer &, const NodeCtx &);
void translate_split(Importer &, const NodeCtx &);
void translate_slice(Importer &, const NodeCtx &);
void translate_gather(Importer &, const NodeCtx &);
void translate_expand(Importer &, const NodeCtx &);
void translate_constant(Importer &, const NodeCtx &);      // Constant, ConstantOfShape
void translate_shape(Importer &, const NodeCtx &);         // Shape, Size (folded into constants)
void translate_range(Importer &, const NodeCtx &);         // folded into a constant
void translate_trilu(Importer &, const NodeCtx &);         // of constants only: folded
void translate_scatter_nd(Importer &, const NodeCtx &);    // of constants only: folded
void translate_reduce_prod(Importer &, const NodeCtx &);   // of constants: folded; else lower_reduce_prod
void translate_if(Importer &, const NodeCtx &);            // of a constant condition: the branch taken (control_flow.cpp)
void translate_loop(Importer &, const NodeCtx &);          // of a constant trip count: the body unrolled (control_flow.cpp)
void translate_cast(Importer &, const NodeCtx &);          // Cast, CastLike
void translate_pad(Importer &, const NodeCtx &);
void translate_conv(Importer &, const NodeCtx &);
void translate_pool(Importer &, const NodeCtx &);          // MaxPool, AveragePool, GlobalAveragePool
void translate_reduce(Importer &, const NodeCtx &);        // ReduceMean, ReduceSum, ReduceMax, ReduceMin
void translate_layer_norm(Importer &, const NodeCtx &);
void translate_batchnorm(Importer &, const NodeCtx &);
void translate_dropout(Importer &, const NodeCtx &);
void translate_random(Importer &, const NodeCtx &);        // RandomUniform(Like), RandomNormal(Like): RandomLike
void translate_optimizer(Importer &, const NodeCtx &);     // Momentum, Adam, Adagrad
void translate_gradient(Importer &, const NodeCtx &);
void translate_activation(Importer &, const NodeCtx &);    // LeakyRelu..Round, PRelu (translate_activations.cpp)
void translate_clip(Importer &, const NodeCtx &);
void translate_gelu(Importer &, const NodeCtx &);
void translate_sum_mean(Importer &, const NodeCtx &);      // Sum, Mean: chains of Add (then Div)
void translate_instance_norm(Importer &, const NodeCtx &);  // translate_image.cpp
void translate_conv_transpose(Importer &, const NodeCtx &);
void translate_resize(Importer &, const NodeCtx &);
// Lowered to compositions of IR ops (translate_lowered.cpp):
void translate_reduce_composite(Importer &, const NodeCtx &);  // ReduceSumSquare, ReduceL2, ReduceL1, ReduceLogSum(Exp)
void translate_lp_normalization(Importer &, const NodeCtx &);
void lower_reduce_prod(Importer &, const NodeCtx &);  // ReduceProd of run-time values
void translate_global_max_pool(Importer &, const NodeCtx &);
void translate_isnan_isinf(Importer &, const NodeCtx &);  // IsNaN, IsInf
void translate_shrink(Importer &, const NodeCtx &);
void translate_hardmax(Importer &, const NodeCtx &);
void translate_eye_like(Importer &, const NodeCtx &);     // folded to a constant
void translate_max_unpool(Importer &, const NodeCtx &);   // ScatterElements into zeros
void translate_det(Importer &, const NodeCtx &);          // the Leibniz sum over permutations, n <= 4
void translate_grid_sample(Importer &, const NodeCtx &);
void translate_lrn(Importer &, const NodeCtx &);
void translate_tile(Importer &, const NodeCtx &);
void translate_einsum(Importer &, const NodeCtx &);
void translate_depth_space(Importer &, const NodeCtx &);       // DepthToSpace, SpaceToDepth
// Kinds of their own (translate_index_ops.cpp):
void translate_arg_extreme(Importer &, const NodeCtx &);       // ArgMax, ArgMin
void translate_topk(Importer &, const NodeCtx &);
void translate_cumsum(Importer &, const NodeCtx &);
void translate_mod(Importer &, const NodeCtx &);
void translate_onehot(Importer &, const NodeCtx &);
void translate_gather_elements(Importer &, const NodeCtx &);
void translate_scatter_elements(Importer &, const NodeCtx &);
void translate_gather_nd(Importer &, const NodeCtx &);

}  // namespace cleave
