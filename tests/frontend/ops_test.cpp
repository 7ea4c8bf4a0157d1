// Each supported op imports with the right IR kind, normalised attributes and shapes. Output shapes are also
// cross-checked inside the importer against ONNX's own shape inference.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/tensor_data.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::kI64;
using test::import;
using test::import_error;
using test::ModelBuilder;

const Op &only_op(const Graph &g, OpKind k) {
  const Op *found = nullptr;
  for (const Op &op : g.ops())
    if (op.kind == k) {
      EXPECT_EQ(found, nullptr) << "two ops of kind " << op_kind_name(k);
      found = &op;
    }
  if (!found) throw std::runtime_error("no op of kind " + std::string(op_kind_name(k)));
  return *found;
}

Shape shape_of(const Graph &g, const std::string &name) { return g.tensor(*g.find_tensor(name)).shape; }
using Ints = std::vector<int64_t>;

TEST(ImportOps, ConvSameUpperResolvesPads) {
  ModelBuilder mb;
  mb.input("x", kF32, {1, 3, 7, 7});
  mb.init_f("w", {4, 3, 3, 3}, std::vector<float>(108, 0.1f));
  auto &n = mb.node("Conv", {"x", "w"}, {"y"}, "c");
  test::set_string(n, "auto_pad", "SAME_UPPER");
  test::set_ints(n, "strides", {2, 2});
  mb.output("y", 4);
  Graph g = import(mb, "conv");
  const Op &op = only_op(g, OpKind::Conv);
  EXPECT_EQ(op.name, "c");
  // out = ceil(7/2) = 4; total pad = (4-1)*2 + 3 - 7 = 2 -> 1 before, 1 after.
  EXPECT_EQ(op.attr_ints("pads"), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(op.attr_ints("strides"), (Ints{2, 2}));
  EXPECT_EQ(op.attr_ints("dilations"), (Ints{1, 1}));
  EXPECT_EQ(op.attr_int("group"), 1);
  EXPECT_EQ(shape_of(g, "y"), (Shape{1, 4, 4, 4}));
  EXPECT_EQ(g.tensor(*g.find_tensor("w")).role, Role::param);
  EXPECT_EQ(g.tensor(*g.find_tensor("x")).role, Role::input);
}

TEST(ImportOps, ConvSameLowerPutsOddPadFirst) {
  ModelBuilder mb;
  mb.input("x", kF32, {1, 1, 6});
  mb.init_f("w", {1, 1, 4}, std::vector<float>(4, 1.f));
  auto &n = mb.node("Conv", {"x", "w"}, {"y"});
  test::set_string(n, "auto_pad", "SAME_LOWER");
  mb.output("y", 3);
  Graph g = import(mb, "conv1d");
  const Op &op = only_op(g, OpKind::Conv);
  EXPECT_EQ(op.name, "Conv_0");
  EXPECT_EQ(op.attr_ints("pads"), (Ints{2, 1}));  // total 3: ceil half before
  EXPECT_EQ(shape_of(g, "y"), (Shape{1, 1, 6}));
}

TEST(ImportOps, PoolsGetEveryAttribute) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3, 8, 8});
  auto &mp = mb.node("MaxPool", {"x"}, {"m"}, "mp");
  test::set_ints(mp, "kernel_shape", {3, 3});
  test::set_ints(mp, "strides", {2, 2});
  test::set_int(mp, "ceil_mode", 1);
  auto &ap = mb.node("AveragePool", {"m"}, {"a"}, "ap");
  test::set_ints(ap, "kernel_shape", {2, 2});
  test::set_string(ap, "auto_pad", "VALID");
  mb.node("GlobalAveragePool", {"a"}, {"y"}, "gap");
  mb.output("y", 4);
  Graph g = import(mb, "pool");
  const Op &m = only_op(g, OpKind::MaxPool);
  EXPECT_EQ(m.attr_ints("pads"), (Ints{0, 0, 0, 0}));
  EXPECT_EQ(m.attr_ints("dilations"), (Ints{1, 1}));
  EXPECT_EQ(m.attr_int("ceil_mode"), 1);
  EXPECT_EQ(m.attr_int("storage_order"), 0);
  EXPECT_EQ(shape_of(g, "m"), (Shape{2, 3, 4, 4}));  // ceil((8-3)/2)+1 = 4
  const Op &a = only_op(g, OpKind::AveragePool);
  EXPECT_EQ(a.attr_ints("strides"), (Ints{1, 1}));
  EXPECT_EQ(a.attr_int("count_include_pad"), 0);
  EXPECT_EQ(shape_of(g, "a"), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(shape_of(g, "y"), (Shape{2, 3, 1, 1}));
}

