// Checks descriptions against kernels: every evaluable description, evaluated directly from its index expression,
// must give what the reference interpreter's kernel computes, on small random tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "ir/describe/description.h"
#include "ir/describe/evaluate.h"
#include "ir/interp/interpreter.h"
#include "ir/shape_rules.h"

namespace cleave::describe {
namespace {

struct In {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};
struct Out {
  std::string name;
  std::optional<Shape> declared;  // for outputs the shape rules cannot derive
};

Graph one_op(OpKind kind, const std::vector<In> &ins, const AttrMap &attrs, const std::vector<Out> &outs) {
  Graph g;
  Op op;
  op.kind = kind;
  op.name = std::string(op_kind_name(kind));
  op.attrs = attrs;
  for (const In &i : ins) op.inputs.push_back(g.add_tensor(i.name, i.dtype, i.shape, Role::input));
  for (const Out &o : outs)
    op.outputs.push_back(g.add_tensor(o.name, DType::f32, o.declared.value_or(Shape{}), Role::activation));
  std::vector<TensorType> types = infer_output_types(g, op);
  for (size_t i = 0; i < outs.size(); ++i) {
    g.tensor(op.outputs[i]).dtype = types[i].dtype;
    g.tensor(op.outputs[i]).shape = types[i].shape;
  }
  g.add_op(op);
  return g;
}

/** Index `flat` of the indices of GatherElements, ScatterElements, GatherND or GatherNDGrad: in range of the dim it
 *  addresses, negative about half the time. ScatterElements' targets are distinct along each line of its axis (ONNX
 *  wants them so without a reduction): position j of a line hits (j + line) mod dim. */
template <typename Integer>
double element_index(const Graph &g, const Op &op, int64_t flat, Integer integer) {
  const Shape &is = g.tensor(op.inputs[1]).shape;
  int64_t dim = 0, at = 0;
  if (op.kind == OpKind::GatherND || op.kind == OpKind::GatherNDGrad) {
    const Shape &ds = g.tensor(op.kind == OpKind::GatherND ? op.inputs[0] : op.outputs[0]).shape;
    dim = ds[static_cast<size_t>(op.attr_int("batch_dims", 0) + flat % is.back())];
    at = static_cast<int64_t>(integer(0, dim - 1));
  } else {
    auto axis = static_cast<size_t>(op.attr_int("axis", 0));
    dim = g.tensor(op.inputs[0]).shape[axis];
    at = static_cast<int64_t>(integer(0, dim - 1));
    if (op.kind == OpKind::ScatterElements) {
      int64_t inner = 1;
      for (size_t d = axis + 1; d < is.size(); ++d) inner *= is[d];
      int64_t j = flat / inner % is[axis], line = flat / (inner * is[axis]) * inner + flat % inner;
      at = (j + line) % dim;
    }
  }
  return static_cast<double>(integer(0, 1) != 0 ? at - dim : at);
}

/** Inputs valid for the op: class labels and gather indices in range (negative ones where ONNX allows them),
 *  positive values where a function needs them (Log, Sqrt, Pow), x > 1 for Acosh, step T = 3. */
interp::Value random_input(const Graph &g, const Op &op, size_t slot, std::mt19937 &rng) {
  const Tensor &t = g.tensor(op.inputs[slot]);
  interp::Value v{t.dtype, t.shape, std::vector<double>(static_cast<size_t>(num_elements(t.shape)))};
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int64_t lo, int64_t hi) { return static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(rng)); };
  for (double &x : v.data) {
    if (t.dtype == DType::boolean) {
      x = integer(0, 1);
    } else if (t.dtype == DType::i64 || t.dtype == DType::i32) {
      if (op.kind == OpKind::Gather || op.kind == OpKind::GatherGrad) {
        int64_t axis = op.attr_int("axis", 0);
        int64_t dim = op.kind == OpKind::Gather ? g.tensor(op.inputs[0]).shape[static_cast<size_t>(axis)]
                                                : g.tensor(op.outputs[0]).shape[static_cast<size_t>(axis)];
        x = integer(-dim, dim - 1);
      } else if (op.kind == OpKind::GatherElements || op.kind == OpKind::ScatterElements ||
                 op.kind == OpKind::GatherND || op.kind == OpKind::GatherNDGrad) {
        x = element_index(g, op, static_cast<int64_t>(&x - v.data.data()), integer);
      } else if (op.kind == OpKind::OneHot) {
        int64_t depth = op.attr_int("depth");
        x = integer(-depth - 1, depth);  // negative ones count from the end; -depth - 1 and depth are out of range
      } else if (op.kind == OpKind::Cast || op.kind == OpKind::Equal || op.kind == OpKind::Less ||
                 op.kind == OpKind::Greater || op.kind == OpKind::LessOrEqual || op.kind == OpKind::GreaterOrEqual) {
        x = integer(-2, 2);  // small values, so equal pairs occur
      } else if (t.shape.empty()) {  // T of the training ops
        x = 3;
      } else {  // class labels: input 1 of the losses, input 2 of their gradients
        int64_t classes = g.tensor(op.inputs[slot == 1 ? 0 : 1]).shape[1];
        x = integer(0, classes - 1);
        if (op.has_attr("ignore_index") && integer(0, 3) == 0) x = static_cast<double>(op.attr_int("ignore_index"));
      }
    } else {
      bool positive = op.kind == OpKind::Log || op.kind == OpKind::Sqrt || op.kind == OpKind::Pow ||
                      op.kind == OpKind::PowGrad || op.kind == OpKind::SqrtGrad;
      // Second moments of the optimizers are non-negative (they are running means of squares).
      bool second_moment = (op.kind == OpKind::AdamUpdate && slot == 3) ||
                           ((op.kind == OpKind::Adam || op.kind == OpKind::Adagrad) &&
                            t.name.rfind("H", 0) == 0);
      x = positive ? uniform(0.5, 2.0) : second_moment ? uniform(0.0, 1.0) : uniform(-1.0, 1.0);
      if (op.kind == OpKind::BatchNormalization && slot == 4) x = uniform(0.5, 2.0);  // input_var
      if (op.kind == OpKind::Acosh || (op.kind == OpKind::AcoshGrad && slot == 1)) x = uniform(1.1, 3.0);  // x >= 1
      if (t.dtype == DType::f32) x = static_cast<float>(x);
    }
  }
  return v;
}

