// Shape rules: expected shapes come from torch 1.13 / numpy (tests/describe/make_shape_cases.py prints them);
// diagnostics are checked by the exact message they print.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/shape_rules.h"

namespace cleave {
namespace {

using V = std::vector<int64_t>;

struct OneOp {
  Graph g;
  Op op;
  OneOp(OpKind kind, const std::vector<std::pair<Shape, DType>> &ins, AttrMap attrs, size_t n_out = 1,
        const std::vector<Shape> &declared = {}) {
    op.kind = kind;
    op.name = "n";
    op.attrs = std::move(attrs);
    for (size_t i = 0; i < ins.size(); ++i)
      op.inputs.push_back(g.add_tensor("in" + std::to_string(i), ins[i].second, ins[i].first, Role::input));
    for (size_t i = 0; i < n_out; ++i)
      op.outputs.push_back(g.add_tensor("out" + std::to_string(i), DType::f32,
                                        i < declared.size() ? declared[i] : Shape{}, Role::activation));
  }
  std::vector<TensorType> types() const { return infer_output_types(g, op); }
  Shape shape(size_t i = 0) const { return types().at(i).shape; }
  std::string error() const {
    try {
      infer_output_types(g, op);
    } catch (const UserError &e) {
      return e.what();
    }
    return "no error";
  }
};

const DType f = DType::f32, i64 = DType::i64;

TEST(ShapeRules, ConvAgainstTorch) {
  EXPECT_EQ(OneOp(OpKind::Conv, {{{2, 4, 9, 7}, f}, {{6, 2, 3, 2}, f}},
                  {{"group", int64_t{2}}, {"strides", V{2, 1}}, {"dilations", V{2, 1}}, {"pads", V{1, 0, 2, 1}}})
                .shape(),
            (Shape{2, 6, 4, 7}));
  EXPECT_EQ(OneOp(OpKind::Conv, {{{1, 3, 11}, f}, {{4, 3, 3}, f}}, {{"strides", V{3}}, {"pads", V{2, 1}}}).shape(),
            (Shape{1, 4, 4}));
  EXPECT_EQ(OneOp(OpKind::Conv, {{{1, 2, 5, 4, 4}, f}, {{2, 2, 2, 3, 2}, f}}, {{"pads", V{1, 1, 0, 1, 1, 0}}}).shape(),
            (Shape{1, 2, 6, 4, 3}));
}

TEST(ShapeRules, PoolsAgainstTorch) {
  auto pool = [](OpKind k, Shape x, int64_t kern, int64_t s, int64_t p, int64_t d, int64_t ceil) {
    AttrMap a{{"kernel_shape", V{kern, kern}}, {"strides", V{s, s}}, {"pads", V{p, p, p, p}},
              {"ceil_mode", ceil}};
    if (d != 1) a["dilations"] = V{d, d};
    return OneOp(k, {{x, DType::f32}}, a, k == OpKind::MaxPool ? 2 : 1).types();
  };
  std::vector<TensorType> t = pool(OpKind::MaxPool, {1, 1, 4, 4}, 3, 2, 0, 1, 1);
  EXPECT_EQ(t[0].shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ(t[1], (TensorType{DType::i64, {1, 1, 2, 2}}));  // Indices
  // The last window would start in the right padding: torch (and ONNX since 1.16's clarification) drop it.
  EXPECT_EQ(pool(OpKind::MaxPool, {1, 1, 5, 5}, 2, 2, 1, 1, 1)[0].shape, (Shape{1, 1, 3, 3}));
  EXPECT_EQ(pool(OpKind::MaxPool, {1, 1, 10, 10}, 3, 2, 1, 2, 0)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(pool(OpKind::AveragePool, {1, 1, 7, 7}, 3, 2, 1, 1, 1)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(OneOp(OpKind::GlobalAveragePool, {{{2, 3, 5, 7}, f}}, {}).shape(), (Shape{2, 3, 1, 1}));
}

TEST(ShapeRules, MatMulGemmBroadcastAgainstTorch) {
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{3}, f}, {{2, 3, 4}, f}}, {}).shape(), (Shape{2, 4}));
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{2, 4, 3}, f}, {{3}, f}}, {}).shape(), (Shape{2, 4}));
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{2, 1, 3, 4}, f}, {{5, 4, 6}, f}}, {}).shape(), (Shape{2, 5, 3, 6}));
  // transA / transB swap the stored operand's last two dims: torch.matmul(a.mT, b.mT).
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{2, 1, 4, 3}, f}, {{5, 6, 4}, f}}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}})
                .shape(),
            (Shape{2, 5, 3, 6}));
  EXPECT_EQ(OneOp(OpKind::Add, {{{2, 1, 4}, f}, {{3, 1}, f}}, {}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(OneOp(OpKind::Gemm, {{{3, 4}, f}, {{5, 3}, f}, {{4, 1}, f}}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}})
                .shape(),
            (Shape{4, 5}));
  // Under transA alone the leading dims are summed (a time-major Linear's weight gradient).
  EXPECT_EQ(OneOp(OpKind::Gemm, {{{3, 2, 4}, f}, {{3, 2, 5}, f}}, {{"transA", int64_t{1}}}).shape(), (Shape{4, 5}));
}