TEST(ImportOps, MatrixSoftmaxTransposeDefaults) {
  ModelBuilder mb;
  mb.input("x", kF32, {4, 5});
  mb.init_f("w", {6, 5}, std::vector<float>(30, 1.f));
  auto &gemm = mb.node("Gemm", {"x", "w"}, {"h"}, "fc");
  test::set_int(gemm, "transB", 1);
  mb.node("Softmax", {"h"}, {"s"}, "sm");
  auto &ls = mb.node("LogSoftmax", {"s"}, {"l"}, "lsm");
  test::set_int(ls, "axis", 0);
  mb.node("Transpose", {"l"}, {"t"}, "tr");
  mb.node("MatMul", {"t", "h"}, {"y"}, "mm");
  mb.output("y", 2);
  Graph g = import(mb, "gemm");
  const Op &gm = only_op(g, OpKind::Gemm);
  EXPECT_EQ(gm.attr_float("alpha"), 1.0);
  EXPECT_EQ(gm.attr_float("beta"), 1.0);
  EXPECT_EQ(gm.attr_int("transA"), 0);
  EXPECT_EQ(gm.attr_int("transB"), 1);
  EXPECT_EQ(only_op(g, OpKind::Softmax).attr_int("axis"), 1);
  EXPECT_EQ(only_op(g, OpKind::LogSoftmax).attr_int("axis"), 0);
  EXPECT_EQ(only_op(g, OpKind::Transpose).attr_ints("perm"), (Ints{1, 0}));
  EXPECT_EQ(shape_of(g, "y"), (Shape{6, 6}));
}

TEST(ImportOps, FlattenSqueezeUnsqueezeBecomeReshape) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 1, 3, 4});
  mb.init_i64("ax1", {1}, {1});
  mb.init_i64("ax2", {2}, {-1, 0});
  mb.node("Squeeze", {"x", "ax1"}, {"sq"}, "sq");           // [2,3,4]
  mb.node("Unsqueeze", {"sq", "ax2"}, {"us"}, "us");        // axes {4, 0} of rank 5: [1,2,3,4,1]
  auto &f = mb.node("Flatten", {"us"}, {"y"}, "fl");         // axis 2: [2, 12]
  test::set_int(f, "axis", 2);
  mb.output("y", 2);
  Graph g = import(mb, "reshape");
  ASSERT_EQ(g.num_ops(), 3);
  for (const Op &op : g.ops()) EXPECT_EQ(op.kind, OpKind::Reshape);
  EXPECT_EQ(g.op(*g.find_op("sq")).attr_ints("shape"), (Ints{2, 3, 4}));
  EXPECT_EQ(g.op(*g.find_op("us")).attr_ints("shape"), (Ints{1, 2, 3, 4, 1}));
  EXPECT_EQ(g.op(*g.find_op("fl")).attr_ints("shape"), (Ints{2, 12}));
  // The axes constants fed no IR op, so they are not in the graph.
  EXPECT_FALSE(g.find_tensor("ax1").has_value());
}

TEST(ImportOps, SliceBoundsAreClampedAndExplicit) {
  ModelBuilder mb;
  mb.input("x", kF32, {5, 6});
  mb.init_i64("st", {2}, {-100, 4});
  mb.init_i64("en", {2}, {1000, -100});
  mb.init_i64("ax", {2}, {-1, 0});
  mb.init_i64("sp", {2}, {2, -1});
  mb.node("Slice", {"x", "st", "en", "ax", "sp"}, {"y"}, "sl");
  mb.output("y", 2);
  Graph g = import(mb, "slice");
  const Op &op = only_op(g, OpKind::Slice);
  // Sorted by axis: axis 0 (start 4, end -100 -> -1, step -1), axis 1 (start 0, end 6, step 2).
  EXPECT_EQ(op.attr_ints("axes"), (Ints{0, 1}));
  EXPECT_EQ(op.attr_ints("starts"), (Ints{4, 0}));
  EXPECT_EQ(op.attr_ints("ends"), (Ints{-1, 6}));
  EXPECT_EQ(op.attr_ints("steps"), (Ints{-1, 2}));
  EXPECT_EQ(shape_of(g, "y"), (Shape{5, 3}));
}

