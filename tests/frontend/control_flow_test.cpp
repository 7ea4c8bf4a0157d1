// If nodes of a compile-time constant condition import as the branch they take, Loops of a constant trip count as their
// body unrolled (frontend/control_flow.h); a condition or count known only at run time stays in the one-line
// unsupported-node error.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::count_ops;
using test::import;
using test::import_error;
using test::kF32;
using test::kI64;
using test::ModelBuilder;
using test::run_forward;

constexpr int kBool = onnx::TensorProto::BOOL;

/** A branch graph: nodes added by the caller, float outputs of unknown shape. */
struct Branch {
  onnx::GraphProto g;
  explicit Branch(const std::string &name) { g.set_name(name); }
  onnx::NodeProto &node(const std::string &op, const std::vector<std::string> &ins,
                        const std::vector<std::string> &outs, const std::string &name = "") {
    auto *n = g.add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    for (const auto &i : ins) n->add_input(i);
    for (const auto &o : outs) n->add_output(o);
    return *n;
  }
  Branch &output(const std::string &name) {
    auto *vi = g.add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
    return *this;
  }
};

void set_graph(onnx::NodeProto &n, const std::string &key, const Branch &b) {
  auto *a = n.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = b.g;
}

/** A Constant node writing bool scalar `v` to `out`. */
void bool_constant(onnx::GraphProto &g, const std::string &out, bool v) {
  auto *n = g.add_node();
  n->set_op_type("Constant");
  n->add_output(out);
  auto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(kBool);
  a->mutable_t()->add_int32_data(v ? 1 : 0);
}

/** y = If(c) { Relu(x) } else { Neg(x) }, c written by the caller before the If. */
void relu_or_neg(ModelBuilder &mb, const std::string &c) {
  Branch then_b("then"), else_b("else");
  then_b.node("Relu", {"x"}, {"r"}, "relu");
  then_b.output("r");
  else_b.node("Neg", {"x"}, {"n"}, "neg");
  else_b.output("n");
  onnx::NodeProto &n = mb.node("If", {c}, {"y"}, "if");
  set_graph(n, "then_branch", then_b);
  set_graph(n, "else_branch", else_b);
  mb.output("y", 2);
}

const std::vector<float> kX = {-1.5f, 2.f, -0.25f, 3.f, 0.5f, -4.f};

TEST(FoldIf, ConstantTrueTakesThenBranch) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  bool_constant(mb.g(), "c", true);
  relu_or_neg(mb, "c");
  Graph g = import(mb, "if_true");
  ASSERT_EQ(g.ops().size(), 1u) << print_graph(g);
  EXPECT_EQ(g.ops()[0].name, "if/relu");
  EXPECT_EQ(g.ops()[0].kind, OpKind::Relu);
  EXPECT_EQ(g.tensor(g.outputs[0]).name, "y");
  std::vector<double> y = run_forward(g, "x", kX, "y");
  EXPECT_EQ(y, (std::vector<double>{0, 2, 0, 3, 0.5, 0}));
}

TEST(FoldIf, ConstantFalseInitializerTakesElseBranch) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  auto *c = mb.g().add_initializer();
  c->set_name("c");
  c->set_data_type(kBool);
  c->add_int32_data(0);
  relu_or_neg(mb, "c");
  Graph g = import(mb, "if_false");
  ASSERT_EQ(g.ops().size(), 1u) << print_graph(g);
  EXPECT_EQ(g.ops()[0].name, "if/neg");
  EXPECT_EQ(count_ops(g, OpKind::Relu), 0);
  std::vector<double> y = run_forward(g, "x", kX, "y");
  EXPECT_DOUBLE_EQ(y[0], 1.5);
  EXPECT_DOUBLE_EQ(y[5], 4.0);
}