/** Runs the op in the interpreter and compares every evaluable description's output. Returns how many outputs
 *  were compared. */
int check_op(const Graph &g, uint32_t seed = 1) {
  const Op &op = g.op(0);
  std::mt19937 rng(seed);
  interp::Values values = interp::initial_values(g);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] != kNoTensor) values[static_cast<size_t>(op.inputs[i])] = random_input(g, op, i, rng);
  interp::Context ctx;
  ctx.step = 3;
  interp::run_op(g, 0, values, ctx);
  std::vector<EvalInput> ins;
  for (TensorId t : op.inputs) {
    const interp::Value &v = *values[static_cast<size_t>(t)];
    ins.push_back({v.shape, &v.data});
  }
  int compared = 0;
  for (const Description &d : describe(g, op)) {
    if (!d.body || !is_evaluable(d)) continue;
    SCOPED_TRACE(to_string(d));
    const interp::Value &want = *values[static_cast<size_t>(op.outputs[static_cast<size_t>(d.output_slot)])];
    std::vector<double> got = evaluate(d, ins, ctx.step);
    EXPECT_EQ(got.size(), want.data.size());
    if (got.size() != want.data.size()) continue;
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      // The interpreter rounds f32 outputs to float; the evaluator keeps doubles.
      double tol = 1e-6 + 2e-6 * std::abs(want.data[i]);
      if (!(std::abs(got[i] - want.data[i]) <= tol)) {
        ADD_FAILURE() << "element " << i << ": description " << got[i] << ", interpreter " << want.data[i];
        ++bad;
      }
    }
    ++compared;
  }
  return compared;
}