TEST(ImportOps, SplitConcatGatherExpand) {
  ModelBuilder mb;
  mb.input("x", kF32, {6, 4});
  mb.input("idx", kI64, {2});
  mb.init_i64("shape", {3}, {3, 1, 8});
  auto &sp = mb.node("Split", {"x"}, {"a", "b", "c"}, "split");
  test::set_int(sp, "axis", -2);
  auto &cc = mb.node("Concat", {"c", "a"}, {"cat"}, "cat");
  test::set_int(cc, "axis", -1);
  mb.node("Gather", {"cat", "idx"}, {"gat"}, "gat");
  mb.node("Expand", {"gat", "shape"}, {"y"}, "exp");
  mb.output("y", 3);
  Graph g = import(mb, "split");
  const Op &s = only_op(g, OpKind::Split);
  EXPECT_EQ(s.attr_int("axis"), 0);
  EXPECT_EQ(s.attr_ints("split"), (Ints{2, 2, 2}));
  EXPECT_EQ(only_op(g, OpKind::Concat).attr_int("axis"), 1);
  EXPECT_EQ(only_op(g, OpKind::Gather).attr_int("axis"), 0);
  EXPECT_EQ(only_op(g, OpKind::Expand).attr_ints("shape"), (Ints{3, 2, 8}));
  EXPECT_EQ(shape_of(g, "y"), (Shape{3, 2, 8}));
}

TEST(ImportOps, ReductionsSortAxesAndHandleEmptyAxes) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3, 4});
  mb.init_i64("ax", {2}, {-1, 0});
  mb.init_i64("none", {0}, {});
  mb.node("ReduceSum", {"x", "ax"}, {"s"}, "rs");
  auto &rm = mb.node("ReduceMean", {"x"}, {"m"}, "rm");
  test::set_int(rm, "keepdims", 0);
  auto &noop = mb.node("ReduceSum", {"x", "none"}, {"n"}, "noop");
  test::set_int(noop, "noop_with_empty_axes", 1);
  mb.output("s", 3);
  mb.output("m", 0);
  mb.output("n", 3);
  Graph g = import(mb, "reduce");
  const Op &rs = g.op(*g.find_op("rs"));
  EXPECT_EQ(rs.kind, OpKind::ReduceSum);
  EXPECT_EQ(rs.attr_ints("axes"), (Ints{0, 2}));
  EXPECT_EQ(rs.attr_int("keepdims"), 1);
  EXPECT_EQ(shape_of(g, "s"), (Shape{1, 3, 1}));
  const Op &m = only_op(g, OpKind::ReduceMean);
  EXPECT_EQ(m.attr_ints("axes"), (Ints{0, 1, 2}));
  EXPECT_EQ(shape_of(g, "m"), Shape{});
  EXPECT_EQ(g.op(*g.find_op("noop")).kind, OpKind::Identity);
}

TEST(ImportOps, BatchNormTrainingBindsRunningStatistics) {
  ModelBuilder mb(15);
  mb.input("x", kF32, {2, 3, 4, 4});
  mb.init_f("scale", {3}, {1, 1, 1});
  mb.init_f("bias", {3}, {0, 0, 0});
  mb.init_f("mean", {3}, {0, 0, 0});
  mb.init_f("var", {3}, {1, 1, 1});
  // ONNX requires the running statistics outputs in training mode; the saved statistics are created for autodiff.
  auto &bn = mb.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"}, "bn");
  test::set_int(bn, "training_mode", 1);
  mb.output("y", 4);
  Graph g = import(mb, "bn");
  const Op &op = only_op(g, OpKind::BatchNormalization);
  EXPECT_EQ(op.attr_int("training_mode"), 1);
  EXPECT_FLOAT_EQ(op.attr_float("epsilon"), 1e-5f);
  EXPECT_FLOAT_EQ(op.attr_float("momentum"), 0.9f);
  ASSERT_EQ(op.outputs.size(), 5u);
  for (TensorId t : op.outputs) ASSERT_NE(t, kNoTensor);
  EXPECT_EQ(g.tensor(op.outputs[1]).shape, (Shape{3}));
  ASSERT_EQ(g.assigns.size(), 2u);
  EXPECT_EQ(g.tensor(g.assigns[0].dst).name, "mean");
  EXPECT_EQ(g.assigns[0].src, op.outputs[1]);
  EXPECT_EQ(g.tensor(g.assigns[1].dst).name, "var");
  EXPECT_EQ(g.assigns[1].src, op.outputs[2]);
}

