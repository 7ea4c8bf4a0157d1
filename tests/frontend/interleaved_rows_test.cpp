// torch's attention out-projection on time-major activations (Reshape [T, B, E] to rows, Gemm, Reshape back) imports
// as a MatMul on [T, B, E] (frontend/interleaved_rows.h), computes what the three nodes compute, and leaves its data
// plan nothing to gather (tests/planner/interleaved_rows_plan_test.cpp); rows that do not interleave samples keep
// their Gemm.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tests/frontend/attention_models.h"
#include "tests/frontend/import_helpers.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::B;
using test::E;
using test::F;
using test::out_projection;
using test::T;

TEST(InterleavedRows, TimeMajorOutProjectionIsAMatMulOnItsDims) {
  Graph g = import(out_projection(true, false), "out_projection");
  EXPECT_EQ(test::count_ops(g, OpKind::Gemm), 0) << print_graph(g);
  std::optional<OpId> mm = g.find_op("/attn/Gemm");
  ASSERT_TRUE(mm) << print_graph(g);
  EXPECT_EQ(g.op(*mm).kind, OpKind::MatMul);
  EXPECT_EQ(g.tensor(g.op(*mm).inputs[0]).shape, (Shape{T, B, E}));
  EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, (Shape{T, B, F}));
  // The oracle: the same nodes imported one by one.
  Graph plain = import(out_projection(true, true), "out_projection_plain");
  ASSERT_EQ(test::count_ops(plain, OpKind::Gemm), 1) << print_graph(plain);
  std::vector<float> xv = test::random_floats(B * T * E, 3, 1.0f);
  std::vector<double> a = test::run_forward(g, "x", xv, "y"), b = test::run_forward(plain, "x", xv, "y");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << i;
}

TEST(InterleavedRows, RowsReshapedOtherwiseKeepTheirGemm) {
  // The result reshaped to [T, B*F] (rank 2) or [T*B*F] (the rows not unfolded): no MatMul on [T, B, E] computes it,
  // so the chain is imported node by node.
  for (const std::vector<int64_t> &shape : {std::vector<int64_t>{T, B * F}, std::vector<int64_t>{T * B * F}}) {
    Graph g = import(out_projection(true, false, false, shape), "rows_other_shape");
    std::optional<OpId> gemm = g.find_op("/attn/Gemm");
    ASSERT_TRUE(gemm) << print_graph(g);
    EXPECT_EQ(g.op(*gemm).kind, OpKind::Gemm);
    EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, Shape(shape.begin(), shape.end()));
  }
}

TEST(InterleavedRows, BatchFirstRowsKeepTheirGemm) {
  Graph g = import(out_projection(false, false), "batch_first");
  std::optional<OpId> gemm = g.find_op("/attn/Gemm");
  ASSERT_TRUE(gemm) << print_graph(g);
  EXPECT_EQ(g.op(*gemm).kind, OpKind::Gemm);
  EXPECT_EQ(test::count_ops(g, OpKind::MatMul), 0) << print_graph(g);
}

TEST(InterleavedRows, RowsShapeFromARuntimeValueIsOneErrorNamingTheNode) {
  // The chain's first Reshape takes its shape from a graph input: the rewrite needs it at compile time, as node-by-node
  // import does, and says so naming the node.
  test::ModelBuilder mb(14);
  mb.input("x", kF32, {B, T, E});
  mb.input("rows_shape", test::kI64, {2});
  mb.init_f("out_proj.weight", {F, E}, test::random_floats(F * E, 1, 1.0f));
  mb.init_i64("out_shape", {3}, {T, B, -1});
  test::set_ints(mb.node("Transpose", {"x"}, {"xt"}, "/attn/Transpose"), "perm", {1, 0, 2});
  mb.node("Reshape", {"xt", "rows_shape"}, {"rows"}, "/attn/Reshape_3");
  test::set_int(mb.node("Gemm", {"rows", "out_proj.weight"}, {"proj"}, "/attn/Gemm"), "transB", 1);
  mb.node("Reshape", {"proj", "out_shape"}, {"y"}, "/attn/Reshape_4");
  mb.output("y", 3);
  auto [message, code] = test::import_error(mb, "rows_shape_runtime");
  EXPECT_NE(message.find("/attn/Reshape_3"), std::string::npos) << message;
  EXPECT_NE(message.find("shape"), std::string::npos) << message;
  EXPECT_NE(code, 0);
}

}  // namespace
}  // namespace cleave
