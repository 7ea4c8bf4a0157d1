// example_op: one op of each kind with representative shapes and attributes, for `cleave describe KIND` and for
// the tests that loop over every kind.
#include <sstream>

#include "ir/describe/ops_util.h"

namespace cleave::describe {
namespace {

/** Builds a one-op graph: inputs are source tensors, output shapes come from the shape rules unless declared. */
class Example {
 public:
  explicit Example(OpKind kind) {
    op_.kind = kind;
    op_.name = std::string(op_kind_name(kind));
  }
  Example &in(const std::string &name, Shape shape, DType dt = DType::f32, Role role = Role::input) {
    op_.inputs.push_back(g_.add_tensor(name, dt, std::move(shape), role));
    return *this;
  }
  Example &attr(const std::string &key, Attr value) {
    op_.attrs[key] = std::move(value);
    return *this;
  }
  /** An output whose shape the shape rule derives. */
  Example &out(const std::string &name) {
    outs_.push_back(name);
    declared_.emplace_back();
    return *this;
  }
  /** An output whose shape the shape rule cannot derive (gradients of windows, slices, gathers). */
  Example &out(const std::string &name, Shape shape) {
    outs_.push_back(name);
    declared_.push_back(std::move(shape));
    return *this;
  }
  Graph build(Phase phase) {
    op_.phase = phase;
    for (size_t i = 0; i < outs_.size(); ++i)
      op_.outputs.push_back(g_.add_tensor(outs_[i], DType::f32, declared_[i].value_or(Shape{}), Role::activation));
    std::vector<TensorType> types = infer_output_types(g_, op_);
    for (size_t i = 0; i < outs_.size(); ++i) {
      Tensor &t = g_.tensor(op_.outputs[i]);
      t.dtype = types[i].dtype;
      t.shape = types[i].shape;
      t.role = phase == Phase::backward ? Role::grad : Role::activation;
    }
    g_.add_op(op_);
    for (TensorId t : op_.outputs) g_.outputs.push_back(t);
    return std::move(g_);
  }