TEST(ImportOps, DropoutConstantInputsBecomeAttributes) {
  ModelBuilder mb;
  mb.input("x", kF32, {4, 4});
  mb.init_f("r", {}, {0.25f});
  auto &c = mb.node("Constant", {}, {"t"}, "tm");
  auto *a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->add_int32_data(1);
  auto &d = mb.node("Dropout", {"x", "r", "t"}, {"y", "mask"}, "drop");
  test::set_int(d, "seed", 7);
  mb.output("y", 2);
  mb.output("mask", 2, onnx::TensorProto::BOOL);
  Graph g = import(mb, "dropout");
  const Op &op = only_op(g, OpKind::Dropout);
  EXPECT_EQ(op.inputs.size(), 1u);
  EXPECT_FLOAT_EQ(op.attr_float("ratio"), 0.25f);
  EXPECT_EQ(op.attr_int("training_mode"), 1);
  EXPECT_EQ(op.attr_int("seed"), 7);
  EXPECT_EQ(g.tensor(op.outputs[1]).dtype, DType::boolean);
}

TEST(ImportOps, SoftmaxCrossEntropyAlwaysHasLogProbAndLabelsRole) {
  ModelBuilder mb;
  mb.input("scores", kF32, {3, 5});
  mb.input("labels", kI64, {3});
  auto &n = mb.node("SoftmaxCrossEntropyLoss", {"scores", "labels"}, {"loss"}, "sce");
  test::set_int(n, "ignore_index", 2);
  mb.output("loss", 0);
  Graph g = import(mb, "sce");
  const Op &op = only_op(g, OpKind::SoftmaxCrossEntropyLoss);
  EXPECT_EQ(op.attr_string("reduction"), "mean");
  EXPECT_EQ(op.attr_int("ignore_index"), 2);
  ASSERT_EQ(op.outputs.size(), 2u);
  ASSERT_NE(op.outputs[1], kNoTensor);
  EXPECT_EQ(g.tensor(op.outputs[1]).shape, (Shape{3, 5}));
  EXPECT_EQ(g.tensor(*g.find_tensor("labels")).role, Role::label);
  EXPECT_EQ(g.tensor(*g.find_tensor("scores")).role, Role::input);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, Shape{});
}