TEST(FoldIf, ShapeConditionFoldsAsTorchWritesIt) {
  // torch's squeeze of a dim it did not know while tracing: If(Equal(Gather(Shape(x), 1), 1), Squeeze, Identity).
  for (int64_t dim1 : {1, 3}) {
    ModelBuilder mb;
    mb.input("x", kF32, {2, dim1, 4});
    mb.init_i64("one", {1}, {1});
    mb.init_i64("axis", {}, {1});
    mb.node("Shape", {"x"}, {"s"});
    mb.node("Gather", {"s", "axis"}, {"d"});
    mb.node("Equal", {"d", "one"}, {"c"});
    Branch then_b("then"), else_b("else");
    then_b.node("Squeeze", {"x", "one"}, {"sq"});
    then_b.output("sq");
    else_b.node("Identity", {"x"}, {"id"});
    else_b.output("id");
    onnx::NodeProto &n = mb.node("If", {"c"}, {"y"}, "squeeze");
    set_graph(n, "then_branch", then_b);
    set_graph(n, "else_branch", else_b);
    mb.output("y", dim1 == 1 ? 2 : 3);
    Graph g = import(mb, "if_shape" + std::to_string(dim1));
    ASSERT_EQ(g.ops().size(), 1u) << print_graph(g);
    EXPECT_EQ(g.ops()[0].name, dim1 == 1 ? "squeeze/Squeeze_0" : "squeeze/Identity_0");
    EXPECT_EQ(g.tensor(g.outputs[0]).shape, dim1 == 1 ? (Shape{2, 4}) : (Shape{2, 3, 4}));
  }
}

TEST(FoldIf, NestedIfAndOuterScopeNames) {
  // The outer then-branch computes a local tensor and a condition; the inner If reads both the local tensor and the
  // main graph's x. The inner else-branch returns an outer tensor as it is (an Identity copies it to the output).
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_f("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  bool_constant(mb.g(), "c", true);
  Branch inner_then("inner_then"), inner_else("inner_else");
  inner_then.node("Add", {"t", "w"}, {"u"}, "add");
  inner_then.output("u");
  inner_else.output("t");
  Branch outer_then("outer_then"), outer_else("outer_else");
  outer_then.node("Mul", {"x", "x"}, {"t"}, "sq");
  bool_constant(outer_then.g, "c2", false);
  onnx::NodeProto &inner = outer_then.node("If", {"c2"}, {"v"}, "inner");
  set_graph(inner, "then_branch", inner_then);
  set_graph(inner, "else_branch", inner_else);
  outer_then.node("Sub", {"v", "w"}, {"o"}, "sub");
  outer_then.output("o");
  outer_else.node("Neg", {"x"}, {"n"});
  outer_else.output("n");
  onnx::NodeProto &n = mb.node("If", {"c"}, {"y"}, "outer");
  set_graph(n, "then_branch", outer_then);
  set_graph(n, "else_branch", outer_else);
  mb.output("y", 2);
  Graph g = import(mb, "if_nested");
  std::string ir = print_graph(g);
  EXPECT_NE(ir.find("op outer/sq Mul"), std::string::npos) << ir;
  EXPECT_NE(ir.find("op outer/inner/Identity Identity"), std::string::npos) << ir;
  EXPECT_NE(ir.find("op outer/sub Sub"), std::string::npos) << ir;
  EXPECT_EQ(count_ops(g, OpKind::Add), 0) << ir;
  std::vector<double> y = run_forward(g, "x", kX, "y");
  for (size_t i = 0; i < kX.size(); ++i) EXPECT_FLOAT_EQ(y[i], kX[i] * kX[i] - static_cast<float>(i + 1)) << i;
}

TEST(FoldIf, BranchInitializerAndConstantsFold) {
  // The branch's own initializer and an outer initializer fold with the branch's constants into one constant.
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  bool_constant(mb.g(), "c", true);
  mb.init_i64("shape", {2}, {3, 2});
  Branch then_b("then"), else_b("else");
  auto *k = then_b.g.add_initializer();
  k->set_name("k");
  k->set_data_type(kI64);
  k->add_dims(1);
  k->add_int64_data(-1);
  then_b.node("Mul", {"shape", "k"}, {"neg_shape"});
  then_b.node("Neg", {"neg_shape"}, {"s2"});  // Neg of int64 constants: folded
  then_b.node("Reshape", {"x", "s2"}, {"r"});
  then_b.output("r");
  else_b.node("Identity", {"x"}, {"e"});
  else_b.output("e");
  onnx::NodeProto &n = mb.node("If", {"c"}, {"y"}, "if");
  set_graph(n, "then_branch", then_b);
  set_graph(n, "else_branch", else_b);
  mb.output("y", 2);
  Graph g = import(mb, "if_consts");
  ASSERT_EQ(g.ops().size(), 1u) << print_graph(g);
  EXPECT_EQ(g.ops()[0].kind, OpKind::Reshape);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (Shape{3, 2}));
}