TEST(ShapeRules, LayoutAgainstNumpy) {
  EXPECT_EQ(OneOp(OpKind::Slice, {{{7, 6}, f}},
                  {{"starts", V{1, 5}}, {"ends", V{5, -1}}, {"axes", V{0, 1}}, {"steps", V{3, -2}}})
                .shape(),
            (Shape{2, 3}));
  EXPECT_EQ(OneOp(OpKind::Gather, {{{3, 5, 2}, f}, {{4, 2}, i64}}, {{"axis", int64_t{1}}}).shape(), (Shape{3, 4, 2, 2}));
  // The IR's shape is final (the importer resolved ONNX's 0 = copy): 0 is an empty dim.
  EXPECT_EQ(OneOp(OpKind::Reshape, {{{0, 3, 4}, f}}, {{"shape", V{3, 4, 0}}}).shape(), (Shape{3, 4, 0}));
  EXPECT_EQ(OneOp(OpKind::Transpose, {{{2, 3, 4}, f}}, {}).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(OneOp(OpKind::Expand, {{{3, 1}, f}}, {{"shape", V{2, 1, 5}}}).shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(OneOp(OpKind::Concat, {{{2, 1, 3}, f}, {{2, 4, 3}, f}}, {{"axis", int64_t{1}}}).shape(), (Shape{2, 5, 3}));
  OneOp split(OpKind::Split, {{{7, 2}, f}}, {{"axis", int64_t{0}}}, 3);
  EXPECT_EQ(split.shape(0), (Shape{3, 2}));  // ONNX: equal parts of ceil(7/3), the last one smaller
  EXPECT_EQ(split.shape(2), (Shape{1, 2}));
  EXPECT_EQ(OneOp(OpKind::ReduceSum, {{{2, 3, 4}, f}}, {{"axes", V{0, 2}}, {"keepdims", int64_t{0}}}).shape(),
            (Shape{3}));
  EXPECT_EQ(OneOp(OpKind::ReduceMean, {{{2, 3, 4}, f}}, {{"axes", V{1}}}).shape(), (Shape{2, 1, 4}));
}

TEST(ShapeRules, LossesNormsDropout) {
  OneOp sce(OpKind::SoftmaxCrossEntropyLoss, {{{4, 5, 3}, f}, {{4, 3}, i64}}, {{"reduction", std::string("none")}}, 2);
  EXPECT_EQ(sce.shape(0), (Shape{4, 3}));
  EXPECT_EQ(sce.shape(1), (Shape{4, 5, 3}));
  EXPECT_EQ(OneOp(OpKind::NegativeLogLikelihoodLoss, {{{4, 5}, f}, {{4}, i64}}, {}).shape(), Shape{});
  OneOp bn(OpKind::BatchNormalization, {{{8, 3, 4, 4}, f}, {{3}, f}, {{3}, f}, {{3}, f}, {{3}, f}},
           {{"training_mode", int64_t{1}}}, 5);
  std::vector<TensorType> t = bn.types();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].shape, (Shape{8, 3, 4, 4}));
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(t[i].shape, Shape{3});
  OneOp drop(OpKind::Dropout, {{{4, 6}, f}}, {}, 2);
  EXPECT_EQ(drop.types()[1], (TensorType{DType::boolean, {4, 6}}));
}