TEST(ImportOps, NllLossDefaults) {
  ModelBuilder mb;
  mb.input("x", kF32, {3, 5});
  mb.input("t", kI64, {3});
  auto &n = mb.node("NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}, "nll");
  test::set_string(n, "reduction", "sum");
  mb.output("loss", 0);
  Graph g = import(mb, "nll");
  const Op &op = only_op(g, OpKind::NegativeLogLikelihoodLoss);
  EXPECT_EQ(op.attr_string("reduction"), "sum");
  EXPECT_FALSE(op.has_attr("ignore_index"));
  EXPECT_EQ(g.tensor(*g.find_tensor("t")).role, Role::label);
}

TEST(ImportOps, ConstantFormsAndElementwise) {
  ModelBuilder mb;
  mb.input("x", kF32, {3});
  auto &c1 = mb.node("Constant", {}, {"k"}, "k");
  test::set_floats(c1, "value_floats", {1.f, 2.f, 3.f});
  auto &c2 = mb.node("Constant", {}, {"two"}, "two");
  test::set_float(c2, "value_float", 2.f);
  mb.node("Add", {"x", "k"}, {"a"}, "add");
  mb.node("Pow", {"a", "two"}, {"p"}, "pow");
  mb.node("Sqrt", {"p"}, {"r"}, "sqrt");
  mb.node("Relu", {"r"}, {"y"}, "relu");
  mb.output("y", 1);
  Graph g = import(mb, "const");
  ASSERT_EQ(g.num_ops(), 4);
  const Tensor &k = g.tensor(*g.find_tensor("k"));
  EXPECT_EQ(k.role, Role::constant);
  EXPECT_EQ(data_as_doubles(k), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(g.tensor(*g.find_tensor("two")).shape, Shape{});
  EXPECT_EQ(g.op(0).kind, OpKind::Add);
  EXPECT_EQ(g.op(3).kind, OpKind::Relu);
}

TEST(ImportOps, ShapeChainFoldsIntoReshapeAttribute) {
  // torch-style dynamic reshape: x.view(x.size(0), -1) with a symbolic batch fixed by --batch.
  ModelBuilder mb;
  mb.input("x", kF32, {test::kSym, 3, 4});
  mb.init_i64("zero", {}, {0});
  mb.init_i64("axes0", {1}, {0});
  mb.init_i64("minus1", {1}, {-1});
  mb.node("Shape", {"x"}, {"shp"}, "shape");
  mb.node("Gather", {"shp", "zero"}, {"n"}, "gather");
  mb.node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsq");
  auto &cat = mb.node("Concat", {"n1", "minus1"}, {"target"}, "concat");
  test::set_int(cat, "axis", 0);
  mb.node("Reshape", {"x", "target"}, {"y"}, "reshape");
  mb.output("y", 2);
  ImportOptions opts;
  opts.batch = 5;
  Graph g = import(mb, "fold", opts);
  ASSERT_EQ(g.num_ops(), 1);
  EXPECT_EQ(g.op(0).kind, OpKind::Reshape);
  EXPECT_EQ(g.op(0).attr_ints("shape"), (Ints{5, 12}));
  EXPECT_EQ(shape_of(g, "x"), (Shape{5, 3, 4}));
  EXPECT_EQ(shape_of(g, "y"), (Shape{5, 12}));
  // Folded intermediates that feed no op are left out of the graph.
  EXPECT_FALSE(g.find_tensor("shp").has_value());
  EXPECT_FALSE(g.find_tensor("target").has_value());
}

TEST(ImportOps, CastAndConstantOfShapeFold) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.node("Shape", {"x"}, {"s"}, "shape");
  auto &cos = mb.node("ConstantOfShape", {"s"}, {"ones"}, "cos");
  auto *a = cos.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(3);
  auto &cast = mb.node("Cast", {"ones"}, {"f"}, "cast");
  test::set_int(cast, "to", onnx::TensorProto::FLOAT);
  mb.node("Mul", {"x", "f"}, {"y"}, "mul");
  mb.output("y", 2);
  Graph g = import(mb, "cast");
  ASSERT_EQ(g.num_ops(), 1);
  const Tensor &f = g.tensor(*g.find_tensor("f"));
  EXPECT_EQ(f.dtype, DType::f32);
  EXPECT_EQ(data_as_doubles(f), (std::vector<double>(6, 3.0)));
}

TEST(ImportOps, InputValuesBecomeConstantsAndFold) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 6});
  mb.input("shape", kI64, {2});
  mb.node("Reshape", {"x", "shape"}, {"y"});
  mb.output("y", 2);
  ImportOptions opts;
  Tensor s{"ignored", DType::i64, {2}, Role::input, encode_ints(DType::i64, {3, -1}), kNoOp};
  opts.input_values["shape"] = s;
  Graph g = import(mb, "bind", opts);
  EXPECT_EQ(only_op(g, OpKind::Reshape).attr_ints("shape"), (Ints{3, 4}));
  EXPECT_EQ(g.op(0).name, "Reshape_0");
}

TEST(ImportOps, UnnamedNodesGetUniqueNames) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.node("Exp", {"x"}, {"a"});
  mb.node("Neg", {"a"}, {"b"});
  mb.node("Tanh", {"b"}, {"y"}, "Neg_1");  // takes the name a generated one would have had
  mb.output("y", 1);
  Graph g = import(mb, "topo");
  ASSERT_EQ(g.num_ops(), 3);
  EXPECT_EQ(g.op(0).kind, OpKind::Exp);
  EXPECT_EQ(g.op(0).name, "Exp_0");
  EXPECT_EQ(g.op(1).name, "Neg_1.1");
  EXPECT_EQ(g.op(2).name, "Neg_1");
}