TEST(DescriptionVsInterpreter, EveryEvaluableExample) {
  int kinds = 0;
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    if (check_op(example_op(kind)) > 0) ++kinds;
  }
  // Kinds with no evaluable output: Softmax, LogSoftmax, their gradients, MaxPoolGrad and Dropout (training).
  EXPECT_GE(kinds, 132);
}

using V = std::vector<int64_t>;

TEST(DescriptionVsInterpreter, ConvVariants) {
  // Groups, dilation, stride and asymmetric pads together.
  AttrMap a{{"group", int64_t{2}}, {"strides", V{2, 1}}, {"dilations", V{2, 1}}, {"pads", V{1, 0, 2, 1}}};
  EXPECT_EQ(check_op(one_op(OpKind::Conv, {{"X", {2, 4, 9, 7}}, {"W", {6, 2, 3, 2}}, {"B", {6}}}, a, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Conv, {{"X", {2, 3, 11}}, {"W", {4, 3, 3}}},
                            {{"strides", V{3}}, {"pads", V{2, 1}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Conv, {{"X", {1, 2, 5, 4, 4}}, {"W", {2, 2, 2, 3, 2}}},
                            {{"pads", V{1, 1, 0, 0, 1, 1}}}, {{"Y"}})), 1);
  // Gradients: shapes of the Conv above.
  Shape xs{2, 4, 9, 7}, ws{6, 2, 3, 2};
  Graph fwd = one_op(OpKind::Conv, {{"X", xs}, {"W", ws}}, a, {{"Y"}});
  Shape ys = fwd.tensor(fwd.op(0).outputs[0]).shape;
  EXPECT_EQ(check_op(one_op(OpKind::ConvGradData, {{"dY", ys}, {"W", ws}}, a, {{"dX", xs}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::ConvGradFilter, {{"dY", ys}, {"X", xs}}, a, {{"dW", ws}})), 1);
}

TEST(DescriptionVsInterpreter, PoolVariants) {
  AttrMap ceil{{"kernel_shape", V{3, 2}}, {"strides", V{2, 2}}, {"pads", V{1, 0, 1, 1}}, {"ceil_mode", int64_t{1}}};
  EXPECT_EQ(check_op(one_op(OpKind::MaxPool, {{"X", {2, 3, 8, 7}}}, ceil, {{"Y"}, {"Indices"}})), 2);
  AttrMap dil{{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}, {"strides", V{1, 1}}};
  EXPECT_EQ(check_op(one_op(OpKind::MaxPool, {{"X", {1, 2, 6, 6}}}, dil, {{"Y"}, {"Indices"}})), 2);
  AttrMap excl = ceil;
  excl["count_include_pad"] = int64_t{0};
  EXPECT_EQ(check_op(one_op(OpKind::AveragePool, {{"X", {2, 3, 8, 7}}}, excl, {{"Y"}})), 1);
  AttrMap incl{{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}},
               {"count_include_pad", int64_t{1}}};
  EXPECT_EQ(check_op(one_op(OpKind::AveragePool, {{"X", {2, 3, 9, 9}}}, incl, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::AveragePoolGrad, {{"dY", {2, 3, 5, 5}}}, incl, {{"dX", Shape{2, 3, 9, 9}}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::GlobalAveragePool, {{"X", {2, 3, 4, 5}}}, {}, {{"Y"}})), 1);
}

TEST(DescriptionVsInterpreter, DenseVariants) {
  AttrMap t{{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", -2.0}};
  EXPECT_EQ(check_op(one_op(OpKind::Gemm, {{"A", {3, 4}}, {"B", {5, 3}}, {"C", {4, 1}}}, t, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Gemm, {{"A", {4, 3}}, {"B", {3, 5}}}, {}, {{"Y"}})), 1);
  // Rows in their layout: a time-major Linear's weight gradient sums both leading dims.
  AttrMap rows{{"transA", int64_t{1}}, {"alpha", 0.5}};
  EXPECT_EQ(check_op(one_op(OpKind::Gemm, {{"A", {3, 2, 4}}, {"B", {3, 2, 5}}}, rows, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {3}}, {"B", {2, 3, 4}}}, {}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {2, 4, 3}}, {"B", {3}}}, {}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {2, 1, 3, 4}}, {"B", {3, 4, 5}}}, {}, {{"Y"}})), 1);
  AttrMap ta{{"transA", int64_t{1}}}, tb{{"transB", int64_t{1}}}, both{{"transA", int64_t{1}}, {"transB", int64_t{1}}};
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {2, 1, 4, 3}}, {"B", {3, 5, 4}}}, both, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {4, 3}}, {"B", {2, 4, 5}}}, ta, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MatMul, {{"A", {4}}, {"B", {5, 4}}}, tb, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Add, {{"A", {2, 1, 4}}, {"B", {3, 1}}}, {}, {{"C"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::ReduceSum, {{"X", {2, 3, 4}}}, {{"axes", V{0, 2}}, {"keepdims", int64_t{0}}},
                            {{"Y"}})), 1);
}