TEST(FoldIf, RunTimeConditionIsUnsupported) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_f("zero", {}, {0});
  mb.node("ReduceSum", {"x"}, {"s"});
  mb.node("Greater", {"s", "zero"}, {"c"});
  relu_or_neg(mb, "c");
  auto [msg, code] = import_error(mb, "if_runtime");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, ": 1 unsupported node: \"if\" (If, ai.onnx, opset 13; its condition \"c\" is not a compile-time "
                  "constant)");
}

TEST(FoldIf, UnsupportedOpInTakenBranchIsNamed) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  bool_constant(mb.g(), "c", false);
  Branch then_b("then"), else_b("else");
  then_b.node("Relu", {"x"}, {"r"});
  then_b.output("r");
  else_b.node("Unique", {"x"}, {"d"}, "uniq");
  else_b.output("d");
  onnx::NodeProto &n = mb.node("If", {"c"}, {"y"}, "if");
  set_graph(n, "then_branch", then_b);
  set_graph(n, "else_branch", else_b);
  mb.output("y", 0);
  auto [msg, code] = import_error(mb, "if_unsupported");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, ": 1 unsupported node: \"if/uniq\" (Unique, ai.onnx, opset 13; in the else_branch of If \"if\")");
}

TEST(FoldIf, BranchAttributesAreCheckedBeforeShapeInference) {
  // A stride of 0 divides by zero inside ONNX's shape inference, which reads both branches: the checks that run
  // before it see branch nodes too.
  ModelBuilder mb;
  mb.input("x", kF32, {1, 1, 4, 4});
  mb.init_f("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  bool_constant(mb.g(), "c", false);
  Branch then_b("then"), else_b("else");
  test::set_ints(then_b.node("Conv", {"x", "w"}, {"v"}, "conv"), "strides", {0, 0});
  then_b.output("v");
  else_b.node("Identity", {"x"}, {"e"});
  else_b.output("e");
  onnx::NodeProto &n = mb.node("If", {"c"}, {"y"}, "if");
  set_graph(n, "then_branch", then_b);
  set_graph(n, "else_branch", else_b);
  mb.output("y", 4);
  auto [msg, code] = import_error(mb, "if_hostile");
  EXPECT_HAS(msg, "node \"conv\" (Conv, opset 13): attribute \"strides\" must be positive, got [0,0]");
}

/** A Loop body: (iter_num i64, cond bool, v f32) -> (cond_out bool, v_out f32, scan f32), nodes added by the caller. */
struct Body : Branch {
  Body() : Branch("body") {
    add_input("i", kI64);
    add_input("cond", kBool);
    add_input("v", kF32);
  }
  void add_input(const std::string &name, int type) {
    auto *vi = g.add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  }
  Body &typed_output(const std::string &name, int type) {
    output(name);
    g.mutable_output(g.output_size() - 1)->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
};

/** (vfinal, scans) = Loop(m, c, x) over `body`; m an i64 scalar initializer. */
void loop(ModelBuilder &mb, int64_t trips, const Body &body) {
  mb.init_i64("m", {}, {trips});
  bool_constant(mb.g(), "c", true);
  onnx::NodeProto &n = mb.node("Loop", {"m", "c", "x"}, {"vfinal", "scans"}, "loop");
  set_graph(n, "body", body);
  mb.output("vfinal", 2);
  mb.output("scans", 3);
}

/** v_out = v + x, scan = v * float(i): iteration i sees v = (i + 1) x. cond_out = cond, or i < `bound` (an outer
 *  tensor's name) where given. */
Body accumulate(const std::string &bound = "") {
  Body b;
  b.node("Add", {"v", "x"}, {"v2"}, "add");
  auto &cast = b.node("Cast", {"i"}, {"fi"}, "cast");
  test::set_int(cast, "to", kF32);
  b.node("Mul", {"v", "fi"}, {"s"}, "mul");
  if (bound.empty()) b.node("Identity", {"cond"}, {"cond_out"}, "keep");
  else b.node("Less", {"i", bound}, {"cond_out"}, "less");
  b.typed_output("cond_out", kBool).output("v2").output("s");
  return b;
}

TEST(UnrollLoop, CarriedValueAndScanOutput) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  loop(mb, 3, accumulate());
  Graph g = import(mb, "loop3");
  EXPECT_EQ(count_ops(g, OpKind::Add), 3) << print_graph(g);
  EXPECT_EQ(g.tensor(*g.find_tensor("scans")).shape, (Shape{3, 2, 3}));
  std::vector<double> v = run_forward(g, "x", kX, "vfinal"), s = run_forward(g, "x", kX, "scans");
  for (size_t e = 0; e < kX.size(); ++e) {
    double x = kX[e];
    EXPECT_DOUBLE_EQ(v[e], 4 * x);
    EXPECT_DOUBLE_EQ(s[e], 0.0);               // iteration 0: x * 0
    EXPECT_DOUBLE_EQ(s[6 + e], 2 * x * 1);      // iteration 1: 2x * 1
    EXPECT_DOUBLE_EQ(s[12 + e], 3 * x * 2);     // iteration 2: 3x * 2
  }
}

TEST(UnrollLoop, CondOutStopsAfterTheIterationThatClearsIt) {
  // cond_out = i < 1: iteration 0 continues, iteration 1 runs and stops the loop, as ONNX's reference does.
  Body b = accumulate("one");
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_i64("one", {}, {1});
  loop(mb, 5, b);
  Graph g = import(mb, "loop_cond");
  EXPECT_EQ(g.tensor(*g.find_tensor("scans")).shape, (Shape{2, 2, 3}));
  std::vector<double> v = run_forward(g, "x", kX, "vfinal");
  EXPECT_DOUBLE_EQ(v[1], 3 * kX[1]);
}

TEST(UnrollLoop, WhileLoopWithoutTripCountRunsUntilCondOutClears) {
  // M absent: cond_out = i < 2 stops it after iteration 2, so v = 4x and 3 scans.
  Body b = accumulate("two");
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_i64("two", {}, {2});
  bool_constant(mb.g(), "c", true);
  set_graph(mb.node("Loop", {"", "c", "x"}, {"vfinal", "scans"}, "loop"), "body", b);
  mb.output("vfinal", 2);
  mb.output("scans", 3);
  Graph g = import(mb, "loop_while");
  EXPECT_EQ(g.tensor(*g.find_tensor("scans")).shape, (Shape{3, 2, 3}));
  EXPECT_DOUBLE_EQ(run_forward(g, "x", kX, "vfinal")[1], 4 * kX[1]);
}

TEST(UnrollLoop, RunTimeOrLargeTripCountIsUnsupported) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.node("ReduceSum", {"x"}, {"sum"});
  test::set_int(mb.node("Cast", {"sum"}, {"m"}), "to", kI64);
  bool_constant(mb.g(), "c", true);
  set_graph(mb.node("Loop", {"m", "c", "x"}, {"vfinal", "scans"}, "loop"), "body", accumulate());
  mb.output("vfinal", 2);
  mb.output("scans", 3);
  auto [msg, code] = import_error(mb, "loop_runtime");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, ": 1 unsupported node: \"loop\" (Loop, ai.onnx, opset 13; its trip count \"m\" is not a "
                  "compile-time constant)");
  ModelBuilder big;
  big.input("x", kF32, {2, 3});
  loop(big, 5000, accumulate());
  auto [msg2, code2] = import_error(big, "loop_big");
  EXPECT_EQ(code2, 2);
  EXPECT_HAS(msg2, "(Loop, ai.onnx, opset 13; its trip count 5000 is more than the 4096 iterations unrolled at import)");
}

}  // namespace
}  // namespace cleave