TEST(ImportOps, LoadDataFalseKeepsShapesOnly) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_f("w", {3, 2}, std::vector<float>(6, 1.f));
  mb.node("MatMul", {"x", "w"}, {"y"});
  mb.output("y", 2);
  ImportOptions opts;
  opts.load_data = false;
  Graph g = import(mb, "nodata", opts);
  const Tensor &w = g.tensor(*g.find_tensor("w"));
  EXPECT_EQ(w.role, Role::param);
  EXPECT_TRUE(w.data.empty());
  EXPECT_EQ(w.shape, (Shape{3, 2}));
}

TEST(ImportOps, OptimizerOpsAreUpdatePhase) {
  Graph g = import_onnx("/usr/share/libonnx-testdata/data/node/test_adagrad/model.onnx");
  const Op &op = only_op(g, OpKind::Adagrad);
  EXPECT_EQ(op.phase, Phase::update);
  EXPECT_FLOAT_EQ(op.attr_float("epsilon"), 1e-5f);  // set by the model
  EXPECT_TRUE(op.has_attr("decay_factor"));
  EXPECT_TRUE(op.has_attr("norm_coefficient"));
  Graph adam = import_onnx("/usr/share/libonnx-testdata/data/node/test_adam_multiple/model.onnx");
  const Op &ad = only_op(adam, OpKind::Adam);
  // Not set by the model: ONNX's schema default.
  EXPECT_FLOAT_EQ(ad.attr_float("epsilon"), 1e-6f);
  EXPECT_EQ(ad.outputs.size(), 6u);
}

TEST(ImportOps, GradientNodeInMainGraph) {
  Graph g = import_onnx("/usr/share/libonnx-testdata/data/simple/test_gradient_of_add_and_mul/model.onnx");
  for (const char *name : {"dd_da", "dd_db"}) {
    auto id = g.find_tensor(name);
    ASSERT_TRUE(id.has_value()) << name;
    const Tensor &t = g.tensor(*id);
    ASSERT_NE(t.producer, kNoOp);
    EXPECT_EQ(g.op(t.producer).kind, OpKind::Identity);
    EXPECT_EQ(g.op(t.producer).phase, Phase::backward);
  }
  EXPECT_EQ(g.outputs.size(), 3u);
}

}  // namespace
}  // namespace cleave

namespace cleave {
namespace {

using test::ModelBuilder;

TEST(ImportOps, SoftmaxCrossEntropyWithProbabilityTargets) {
  // torch's F.cross_entropy(scores, probs): float labels of the scores' shape, which the ONNX schema does not allow.
  // Imported as -mean_n sum_c probs[n, c] * log_softmax(scores)[n, c]; checked against that formula in double.
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f, 0.7f, 0.1f, 0.1f, 0.1f, 0.25f, 0.25f, 0.25f, 0.25f};
  const std::vector<float> x = test::random_floats(12, 3, 2.0f);
  for (const char *reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    ModelBuilder mb;
    mb.input("scores", test::kF32, {3, 4});
    mb.init_f("probs", {3, 4}, probs);
    auto &n = mb.node("SoftmaxCrossEntropyLoss", {"scores", "probs"}, {"loss", "log_prob"}, "sce");
    test::set_string(n, "reduction", reduction);
    test::set_int(n, "ignore_index", -100);  // torch writes its default
    mb.output("loss", std::string(reduction) == "none" ? 1 : 0);
    Graph g = test::import(mb, "sce_probs");
    EXPECT_EQ(test::count_ops(g, OpKind::SoftmaxCrossEntropyLoss), 0);
    EXPECT_EQ(test::count_ops(g, OpKind::LogSoftmax), 1);
    EXPECT_NE(g.find_op("sce/LogSoftmax"), std::nullopt);
    std::vector<double> want(3), got = test::run_forward(g, "scores", x, "loss");
    for (int r = 0; r < 3; ++r) {
      double mx = -1e300, z = 0, dot = 0;
      for (int c = 0; c < 4; ++c) mx = std::max(mx, static_cast<double>(x[r * 4 + c]));
      for (int c = 0; c < 4; ++c) z += std::exp(x[r * 4 + c] - mx);
      for (int c = 0; c < 4; ++c) dot += probs[r * 4 + c] * (x[r * 4 + c] - mx - std::log(z));
      want[static_cast<size_t>(r)] = -dot;
    }
    if (std::string(reduction) != "none") {
      double s = want[0] + want[1] + want[2];
      want = {std::string(reduction) == "mean" ? s / 3 : s};
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  }
}

TEST(ImportOps, SoftmaxCrossEntropyProbabilityTargetsRefusals) {
  auto model = [](const std::vector<int64_t> &label_dims, bool weight, int64_t ignore_index) {
    ModelBuilder mb;
    mb.input("scores", test::kF32, {3, 4});
    mb.input("probs", test::kF32, label_dims);
    std::vector<std::string> ins = {"scores", "probs"};
    if (weight) {
      mb.init_f("w", {4}, {1, 2, 3, 4});
      ins.push_back("w");
    }
    auto &n = mb.node("SoftmaxCrossEntropyLoss", ins, {"loss"}, "sce");
    test::set_int(n, "ignore_index", ignore_index);
    mb.output("loss", 0);
    return mb;
  };
  auto [weighted, code] = import_error(model({3, 4}, true, -100), "sce_probs_weight");
  EXPECT_HAS(weighted, "node \"sce\" (SoftmaxCrossEntropyLoss, opset 13): its labels \"probs\" are float "
                       "(probability targets), which cannot take a class weight here");
  EXPECT_EQ(code, 1);
  EXPECT_HAS(import_error(model({3, 4}, false, 0), "sce_probs_ignore").first, "cannot take an ignore_index (0)");
  EXPECT_HAS(import_error(model({3}, false, -100), "sce_probs_rank1").first,
             "its labels \"probs\" are float (probability targets) of rank 1: probability targets have the scores' "
             "shape [N, C, ...]");
}

}  // namespace
}  // namespace cleave