TEST(DescriptionVsInterpreter, LayoutVariants) {
  EXPECT_EQ(check_op(one_op(OpKind::Reshape, {{"X", {2, 12}}}, {{"shape", V{2, 3, 4}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Reshape, {{"X", {2, 3, 1, 4}}}, {{"shape", V{6, 4}}}, {{"Y"}})), 1);
  // Regroupings with common pieces (attention's [T, B, H*D] <-> [T, B*H, D]) are affine over the pieces.
  EXPECT_EQ(check_op(one_op(OpKind::Reshape, {{"X", {3, 4, 6}}}, {{"shape", V{3, 8, 3}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Reshape, {{"X", {2, 8, 3}}}, {{"shape", V{2, 4, 6}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Transpose, {{"X", {2, 3, 4}}}, {}, {{"Y"}})), 1);
  // IR slices are normalised by the importer: -1 ends a negative-step slice before the first element.
  AttrMap neg{{"starts", V{5, 1}}, {"ends", V{-1, 5}}, {"axes", V{1, 0}}, {"steps", V{-2, 3}}};
  EXPECT_EQ(check_op(one_op(OpKind::Slice, {{"X", {7, 6}}}, neg, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::SliceGrad, {{"dY", {2, 3}}}, neg, {{"dX", Shape{7, 6}}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Gather, {{"data", {3, 5, 2}}, {"indices", {4}, DType::i64}},
                            {{"axis", int64_t{1}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::GatherGrad, {{"dY", {3, 4, 2}}, {"indices", {4}, DType::i64}},
                            {{"axis", int64_t{1}}}, {{"ddata", Shape{3, 5, 2}}})), 1);
  // A scalar index (x[:, 0] as torch exports it): the gradient has no reduction var.
  EXPECT_EQ(check_op(one_op(OpKind::Gather, {{"data", {4, 8, 16}}, {"indices", {}, DType::i64}},
                            {{"axis", int64_t{1}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::GatherGrad, {{"dY", {4, 16}}, {"indices", {}, DType::i64}},
                            {{"axis", int64_t{1}}}, {{"ddata", Shape{4, 8, 16}}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Concat, {{"X0", {2, 1, 3}}, {"X1", {2, 4, 3}}, {"X2", {2, 2, 3}}},
                            {{"axis", int64_t{1}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Split, {{"X", {7, 2}}}, {{"axis", int64_t{0}}, {"split", V{2, 4, 1}}},
                            {{"Y0"}, {"Y1"}, {"Y2"}})), 3);
}

TEST(DescriptionVsInterpreter, GatherScatterVariants) {
  const DType i64 = DType::i64;
  EXPECT_EQ(check_op(one_op(OpKind::GatherElements, {{"data", {3, 5, 2}}, {"indices", {2, 7, 2}, i64}},
                            {{"axis", int64_t{1}}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::GatherElements, {{"data", {4, 3}}, {"indices", {4, 3}, i64}},
                            {{"axis", int64_t{0}}}, {{"Y"}})), 1);
  for (const char *reduction : {"none", "add"}) {
    SCOPED_TRACE(reduction);
    // updates smaller than data off the axis, and (axis 0) fewer of them than the dim holds.
    EXPECT_EQ(check_op(one_op(OpKind::ScatterElements,
                              {{"data", {3, 5, 4}}, {"indices", {2, 4, 3}, i64}, {"updates", {2, 4, 3}}},
                              {{"axis", int64_t{1}}, {"reduction", std::string(reduction)}}, {{"Y"}})), 1);
    EXPECT_EQ(check_op(one_op(OpKind::ScatterElements, {{"data", {5, 3}}, {"indices", {3, 3}, i64}, {"updates", {3, 3}}},
                              {{"axis", int64_t{0}}, {"reduction", std::string(reduction)}}, {{"Y"}})), 1);
  }
  // GatherND: batch_dims 0 with pairs and singles, batch_dims 1 and 2, one full-depth tuple per batch; its gradient.
  struct Nd {
    Shape data, indices;
    int64_t b;
  };
  for (const Nd &c : std::vector<Nd>{{{5, 4, 3}, {6, 2}, 0},
                                     {{5, 4}, {2, 3, 1}, 0},
                                     {{2, 5, 4}, {2, 3, 1}, 1},
                                     {{2, 3, 5, 4}, {2, 3, 2}, 2},
                                     {{2, 6, 4}, {2, 2}, 1}}) {
    SCOPED_TRACE(shape_str(c.data) + " " + shape_str(c.indices));
    Graph fwd = one_op(OpKind::GatherND, {{"data", c.data}, {"indices", c.indices, i64}}, {{"batch_dims", c.b}},
                       {{"Y"}});
    EXPECT_EQ(check_op(fwd), 1);
    Shape ys = fwd.tensor(fwd.op(0).outputs[0]).shape;
    EXPECT_EQ(check_op(one_op(OpKind::GatherNDGrad, {{"dY", ys}, {"indices", c.indices, i64}}, {{"batch_dims", c.b}},
                              {{"ddata", c.data}})), 1);
  }
}

TEST(DescriptionVsInterpreter, LossAndNormVariants) {
  AttrMap none{{"reduction", std::string("none")}, {"ignore_index", int64_t{2}}};
  std::vector<In> nll{{"input", {4, 5, 3}}, {"target", {4, 3}, DType::i64}, {"weight", {5}}};
  EXPECT_EQ(check_op(one_op(OpKind::NegativeLogLikelihoodLoss, nll, none, {{"loss"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::NegativeLogLikelihoodLoss, nll, {{"reduction", std::string("sum")}}, {{"loss"}})),
            1);
  EXPECT_EQ(check_op(one_op(OpKind::NegativeLogLikelihoodLossGrad,
                            {{"dloss", {4, 3}}, {"input", {4, 5, 3}}, {"target", {4, 3}, DType::i64}, {"weight", {5}}},
                            none, {{"dinput"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::SoftmaxCrossEntropyLossGrad,
                            {{"dloss", {}}, {"log_prob", {4, 5}}, {"labels", {4}, DType::i64}},
                            {{"reduction", std::string("sum")}}, {{"dscores"}})), 1);
  std::vector<In> bn{{"X", {3, 2, 4}}, {"scale", {2}}, {"B", {2}}, {"input_mean", {2}}, {"input_var", {2}}};
  EXPECT_EQ(check_op(one_op(OpKind::BatchNormalization, bn, {{"epsilon", 1e-3}},
                            {{"Y"}, {"running_mean"}, {"running_var"}})), 3);
  // Training mode: Y, running_var and saved_invstd are opaque; running_mean and saved_mean are single sums.
  EXPECT_EQ(check_op(one_op(OpKind::BatchNormalization, bn, {{"momentum", 0.8}, {"training_mode", int64_t{1}}},
                            {{"Y"}, {"running_mean"}, {"running_var"}, {"saved_mean"}, {"saved_invstd"}})), 2);
  std::vector<In> bng{{"dY", {3, 2, 4}}, {"X", {3, 2, 4}}, {"scale", {2}}, {"saved_mean", {2}}, {"saved_invstd", {2}}};
  EXPECT_EQ(check_op(one_op(OpKind::BatchNormalizationGrad, bng, {}, {{"dX"}, {"dscale"}, {"dB"}})), 2);
}

TEST(DescriptionVsInterpreter, MaskAndSelectionVariants) {
  const DType b = DType::boolean;
  EXPECT_EQ(check_op(one_op(OpKind::Where, {{"C", {3, 1, 4}, b}, {"X", {2, 4}}, {"Y", {}}}, {}, {{"Z"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Cast, {{"X", {2, 3}}}, {{"to", std::string("bool")}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Cast, {{"X", {2, 3}, b}}, {{"to", std::string("f32")}}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Cast, {{"X", {2, 3}, DType::i64}}, {{"to", std::string("f32")}}, {{"Y"}})), 1);
  // Float to integer truncates: opaque, so nothing evaluable.
  EXPECT_EQ(check_op(one_op(OpKind::Cast, {{"X", {2, 3}}}, {{"to", std::string("i64")}}, {{"Y"}})), 0);
  for (OpKind k : {OpKind::Equal, OpKind::Less, OpKind::Greater, OpKind::LessOrEqual, OpKind::GreaterOrEqual})
    EXPECT_EQ(check_op(one_op(k, {{"A", {3, 1}, DType::i64}, {"B", {1, 4}, DType::i64}}, {}, {{"C"}})), 1)
        << op_kind_name(k);
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Xor})
    EXPECT_EQ(check_op(one_op(k, {{"A", {2, 3}, b}, {"B", {3}, b}}, {}, {{"C"}})), 1) << op_kind_name(k);
  EXPECT_EQ(check_op(one_op(OpKind::Max, {{"X0", {2, 3}}}, {}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Min, {{"X0", {2, 1}}, {"X1", {3}}}, {}, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::ReduceMin, {{"X", {2, 3, 4}}}, {{"axes", V{0, 2}}, {"keepdims", int64_t{0}}},
                            {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::ReduceMax, {{"X", {2, 3, 4}}}, {{"axes", V{0, 1, 2}}, {"keepdims", int64_t{1}}},
                            {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::Pad, {{"X", {3, 4, 2}}}, {{"pads", V{0, -1, 2, 1, 2, -1}}, {"value", -3.0}},
                            {{"Y"}})), 1);
}

TEST(DescriptionVsInterpreter, LayerNormVariants) {
  // Y is opaque over the normalised dims; mean (a sum) and the parameter gradients (sums over rows) are evaluable.
  EXPECT_EQ(check_op(one_op(OpKind::LayerNormalization, {{"X", {2, 3, 4}}, {"scale", {3, 4}}},
                            {{"axis", int64_t{1}}, {"epsilon", 1e-3}}, {{"Y"}, {"mean"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::LayerNormalizationGrad,
                            {{"dY", {5, 3}}, {"X", {5, 3}}, {"scale", {3}}, {"mean", {5, 1}}, {"invstd", {5, 1}}},
                            {{"axis", int64_t{1}}}, {{"dX"}, {"dscale"}})), 1);
}

TEST(DescriptionVsInterpreter, ImageLayers) {
  // ConvTranspose is evaluable (a transposed window with a bias); InstanceNorm's Y and dX are opaque, its mean and
  // parameter gradients evaluable; Resize is opaque throughout.
  using V = std::vector<int64_t>;
  AttrMap a = {{"strides", V{2, 1}},   {"pads", V{1, 0, 0, 1}}, {"dilations", V{1, 2}},
               {"group", int64_t{1}}, {"output_padding", V{1, 0}}};
  EXPECT_EQ(check_op(one_op(OpKind::ConvTranspose, {{"X", {2, 4, 3, 4}}, {"W", {4, 3, 3, 2}}, {"B", {3}}}, a, {{"Y"}})),
            1);
  AttrMap grouped = {{"strides", V{2, 2}}, {"pads", V{0, 0, 0, 0}}, {"dilations", V{1, 1}}, {"group", int64_t{2}},
                     {"output_padding", V{1, 0}}};
  EXPECT_EQ(check_op(one_op(OpKind::ConvTranspose, {{"X", {1, 4, 3, 3}}, {"W", {4, 1, 2, 2}}}, grouped, {{"Y"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::InstanceNormalization, {{"X", {2, 3, 4, 5}}, {"scale", {3}}, {"B", {3}}},
                            {{"epsilon", 1e-3}}, {{"Y"}, {"mean"}, {"invstd"}})),
            1);
  EXPECT_EQ(check_op(one_op(OpKind::InstanceNormalizationGrad,
                            {{"dY", {2, 3, 4}}, {"X", {2, 3, 4}}, {"scale", {3}}, {"mean", {2, 3}}, {"invstd", {2, 3}}},
                            {}, {{"dX"}, {"dscale"}, {"dB"}})),
            2);
}

TEST(DescriptionVsInterpreter, IndexOps) {
  // CumSum (a masked sum over its axis) and OneHot are evaluable; ArgMax/ArgMin and Mod are opaque.
  for (int64_t axis : {0, 1})
    for (int64_t exclusive : {0, 1})
      for (int64_t reverse : {0, 1})
        EXPECT_EQ(check_op(one_op(OpKind::CumSum, {{"X", {4, 5}}},
                                  {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}, {{"Y"}})),
                  1);
  for (int64_t axis : {0, 1, 2}) {
    EXPECT_EQ(check_op(one_op(OpKind::OneHot, {{"indices", {3, 4}, DType::i64}, {"values", {2}}},
                              {{"axis", axis}, {"depth", int64_t{5}}}, {{"Y"}})),
              1);
  }
}

TEST(DescriptionVsInterpreter, OptimizerVariants) {
  Shape s{3, 2};
  EXPECT_EQ(check_op(one_op(OpKind::SGDUpdate, {{"param", s}, {"grad", s}}, {{"lr", 0.1}, {"weight_decay", 0.01}},
                            {{"param'"}})), 1);
  EXPECT_EQ(check_op(one_op(OpKind::MomentumUpdate, {{"param", s}, {"grad", s}, {"velocity", s}},
                            {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", int64_t{1}}},
                            {{"param'"}, {"velocity'"}})), 2);
  EXPECT_EQ(check_op(one_op(OpKind::AdamUpdate, {{"param", s}, {"grad", s}, {"m", s}, {"v", s}},
                            {{"lr", 0.01}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-6}, {"weight_decay", 0.1},
                             {"decoupled", int64_t{1}}},
                            {{"param'"}, {"m'"}, {"v'"}})), 3);
  std::vector<In> mom{{"R", {}}, {"T", {}, DType::i64}, {"X0", s}, {"X1", {4}}, {"G0", s}, {"G1", {4}},
                      {"V0", s}, {"V1", {4}}};
  EXPECT_EQ(check_op(one_op(OpKind::Momentum, mom,
                            {{"alpha", 0.9}, {"beta", 0.5}, {"norm_coefficient", 0.01},
                             {"mode", std::string("nesterov")}},
                            {{"X0'"}, {"X1'"}, {"V0'"}, {"V1'"}})), 4);
  EXPECT_EQ(check_op(one_op(OpKind::Adam,
                            {{"R", {}}, {"T", {}, DType::i64}, {"X", s}, {"G", s}, {"V", s}, {"H", s}},
                            {{"alpha", 0.8}, {"beta", 0.9}, {"epsilon", 1e-4}, {"norm_coefficient", 0.01},
                             {"norm_coefficient_post", 0.02}},
                            {{"X'"}, {"V'"}, {"H'"}})), 3);
}

}  // namespace
}  // namespace cleave::describe
