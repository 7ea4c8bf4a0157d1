// torch's nn.Linear on inputs of rank > 2 (Transpose(W) + MatMul) imports as a Gemm by W with transB, without the
// Transpose (frontend/transposed_weights.h), and computes what the two nodes compute.
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

TEST(TransposedWeights, AVectorTimesTheTransposeStillTransposes) {
  Graph g = import(linear_model({4}, false), "linear_vector");
  EXPECT_EQ(test::count_ops(g, OpKind::Transpose), 1) << print_graph(g);
  ASSERT_TRUE(g.find_op("/fc/Transpose"));
  EXPECT_EQ(g.op(*g.find_op("/fc/MatMul")).kind, OpKind::MatMul);
  EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, (Shape{5}));
}

}  // namespace
}  // namespace cleave