TEST(ShapeRules, BackwardAndUpdateKinds) {
  AttrMap a{{"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}};
  EXPECT_EQ(OneOp(OpKind::ConvGradData, {{{8, 16, 8, 8}, f}, {{16, 3, 3, 3}, f}}, a, 1, {{8, 3, 16, 16}}).shape(),
            (Shape{8, 3, 16, 16}));
  // A 15x15 input gives the same 8x8 output with stride 2, so both are accepted; 14x14 does not.
  EXPECT_EQ(OneOp(OpKind::ConvGradData, {{{8, 16, 8, 8}, f}, {{16, 3, 3, 3}, f}}, a, 1, {{8, 3, 15, 15}}).shape(),
            (Shape{8, 3, 15, 15}));
  EXPECT_EQ(OneOp(OpKind::ConvGradData, {{{8, 16, 8, 8}, f}, {{16, 3, 3, 3}, f}}, a, 1, {{8, 3, 14, 14}}).error(),
            "op \"n\" (ConvGradData): dY [8,16,8,8] is not the Conv output [8,16,7,7] of dX [8,3,14,14] and W "
            "[16,3,3,3]");
  EXPECT_EQ(OneOp(OpKind::ConvGradFilter, {{{8, 16, 8, 8}, f}, {{8, 3, 16, 16}, f}}, a, 1, {{16, 3, 3, 3}}).shape(),
            (Shape{16, 3, 3, 3}));
  EXPECT_EQ(OneOp(OpKind::PowGrad, {{{2, 3}, f}, {{2, 3}, f}, {{3}, f}}, {}, 2).shape(1), (Shape{2, 3}));
  EXPECT_EQ(OneOp(OpKind::SliceGrad, {{{3, 8}, f}},
                  {{"starts", V{1}}, {"ends", V{7}}, {"axes", V{0}}, {"steps", V{2}}}, 1, {{8, 8}}).shape(),
            (Shape{8, 8}));
  OneOp adam(OpKind::Adam, {{{}, f}, {{}, i64}, {{2}, f}, {{3}, f}, {{2}, f}, {{3}, f}, {{2}, f}, {{3}, f},
                            {{2}, f}, {{3}, f}}, {}, 6);
  EXPECT_EQ(adam.shape(4), Shape{2});
  EXPECT_EQ(adam.shape(5), Shape{3});
  EXPECT_EQ(OneOp(OpKind::AdamUpdate, {{{2}, f}, {{2}, f}, {{2}, f}, {{2}, f}}, {}, 3).shape(2), Shape{2});
}

TEST(ShapeRules, Diagnostics) {
  EXPECT_EQ(OneOp(OpKind::Add, {{{2, 3}, f}, {{4}, f}}, {}).error(),
            "op \"n\" (Add): shapes [2,3] and [4] are not broadcastable");
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{2, 3}, f}, {{4, 5}, f}}, {}).error(),
            "op \"n\" (MatMul): inner dims differ: A [2,3] and B [4,5]");
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{3, 2}, f}, {{5, 4}, f}}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}}).error(),
            "op \"n\" (MatMul): inner dims differ: A [3,2] (transposed) and B [5,4] (transposed)");
  EXPECT_EQ(OneOp(OpKind::MatMul, {{{3}, f}, {{3, 4}, f}}, {{"transA", int64_t{1}}}).error(),
            "op \"n\" (MatMul): transA needs A of rank >= 2, got [3]");
  EXPECT_EQ(OneOp(OpKind::Gemm, {{{3, 2, 4}, f}, {{3, 4, 5}, f}}, {{"transA", int64_t{1}}}).error(),
            "op \"n\" (Gemm): A [3,2,4] and B [3,4,5] differ in their leading dims");
  EXPECT_EQ(OneOp(OpKind::Gemm, {{{3, 2, 4}, f}, {{3, 2, 5}, f}}, {}).error(),
            "op \"n\" (Gemm): A and B must be 2-D, got [3,2,4] and [3,2,5]");
  EXPECT_EQ(OneOp(OpKind::Conv, {{{1, 4, 5, 5}, f}, {{2, 3, 3, 3}, f}}, {}).error(),
            "op \"n\" (Conv): W [2,3,3,3] expects 3 input channels, X [1,4,5,5] has 4");
  EXPECT_EQ(OneOp(OpKind::Softmax, {{{2, 3}, f}}, {{"axis", int64_t{2}}}).error(),
            "op \"n\" (Softmax): axis 2 out of range for rank 2");
  EXPECT_EQ(OneOp(OpKind::Reshape, {{{2, 3}, f}}, {{"shape", V{4, 2}}}).error(),
            "op \"n\" (Reshape): cannot reshape [2,3] to [4,2]");
  EXPECT_EQ(OneOp(OpKind::Gemm, {{{2, 3}, f}, {{3, 4}, f}, {{3}, f}}, {}).error(),
            "op \"n\" (Gemm): C [3] does not broadcast to [2,4]");
  EXPECT_EQ(OneOp(OpKind::MaxPool, {{{1, 1, 2, 2}, f}}, {{"kernel_shape", V{3, 3}}}).error(),
            "op \"n\" (MaxPool): spatial dim 0 of X [1,1,2,2] is smaller than the kernel");
  EXPECT_EQ(OneOp(OpKind::Transpose, {{{2, 3}, f}}, {{"perm", V{0, 0}}}).error(),
            "op \"n\" (Transpose): perm [0,0] is not a permutation of rank 2");
  EXPECT_EQ(OneOp(OpKind::NegativeLogLikelihoodLoss, {{{4, 5}, f}, {{3}, i64}}, {}).error(),
            "op \"n\" (NegativeLogLikelihoodLoss): target [3] must have shape [4] (input without its class dim)");
  EXPECT_EQ(OneOp(OpKind::TopKIndices, {{{2, 5}, f}}, {{"axis", int64_t{1}}, {"k", int64_t{2}}}).error(),
            "op \"n\" (TopKIndices): needs the attribute largest");
  EXPECT_EQ(OneOp(OpKind::TopKIndices, {{{2, 5}, f}}, {{"axis", int64_t{1}}, {"k", int64_t{6}}, {"largest", int64_t{1}}})
                .error(),
            "op \"n\" (TopKIndices): k = 6 is outside [1, 5] (axis 1 of X [2,5])");
  EXPECT_EQ(OneOp(OpKind::TopKIndices, {{{2, 5}, f}}, {{"axis", int64_t{1}}, {"k", int64_t{2}}, {"largest", int64_t{0}}})
                .shape(),
            (Shape{2, 2}));
}

}  // namespace
}  // namespace cleave