 private:
  Graph g_;
  Op op_;
  std::vector<std::string> outs_;
  std::vector<std::optional<Shape>> declared_;
};

const std::vector<int64_t> kConvAttrsStrides{2, 2}, kPads{1, 1, 1, 1}, kKernel{3, 3};

Example conv_like(OpKind k) {
  Example e(k);
  e.attr("strides", kConvAttrsStrides).attr("pads", kPads).attr("dilations", std::vector<int64_t>{1, 1});
  e.attr("group", int64_t{1});
  return e;
}

Example pool_like(OpKind k) {
  Example e(k);
  e.attr("kernel_shape", kKernel).attr("strides", kConvAttrsStrides).attr("pads", kPads);
  return e;
}

Example slice_like(OpKind k) {
  Example e(k);
  e.attr("starts", std::vector<int64_t>{1, 0}).attr("ends", std::vector<int64_t>{7, 8});
  e.attr("axes", std::vector<int64_t>{0, 1}).attr("steps", std::vector<int64_t>{2, 1});
  return e;
}

/** The activation and rounding kinds (X) -> Y and their gradients (dY, X) -> dX, on a [4, 6] X. */
bool is_activation_grad(OpKind k) {
  switch (k) {
    case OpKind::ClipGrad: case OpKind::HardSigmoidGrad: case OpKind::HardSwishGrad: case OpKind::GeluGrad:
    case OpKind::LeakyReluGrad:
    case OpKind::EluGrad: case OpKind::SeluGrad: case OpKind::CeluGrad: case OpKind::SoftplusGrad:
    case OpKind::SoftsignGrad: case OpKind::ThresholdedReluGrad:
      return true;
    default:
      return false;
  }
}
Phase phase_of(OpKind k) { return is_activation_grad(k) ? Phase::backward : Phase::forward; }
Example activation(OpKind k) {
  Example e(k);
  if (is_activation_grad(k)) return std::move(e.in("dY", {4, 6}).in("X", {4, 6}).out("dX"));
  return std::move(e.in("X", {4, 6}).out("Y"));
}

}  // namespace

Graph example_op(OpKind kind) {
  using K = OpKind;
  const Phase fwd = Phase::forward, bwd = Phase::backward, upd = Phase::update;
  const Shape x4{8, 3, 16, 16}, y4{8, 16, 8, 8}, w4{16, 3, 3, 3}, p4{8, 3, 8, 8}, m2{4, 6};
  switch (kind) {
    case K::Gemm:
      return Example(kind).in("A", {4, 3}).in("B", {5, 3}).in("C", {5}).attr("transB", int64_t{1})
          .attr("alpha", 1.0).attr("beta", 1.0).out("Y").build(fwd);
    case K::MatMul: return Example(kind).in("A", {2, 4, 3}).in("B", {3, 5}).out("Y").build(fwd);
    case K::Add: case K::Sub: case K::Mul: case K::Div: case K::Pow:
      return Example(kind).in("A", m2).in("B", {6}).out("C").build(fwd);
    case K::Sqrt: case K::Neg: case K::Exp: case K::Log: case K::Erf: case K::Relu: case K::Sigmoid: case K::Tanh:
    case K::Identity:
    case K::Sin: case K::Cos: case K::Tan: case K::Asin: case K::Acos: case K::Atan: case K::Sinh: case K::Cosh:
    case K::Asinh: case K::Acosh: case K::Atanh:
      return Example(kind).in("X", m2).out("Y").build(fwd);
    case K::Softmax: case K::LogSoftmax:
      return Example(kind).in("X", m2).attr("axis", int64_t{1}).out("Y").build(fwd);
    case K::SoftmaxCrossEntropyLoss:
      return Example(kind).in("scores", {4, 10}).in("labels", {4}, DType::i64).attr("reduction", std::string("mean"))
          .out("loss").out("log_prob").build(fwd);
    case K::NegativeLogLikelihoodLoss:
      return Example(kind).in("input", {4, 10}).in("target", {4}, DType::i64).attr("reduction", std::string("mean"))
          .out("loss").build(fwd);
    case K::Reshape:
      return Example(kind).in("X", {8, 16, 4, 4}).attr("shape", std::vector<int64_t>{8, 256}).out("Y").build(fwd);
    case K::Transpose:
      return Example(kind).in("X", {2, 3, 4}).attr("perm", std::vector<int64_t>{0, 2, 1}).out("Y").build(fwd);
    case K::Expand:
      return Example(kind).in("X", {3, 1}).attr("shape", std::vector<int64_t>{2, 3, 4}).out("Y").build(fwd);
    case K::Concat:
      return Example(kind).in("X0", {2, 3}).in("X1", {2, 5}).attr("axis", int64_t{1}).out("Y").build(fwd);
    case K::Split:
      return Example(kind).in("X", {2, 8}).attr("axis", int64_t{1}).attr("split", std::vector<int64_t>{3, 5})
          .out("Y0").out("Y1").build(fwd);
    case K::Slice: return slice_like(kind).in("X", {8, 8}).out("Y").build(fwd);
    case K::Gather:
      return Example(kind).in("data", {10, 4}).in("indices", {2, 3}, DType::i64).attr("axis", int64_t{0})
          .out("Y").build(fwd);
    case K::Conv: return conv_like(kind).in("X", x4).in("W", w4).in("B", {16}).out("Y").build(fwd);
    case K::MaxPool:
      return pool_like(kind).attr("ceil_mode", int64_t{0}).in("X", x4).out("Y").out("Indices").build(fwd);
    case K::AveragePool:
      return pool_like(kind).attr("count_include_pad", int64_t{0}).in("X", x4).out("Y").build(fwd);
    case K::GlobalAveragePool: return Example(kind).in("X", x4).out("Y").build(fwd);
    case K::ReduceMean: case K::ReduceSum:
      return Example(kind).in("X", {2, 3, 4}).attr("axes", std::vector<int64_t>{1}).attr("keepdims", int64_t{1})
          .out("Y").build(fwd);
    case K::BatchNormalization:
      return Example(kind).in("X", x4).in("scale", {3}, DType::f32, Role::param).in("B", {3}, DType::f32, Role::param)
          .in("input_mean", {3}, DType::f32, Role::optimizer_state).in("input_var", {3}, DType::f32, Role::optimizer_state)
          .attr("epsilon", 1e-5).attr("momentum", 0.9).attr("training_mode", int64_t{1})
          .out("Y").out("running_mean").out("running_var").out("saved_mean").out("saved_invstd").build(fwd);
    case K::Dropout:
      return Example(kind).in("X", m2).attr("ratio", 0.5).attr("training_mode", int64_t{1}).attr("seed", int64_t{0})
          .out("Y").out("mask").build(fwd);
    case K::Reciprocal: return Example(kind).in("X", m2).out("Y").build(fwd);
    case K::RandomLike:
      return Example(kind).in("X", m2).attr("normal", int64_t{1}).attr("a", 0.0).attr("b", 1.0)
          .attr("seed", int64_t{0}).out("Y").build(fwd);
    case K::Where:
      return Example(kind).in("C", m2, DType::boolean).in("X", {6}).in("Y", {4, 1}).out("Z").build(fwd);
    case K::Cast: return Example(kind).in("X", m2).attr("to", std::string("f64")).out("Y").build(fwd);
    case K::Equal: case K::Less: case K::Greater: case K::LessOrEqual: case K::GreaterOrEqual:
      return Example(kind).in("A", m2).in("B", {6}).out("C").build(fwd);
    case K::Not: return Example(kind).in("X", m2, DType::boolean).out("Y").build(fwd);
    case K::And: case K::Or: case K::Xor:
      return Example(kind).in("A", m2, DType::boolean).in("B", {6}, DType::boolean).out("C").build(fwd);
    case K::Max: case K::Min: return Example(kind).in("X0", m2).in("X1", {6}).in("X2", {4, 1}).out("Y").build(fwd);
    case K::Pad:
      return Example(kind).in("X", m2).attr("pads", std::vector<int64_t>{1, 0, 2, -1}).attr("value", 0.5)
          .out("Y").build(fwd);
    case K::ReduceMax: case K::ReduceMin:
      return Example(kind).in("X", {2, 3, 4}).attr("axes", std::vector<int64_t>{1}).attr("keepdims", int64_t{1})
          .out("Y").build(fwd);
    case K::LayerNormalization:
      return Example(kind).in("X", {2, 3, 4}).in("scale", {4}, DType::f32, Role::param)
          .in("B", {4}, DType::f32, Role::param).attr("axis", int64_t{2}).attr("epsilon", 1e-5)
          .out("Y").out("mean").out("invstd").build(fwd);
    case K::InstanceNormalization:
      return Example(kind).in("X", x4).in("scale", {3}, DType::f32, Role::param).in("B", {3}, DType::f32, Role::param)
          .attr("epsilon", 1e-5).out("Y").out("mean").out("invstd").build(fwd);
    case K::InstanceNormalizationGrad:
      return Example(kind).in("dY", x4).in("X", x4).in("scale", {3}).in("mean", {8, 3}).in("invstd", {8, 3})
          .out("dX").out("dscale").out("dB").build(bwd);
    case K::ConvTranspose:
      return conv_like(kind).attr("output_padding", std::vector<int64_t>{1, 1}).in("X", y4)
          .in("W", {16, 3, 3, 3}, DType::f32, Role::param).in("B", {3}, DType::f32, Role::param).out("Y").build(fwd);
    case K::Resize: case K::ResizeGrad: {
      Example e(kind);
      e.attr("mode", std::string("linear")).attr("coordinate_transformation_mode", std::string("half_pixel"))
          .attr("nearest_mode", std::string("floor")).attr("scales", std::vector<double>{1, 1, 2, 2})
          .attr("sizes", std::vector<int64_t>{8, 3, 32, 32});
      if (kind == K::Resize) return e.in("X", x4).out("Y").build(fwd);
      return e.in("dY", {8, 3, 32, 32}).out("dX", x4).build(bwd);
    }
    case K::ArgMax: case K::ArgMin:
      return Example(kind).in("X", {2, 5, 3}).attr("axis", int64_t{1}).attr("keepdims", int64_t{1})
          .attr("select_last_index", int64_t{0}).out("Y").build(fwd);
    case K::TopKIndices:
      return Example(kind).in("X", {2, 5, 3}).attr("axis", int64_t{1}).attr("k", int64_t{3})
          .attr("largest", int64_t{1}).out("I").build(fwd);
    case K::CumSum:
      return Example(kind).in("X", m2).attr("axis", int64_t{1}).attr("exclusive", int64_t{0})
          .attr("reverse", int64_t{0}).out("Y").build(fwd);
    case K::Mod: return Example(kind).in("A", m2).in("B", {6}).attr("fmod", int64_t{1}).out("C").build(fwd);
    case K::OneHot:
      return Example(kind).in("indices", {4, 3}, DType::i64).in("values", {2}).attr("axis", int64_t{1})
          .attr("depth", int64_t{5}).out("Y").build(fwd);
    case K::GatherElements:
      return Example(kind).in("data", {4, 6}).in("indices", {3, 6}, DType::i64).attr("axis", int64_t{1})
          .out("Y").build(fwd);
    case K::ScatterElements:
      return Example(kind).in("data", {4, 6}).in("indices", {3, 2}, DType::i64).in("updates", {3, 2})
          .attr("axis", int64_t{1}).attr("reduction", std::string("add")).out("Y").build(fwd);
    case K::GatherND:
      return Example(kind).in("data", {2, 5, 4}).in("indices", {2, 3, 1}, DType::i64)
          .attr("batch_dims", int64_t{1}).out("Y").build(fwd);
    case K::Clip: case K::ClipGrad: return activation(kind).attr("min", -0.5).attr("max", 0.5).build(phase_of(kind));
    case K::HardSigmoid: case K::HardSigmoidGrad:
      return activation(kind).attr("alpha", 0.2).attr("beta", 0.5).build(phase_of(kind));
    case K::LeakyRelu: case K::LeakyReluGrad: return activation(kind).attr("alpha", 0.1).build(phase_of(kind));
    case K::Elu: case K::EluGrad: return activation(kind).attr("alpha", 1.5).build(phase_of(kind));
    case K::Selu: case K::SeluGrad:
      return activation(kind).attr("alpha", 1.67326319217681884765625)
          .attr("gamma", 1.05070102214813232421875).build(phase_of(kind));
    case K::Celu: case K::CeluGrad: return activation(kind).attr("alpha", 2.0).build(phase_of(kind));
    case K::ThresholdedRelu: case K::ThresholdedReluGrad:
      return activation(kind).attr("alpha", 0.3).build(phase_of(kind));
    case K::HardSwish: case K::HardSwishGrad: case K::Gelu: case K::GeluGrad: case K::Softplus: case K::SoftplusGrad:
    case K::Softsign:
    case K::SoftsignGrad: case K::Abs: case K::Sign: case K::Floor: case K::Ceil: case K::Round: case K::RoundToBf16:
    case K::RoundToFp16:
      return activation(kind).build(phase_of(kind));
    case K::PRelu: return Example(kind).in("X", m2).in("slope", {6}).out("Y").build(fwd);
    case K::PReluGrad:
      return Example(kind).in("dY", m2).in("X", m2).in("slope", {6}).out("dX").out("dslope").build(bwd);
    case K::LayerNormalizationGrad:
      return Example(kind).in("dY", {2, 3, 4}).in("X", {2, 3, 4}).in("scale", {4}).in("mean", {2, 3, 1})
          .in("invstd", {2, 3, 1}).attr("axis", int64_t{2}).out("dX").out("dscale").out("dB").build(bwd);
    case K::ReluGrad: case K::ErfGrad: case K::SinGrad: case K::CosGrad: case K::AsinGrad: case K::AcosGrad:
    case K::AtanGrad: case K::SinhGrad: case K::CoshGrad: case K::AsinhGrad: case K::AcoshGrad: case K::AtanhGrad:
      return Example(kind).in("dY", m2).in("X", m2).out("dX").build(bwd);
    case K::SigmoidGrad: case K::TanhGrad: case K::SqrtGrad: case K::TanGrad:
      return Example(kind).in("dY", m2).in("Y", m2).out("dX").build(bwd);
    case K::PowGrad: return Example(kind).in("dY", m2).in("A", m2).in("B", {6}).out("dA").out("dB").build(bwd);
    case K::SoftmaxGrad: case K::LogSoftmaxGrad:
      return Example(kind).in("dY", m2).in("Y", m2).attr("axis", int64_t{1}).out("dX").build(bwd);
    case K::SoftmaxCrossEntropyLossGrad:
      return Example(kind).in("dloss", {}).in("log_prob", {4, 10}).in("labels", {4}, DType::i64)
          .attr("reduction", std::string("mean")).out("dscores").build(bwd);
    case K::NegativeLogLikelihoodLossGrad:
      return Example(kind).in("dloss", {}).in("input", {4, 10}).in("target", {4}, DType::i64)
          .attr("reduction", std::string("mean")).out("dinput").build(bwd);
    case K::ConvGradData: return conv_like(kind).in("dY", y4).in("W", w4).out("dX", x4).build(bwd);
    case K::ConvGradFilter: return conv_like(kind).in("dY", y4).in("X", x4).out("dW", w4).build(bwd);
    case K::MaxPoolGrad: return pool_like(kind).in("dY", p4).in("X", x4).out("dX").build(bwd);
    case K::AveragePoolGrad:
      return pool_like(kind).attr("count_include_pad", int64_t{1}).in("dY", p4).out("dX", x4).build(bwd);
    case K::GlobalAveragePoolGrad: return Example(kind).in("dY", {8, 3, 1, 1}).out("dX", x4).build(bwd);
    case K::BatchNormalizationGrad:
      return Example(kind).in("dY", x4).in("X", x4).in("scale", {3}).in("saved_mean", {3}).in("saved_invstd", {3})
          .attr("epsilon", 1e-5).out("dX").out("dscale").out("dB").build(bwd);
    case K::DropoutGrad:
      return Example(kind).in("dY", m2).in("mask", m2, DType::boolean).attr("ratio", 0.5).out("dX").build(bwd);
    case K::SliceGrad: return slice_like(kind).in("dY", {3, 8}).out("dX", {8, 8}).build(bwd);
    case K::GatherGrad:
      return Example(kind).in("dY", {2, 3, 4}).in("indices", {2, 3}, DType::i64).attr("axis", int64_t{0})
          .out("ddata", {10, 4}).build(bwd);
    case K::GatherNDGrad:
      return Example(kind).in("dY", {2, 3, 4}).in("indices", {2, 3, 1}, DType::i64).attr("batch_dims", int64_t{1})
          .out("ddata", {2, 5, 4}).build(bwd);
    case K::SGDUpdate:
      return Example(kind).in("param", m2, DType::f32, Role::param).in("grad", m2).attr("lr", 0.1)
          .attr("weight_decay", 0.0).out("param'").build(upd);
    case K::MomentumUpdate:
      return Example(kind).in("param", m2, DType::f32, Role::param).in("grad", m2)
          .in("velocity", m2, DType::f32, Role::optimizer_state).attr("lr", 0.1).attr("momentum", 0.9)
          .attr("weight_decay", 0.0).attr("nesterov", int64_t{0}).out("param'").out("velocity'").build(upd);
    case K::AdamUpdate:
      return Example(kind).in("param", m2, DType::f32, Role::param).in("grad", m2)
          .in("m", m2, DType::f32, Role::optimizer_state).in("v", m2, DType::f32, Role::optimizer_state)
          .attr("lr", 0.001).attr("beta1", 0.9).attr("beta2", 0.999).attr("eps", 1e-8).attr("weight_decay", 0.0)
          .attr("decoupled", int64_t{0}).out("param'").out("m'").out("v'").build(upd);
    case K::Momentum:
      return Example(kind).in("R", {}).in("T", {}, DType::i64).in("X", m2, DType::f32, Role::param).in("G", m2)
          .in("V", m2, DType::f32, Role::optimizer_state).attr("alpha", 0.9).attr("beta", 1.0)
          .attr("norm_coefficient", 0.0).attr("mode", std::string("standard")).out("X'").out("V'").build(upd);
    case K::Adam:
      return Example(kind).in("R", {}).in("T", {}, DType::i64).in("X", m2, DType::f32, Role::param).in("G", m2)
          .in("V", m2, DType::f32, Role::optimizer_state).in("H", m2, DType::f32, Role::optimizer_state)
          .attr("alpha", 0.9).attr("beta", 0.999).attr("epsilon", 1e-6).out("X'").out("V'").out("H'").build(upd);
    case K::Adagrad:
      return Example(kind).in("R", {}).in("T", {}, DType::i64).in("X", m2, DType::f32, Role::param).in("G", m2)
          .in("H", m2, DType::f32, Role::optimizer_state).attr("decay_factor", 0.1).attr("epsilon", 1e-6)
          .out("X'").out("H'").build(upd);
  }
  CLEAVE_CHECK(false, "no example for op kind ", static_cast<int>(kind));
  return {};
}

std::string describe_kind(const std::string &name) {
  // ONNX op types that the importer maps onto another IR kind.
  static const std::pair<const char *, OpKind> kAliases[] = {
      {"Flatten", OpKind::Reshape}, {"Squeeze", OpKind::Reshape}, {"Unsqueeze", OpKind::Reshape},
      {"CastLike", OpKind::Cast},
  };
  std::optional<OpKind> kind = parse_op_kind(name);
  std::string note;
  for (const auto &[alias, k] : kAliases)
    if (!kind && name == alias) {
      kind = k;
      note = detail::concat(name, " imports as ", op_kind_name(k), "\n");
    }
  for (const char *folded : {"Constant", "ConstantOfShape", "Shape", "Size", "Range", "Trilu"})
    if (!kind && name == folded)
      CLEAVE_USER_ERROR("op \"", name, "\" is folded into constants at import and has no description");
  if (!kind) CLEAVE_USER_ERROR("unknown op kind \"", name, "\"");
  Graph g = example_op(*kind);
  const Op &op = g.op(0);
  std::ostringstream os;
  os << note << "example: " << op.name << "(";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor &t = g.tensor(op.inputs[i]);
    os << (i ? ", " : "") << t.name << ": " << dtype_name(t.dtype) << shape_str(t.shape);
  }
  os << ") -> (";
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const Tensor &t = g.tensor(op.outputs[i]);
    os << (i ? ", " : "") << t.name << ": " << dtype_name(t.dtype) << shape_str(t.shape);
  }
  os << ")";
  if (!op.attrs.empty()) {
    os << " {";
    bool first = true;
    for (const auto &[key, value] : op.attrs) {
      os << (first ? "" : ", ") << key << "=";
      first = false;
      std::visit(
          [&](const auto &v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
              os << "[";
              for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
              os << "]";
            } else {
              os << v;
            }
          },
          value);
    }
    os << "}";
  }
  os << "\n";
  std::vector<Description> ds = describe(g, op);
  for (const Description &d : ds) {
    os << to_string(d) << "\n";
    std::string splits;
    for (int v : splittable_vars(d))
      splits += (splits.empty() ? "" : ", ") + d.vars[static_cast<size_t>(v)].name +
                (split_kind(d, v) == SplitKind::concat    ? " (concat)"
                 : split_kind(d, v) == SplitKind::partial ? " (partial)"
                                                          : " (synced)");
    os << "  splittable: " << (splits.empty() ? "none" : splits) << "; flops: " << flops(d) << "\n";
  }
  return os.str();
}

}  // namespace cleave::describe
