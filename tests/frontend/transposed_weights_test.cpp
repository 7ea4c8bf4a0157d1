// torch's nn.Linear on inputs of rank > 2 (Transpose(W) + MatMul) imports as a Gemm by W with transB, and any other
// MatMul of a last-two-dims Transpose reads the operand with transA / transB, without the Transpose
// (frontend/transposed_weights.h); each computes what the two nodes compute.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::ModelBuilder;

/** x -> MatMul(x, Transpose(W [5, 4])) -> y, named as torch names a Linear; `wt_out` also outputs the transpose. */
ModelBuilder linear_model(const Shape &x, bool wt_out) {
  ModelBuilder mb(14);
  mb.input("x", kF32, x);
  mb.init_f("fc.weight", {5, 4}, test::random_floats(20, 1, 1.0f));
  test::set_ints(mb.node("Transpose", {"fc.weight"}, {"wt"}, "/fc/Transpose"), "perm", {1, 0});
  mb.node("MatMul", {"x", "wt"}, {"y"}, "/fc/MatMul");
  mb.output("y", static_cast<int>(x.size()));
  if (wt_out) mb.output("wt", 2);
  return mb;
}

TEST(TransposedWeights, LinearOfABatchIsAGemmByTheWeight) {
  for (Shape x : {Shape{2, 3, 4}, Shape{6, 4}}) {
    Graph g = import(linear_model(x, false), "linear");
    EXPECT_EQ(test::count_ops(g, OpKind::Transpose), 0) << print_graph(g);
    std::optional<OpId> gemm = g.find_op("/fc/MatMul");
    ASSERT_TRUE(gemm) << print_graph(g);
    EXPECT_EQ(g.op(*gemm).kind, OpKind::Gemm);
    EXPECT_EQ(g.op(*gemm).attr_int("transB"), 1);
    EXPECT_EQ(g.tensor(g.op(*gemm).inputs[1]).name, "fc.weight");
    Shape y = x;
    y.back() = 5;
    EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, y);
    // The oracle: the transpose also a graph output, so it is imported node by node.
    Graph plain = import(linear_model(x, true), "linear_plain");
    ASSERT_EQ(test::count_ops(plain, OpKind::Transpose), 1);
    std::vector<float> xv = test::random_floats(24, 2, 1.0f);  // both shapes hold 24 elements
    std::vector<double> a = test::run_forward(g, "x", xv, "y"), b = test::run_forward(plain, "x", xv, "y");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << i;
  }
}

TEST(TransposedWeights, AVectorTimesTheTransposeReadsTheWeight) {
  Graph g = import(linear_model({4}, false), "linear_vector");
  EXPECT_EQ(test::count_ops(g, OpKind::Transpose), 0) << print_graph(g);
  const Op &mm = g.op(*g.find_op("/fc/MatMul"));
  EXPECT_EQ(mm.kind, OpKind::MatMul);
  EXPECT_EQ(mm.attr_int("transB", 0), 1);
  EXPECT_EQ(g.tensor(mm.inputs[1]).name, "fc.weight");
  EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, (Shape{5}));
  Graph plain = import(linear_model({4}, true), "linear_vector_plain");
  std::vector<float> xv = test::random_floats(4, 3, 1.0f);
  std::vector<double> a = test::run_forward(g, "x", xv, "y"), b = test::run_forward(plain, "x", xv, "y");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << i;
}

/** Attention's scores, q [2, 3, 4] times Transpose(k, [0, 2, 1]), and Transpose(q) times a weight [3, 5], where k
 *  and q come from x by ops of their own; `keep` also outputs both transposes (the graph imported node by node), and
 *  `other_reader` adds a Relu of one, which then stays. */
ModelBuilder scores_model(bool keep, bool other_reader) {
  ModelBuilder mb(14);
  mb.input("x", kF32, {2, 3, 4});
  mb.init_f("w", {3, 5}, test::random_floats(15, 4, 1.0f));
  mb.node("Neg", {"x"}, {"k"}, "/k");
  mb.node("Sigmoid", {"x"}, {"q"}, "/q");
  test::set_ints(mb.node("Transpose", {"k"}, {"kt"}, "/kt"), "perm", {0, 2, 1});
  test::set_ints(mb.node("Transpose", {"q"}, {"qt"}, "/qt"), "perm", {0, 2, 1});
  mb.node("MatMul", {"q", "kt"}, {"scores"}, "/scores");
  mb.node("MatMul", {"qt", "w"}, {"proj"}, "/proj");
  mb.output("scores", 3);
  mb.output("proj", 3);
  if (keep) {
    mb.output("kt", 3);
    mb.output("qt", 3);
  }
  if (other_reader) {
    mb.node("Relu", {"kt"}, {"r"}, "/r");
    mb.output("r", 3);
  }
  return mb;
}

TEST(TransposedWeights, MatMulsReadTransposedActivationsThroughTheirFlags) {
  Graph g = import(scores_model(false, false), "scores");
  EXPECT_EQ(test::count_ops(g, OpKind::Transpose), 0) << print_graph(g);
  const Op &scores = g.op(*g.find_op("/scores")), &proj = g.op(*g.find_op("/proj"));
  EXPECT_EQ(scores.attr_int("transB", 0), 1);
  EXPECT_EQ(g.tensor(scores.inputs[1]).name, "k");
  EXPECT_EQ(proj.attr_int("transA", 0), 1);
  EXPECT_EQ(g.tensor(proj.inputs[0]).name, "q");
  Graph plain = import(scores_model(true, false), "scores_plain");
  EXPECT_EQ(test::count_ops(plain, OpKind::Transpose), 2);
  std::vector<float> xv = test::random_floats(24, 5, 1.0f);
  for (const char *y : {"scores", "proj"}) {
    std::vector<double> a = test::run_forward(g, "x", xv, y), b = test::run_forward(plain, "x", xv, y);
    ASSERT_EQ(a.size(), b.size()) << y;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << y << " " << i;
  }
  // A Transpose that another kind of op reads too is imported.
  Graph other = import(scores_model(false, true), "scores_other");
  EXPECT_EQ(test::count_ops(other, OpKind::Transpose), 1) << print_graph(other);
  ASSERT_TRUE(other.find_op("/kt"));
}

}  // namespace
}  // namespace cleave
