// torch.isinf(x) of a float32 x exports as IsInf(Cast(x, to=double)); Cleave tests x itself
// (frontend/class_test_casts.h), so the model stays float32, and the classes are those of the two nodes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "frontend/class_test_casts.h"
#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::import;
using test::kF32;
using test::ModelBuilder;

constexpr int kF64 = onnx::TensorProto::DOUBLE;
constexpr int kBool = onnx::TensorProto::BOOL;

/** x [4] of `from` -> Cast(to) -> IsInf and IsNaN -> inf, nan; `cast_out` also outputs the Cast's result. */
ModelBuilder class_tests(int from, int to, bool cast_out) {
  ModelBuilder mb(13);
  mb.input("x", from, {4});
  test::set_int(mb.node("Cast", {"x"}, {"wide"}, "/Cast"), "to", to);
  mb.node("IsInf", {"wide"}, {"inf"}, "/IsInf");
  mb.node("IsNaN", {"wide"}, {"nan"}, "/IsNaN");
  mb.output("inf", 1, kBool);
  mb.output("nan", 1, kBool);
  if (cast_out) mb.output("wide", 1, to);
  return mb;
}

bool has_dtype(const Graph &g, DType d) {
  for (const Tensor &t : g.tensors())
    if (t.dtype == d) return true;
  return false;
}

TEST(ClassTestCasts, AWideningCastBeforeIsInfAndIsNaNIsNotEmitted) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1.5f, inf, -inf, nan};
  Graph g = import(class_tests(kF32, kF64, false), "isinf_of_double");
  EXPECT_FALSE(has_dtype(g, DType::f64)) << print_graph(g);
  EXPECT_EQ(test::run_forward(g, "x", x, "inf"), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(test::run_forward(g, "x", x, "nan"), (std::vector<double>{0, 0, 0, 1}));
  // The Cast's result also a graph output: imported node by node, with the same classes.
  Graph plain = import(class_tests(kF32, kF64, true), "isinf_of_double_plain");
  EXPECT_TRUE(has_dtype(plain, DType::f64));
  EXPECT_EQ(test::run_forward(plain, "x", x, "inf"), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(test::run_forward(plain, "x", x, "nan"), (std::vector<double>{0, 0, 0, 1}));
}

TEST(ClassTestCasts, ANarrowingCastIsKept) {
  // float64 to float32 makes 1e300 infinite: the test must see the Cast's result.
  Graph g = import(class_tests(kF64, kF32, false), "isinf_of_narrowed");
  EXPECT_EQ(test::count_ops(g, OpKind::Cast), 1) << print_graph(g);
  interp::Values v = interp::initial_values(g);
  v[static_cast<size_t>(*g.find_tensor("x"))] = interp::Value{DType::f64, {4}, {1e300, 1.0, 0.0, -1e300}};
  interp::run_graph(g, v, interp::Context{});
  EXPECT_EQ(v[static_cast<size_t>(*g.find_tensor("inf"))]->data, (std::vector<double>{1, 0, 0, 1}));
}

TEST(ClassTestCasts, ACastASubgraphOutputsOrTrainingInfoMayReadIsKept) {
  // An If branch that outputs the Cast's result as it is: the If reads it.
  ModelBuilder branch_out = class_tests(kF32, kF64, false);
  onnx::NodeProto &if_node = branch_out.node("If", {"x"}, {"chosen"}, "/If");
  for (const char *name : {"then_branch", "else_branch"}) {
    onnx::AttributeProto *a = if_node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
    a->mutable_g()->add_output()->set_name("wide");
  }
  EXPECT_TRUE(find_class_test_casts(branch_out.m.graph()).empty());
  EXPECT_EQ(find_class_test_casts(class_tests(kF32, kF64, false).m.graph()).size(), 1u);
  // A model with training_info: its algorithm may read any tensor, so the Cast is imported.
  ModelBuilder trained = class_tests(kF32, kF64, false);
  trained.m.add_training_info();
  Graph g = import(trained, "isinf_of_double_training_info");
  EXPECT_EQ(test::count_ops(g, OpKind::Cast), 1) << print_graph(g);
}

}  // namespace
}  // namespace cleave