namespace cleave {
namespace {

TEST(ImportOps, BatchNormTrainingStatisticsMustBeStoredOrTiled) {
  // Running statistics computed by anything but a whole repetition of a stored tensor cannot be written back.
  ModelBuilder mb(13);
  mb.input("x", test::kF32, {2, 3, 4});
  mb.init_f("scale", {3}, {1, 1, 1});
  mb.init_f("bias", {3}, {0, 0, 0});
  mb.init_f("m0", {3}, {0.1f, 0.2f, 0.3f});
  mb.init_f("v0", {3}, {1, 1, 1});
  mb.node("Relu", {"m0"}, {"m"}, "relu");
  mb.node("BatchNormalization", {"x", "scale", "bias", "m", "v0"}, {"y", "rm", "rv", "sm", "sv"}, "bn");
  mb.output("y", 3);
  EXPECT_HAS(import_error(mb, "bn_computed_stats").first,
             "node \"bn\" (BatchNormalization, opset 13): training mode needs input \"m\" to be an initializer or graph "
             "input (or one repeated whole)");
}

TEST(ImportOps, TopKIsIndicesAndAGatherOfTheValues) {
  auto model = [](int64_t k, int64_t axis) {
    ModelBuilder mb;
    mb.input("x", test::kF32, {3, 5});
    mb.init_i64("k", {1}, {k});
    auto &n = mb.node("TopK", {"x", "k"}, {"values", "indices"}, "topk");
    test::set_int(n, "axis", axis);
    test::set_int(n, "largest", 0);
    mb.output("values", 2);
    return mb;
  };
  Graph g = test::import(model(2, -1), "topk");
  const Op &top = only_op(g, OpKind::TopKIndices);
  EXPECT_EQ(top.attr_int("axis"), 1);
  EXPECT_EQ(top.attr_int("k"), 2);
  EXPECT_EQ(top.attr_int("largest"), 0);
  EXPECT_EQ(shape_of(g, "indices"), (Shape{3, 2}));
  const Op &gather = only_op(g, OpKind::GatherElements);
  EXPECT_EQ(g.tensor(gather.input(1)).name, "indices");
  EXPECT_EQ(g.tensor(gather.output(0)).name, "values");
  // ONNX's shape inference refuses a K past the axis first; a K of 0 passes it (an empty result) and is ours.
  EXPECT_HAS(import_error(model(6, 1), "topk_k6").first,
             "(op_type:TopK, node name: topk): [ShapeInferenceError] Axis has less than the requested k elements");
  EXPECT_HAS(import_error(model(0, 0), "topk_k0").first,
             "node \"topk\" (TopK, opset 13): K = 0 is outside [1, 3], the length of axis 0");
}

}  // namespace
}  // namespace cleave
