// Every op kind has a description; golden text of to_string for a few ops; derived queries.
#include <gtest/gtest.h>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/parser.h"

namespace cleave::describe {
namespace {

TEST(Describe, EveryKindHasADescriptionPerOutput) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    Graph g = example_op(kind);
    ASSERT_EQ(g.num_ops(), 1);
    const Op &op = g.op(0);
    std::vector<Description> ds = describe(g, op);
    ASSERT_EQ(ds.size(), op.outputs.size());
    for (size_t i = 0; i < ds.size(); ++i) {
      const Description &d = ds[i];
      ASSERT_TRUE(d.body != nullptr);
      EXPECT_EQ(d.output_slot, static_cast<int>(i));
      EXPECT_EQ(d.output_shape, g.tensor(op.outputs[i]).shape);
      EXPECT_EQ(d.output_index.size(), d.output_shape.size());
      // Output vars cover the output: their extents multiply to at least the output size (injective index).
      int64_t outs = 1;
      for (const LoopVar &v : d.vars)
        if (v.role == VarRole::output) outs *= v.extent;
      EXPECT_EQ(outs, num_elements(d.output_shape)) << to_string(d);
      EXPECT_FALSE(to_string(d).empty());
      EXPECT_GE(flops(d), 0);
    }
    EXPECT_FALSE(describe_kind(std::string(op_kind_name(kind))).empty());
  }
}

TEST(Describe, ConvGolden) {
  Graph g = example_op(OpKind::Conv);
  std::vector<Description> ds = describe(g, g.op(0));
  EXPECT_EQ(to_string(ds[0]),
            "Y[b,co,y,x] = sum(ci,ky,kx)(X[b,ci,y*2+ky-1,x*2+kx-1] * W[co,ci,ky,kx]) + B[co]"
            "  {b=8, co=16, y=8, x=8, ci=3, ky=3, kx=3}");
  // 2 FLOPs (multiply, add) per point of the 8*16*8*8 x 3*3*3 iteration space, plus the bias add per output.
  EXPECT_EQ(flops(ds[0]), 2 * 8 * 16 * 8 * 8 * 27 + 8 * 16 * 8 * 8);
  std::vector<int> split = splittable_vars(ds[0]);
  EXPECT_EQ(split.size(), 7u);
  EXPECT_EQ(split_kind(ds[0], ds[0].var("co")), SplitKind::concat);
  EXPECT_EQ(split_kind(ds[0], ds[0].var("ci")), SplitKind::partial);
}

TEST(Describe, GemmAndMatMulGolden) {
  Graph g = example_op(OpKind::Gemm);
  EXPECT_EQ(to_string(describe(g, g.op(0))[0]),
            "Y[m,n] = sum(k)(A[m,k] * B[n,k]) + C[n]  {m=4, n=5, k=3}");
  Graph mm = example_op(OpKind::MatMul);
  EXPECT_EQ(to_string(describe(mm, mm.op(0))[0]), "Y[b,m,n] = sum(k) A[b,m,k] * B[k,n]  {b=2, m=4, n=5, k=3}");
}

TEST(Describe, OpaqueDimsAreNotSplittable) {
  Graph g = example_op(OpKind::Softmax);
  Description d = describe(g, g.op(0))[0];
  EXPECT_EQ(to_string(d), "Y[i,j] = softmax_j(X[i,j])  {i=4, j=6} opaque(j)");
  EXPECT_EQ(split_kind(d, d.var("i")), SplitKind::concat);
  EXPECT_EQ(split_kind(d, d.var("j")), SplitKind::none);
  EXPECT_FALSE(is_evaluable(d));
}

TEST(Describe, BatchStatisticsAreSynced) {
  // BatchNorm's batch and spatial dims are opaque (statistics need all of them) but synced: splittable, the kernel
  // all-reducing the per-channel sums; the channel stays an ordinary var.
  Graph g = example_op(OpKind::BatchNormalization);
  std::vector<Description> ds = describe(g, g.op(0));
  EXPECT_EQ(to_string(ds[0]), "Y[b,c,y,x] = normalize_b_spatial(X[b,c,y,x]) * scale[c] + B[c]  {b=8, c=3, y=16, x=16} "
                              "opaque(b,y,x) synced(b,y,x)");
  EXPECT_EQ(split_kind(ds[0], ds[0].var("b")), SplitKind::synced);
  EXPECT_EQ(split_kind(ds[0], ds[0].var("c")), SplitKind::concat);
  for (const Description &d : ds)  // the statistics too: they come out whole, not partial
    EXPECT_EQ(split_kind(d, d.var("b")), SplitKind::synced) << d.output_name;
  Graph gg = example_op(OpKind::BatchNormalizationGrad);
  for (const Description &d : describe(gg, gg.op(0))) EXPECT_EQ(split_kind(d, d.var("b")), SplitKind::synced);
  // A plain mean loss is a partial sum over n (no mark); its class dim stays internal.
  Graph l = example_op(OpKind::SoftmaxCrossEntropyLoss);
  Description loss = describe(l, l.op(0))[0];
  EXPECT_EQ(split_kind(loss, loss.var("n")), SplitKind::partial);
  EXPECT_EQ(split_kind(loss, loss.var("c")), SplitKind::none);
  EXPECT_FALSE(loss.vars[static_cast<size_t>(loss.var("n"))].synced);
}

TEST(Describe, WeightedMeanLossPositionsAreSynced) {
  // ignore_index makes the mean a weighted one (divided by the count of kept labels): n is internal and synced in
  // the loss, an opaque synced output var in its gradient; the class var is never synced.
  Graph g = parse_graph(R"(graph wl
tensor s f32[6,5] input
tensor y i64[6] label
tensor w f32[5] constant
tensor loss f32[] activation
tensor lp f32[6,5] activation
tensor dl f32[] constant
tensor ds f32[6,5] grad
op sce SoftmaxCrossEntropyLoss forward (s, y, w) -> (loss, lp) {ignore_index=1, reduction="mean"}
op sceg SoftmaxCrossEntropyLossGrad backward (dl, lp, y, w) -> (ds) {ignore_index=1, reduction="mean"}
)");
  std::vector<Description> f = describe(g, g.op(0));
  EXPECT_EQ(f[0].vars[static_cast<size_t>(f[0].var("n"))].role, VarRole::internal);
  EXPECT_EQ(split_kind(f[0], f[0].var("n")), SplitKind::synced);
  EXPECT_EQ(split_kind(f[0], f[0].var("c")), SplitKind::none);
  EXPECT_EQ(split_kind(f[1], f[1].var("n")), SplitKind::concat);  // log_prob: row-wise, nothing to synchronise
  Description b = describe(g, g.op(1))[0];
  EXPECT_EQ(split_kind(b, b.var("n")), SplitKind::synced);
  EXPECT_EQ(split_kind(b, b.var("c")), SplitKind::concat);
  EXPECT_NE(to_string(b).find(" opaque(n) synced(n)"), std::string::npos) << to_string(b);
}

TEST(Describe, WindowsAndTransposedWindowsGolden) {
  Graph g = example_op(OpKind::ConvGradData);
  EXPECT_EQ(to_string(describe(g, g.op(0))[0]),
            "dX[b,ci,y,x] = sum(co,ky,kx) dY[b,co,(y-ky+1)/2,(x-kx+1)/2] * W[co,ci,ky,kx]"
            "  {b=8, ci=3, y=16, x=16, co=16, ky=3, kx=3}");
  Graph s = example_op(OpKind::SliceGrad);
  EXPECT_EQ(to_string(describe(s, s.op(0))[0]), "dX[i,j] = dY[(i-1)/2,j]  {i=8, j=8}");
  Graph r = example_op(OpKind::Reshape);
  EXPECT_EQ(to_string(describe(r, r.op(0))[0]), "Y[i,j*16+k*4+l] = X[i,j,k,l]  {i=8, j=16, k=4, l=4}");
}

TEST(Describe, KindNamesAndAliases) {
  EXPECT_NE(describe_kind("Flatten").find("Flatten imports as Reshape"), std::string::npos);
  EXPECT_NE(describe_kind("Conv").find("Y[b,co,y,x]"), std::string::npos);
  try {
    describe_kind("Frobnicate");
    FAIL() << "expected a UserError";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), "unknown op kind \"Frobnicate\"");
  }
}

}  // namespace
}  // namespace cleave::describe

namespace cleave::describe {
namespace {

TEST(Describe, PaddingValueOtherThanZeroIsPrinted) {
  Graph g = example_op(OpKind::MaxPool);
  EXPECT_EQ(to_string(describe(g, g.op(0))[0]),
            "Y[b,c,y,x] = max(ky,kx) X[b,c,y*2+ky-1,x*2+kx-1]  {b=8, c=3, y=8, x=8, ky=3, kx=3} pad(X=-inf)");
}

}  // namespace
}  // namespace cleave::describe

namespace cleave::describe {
namespace {

Graph reshape_graph(Shape in, std::vector<int64_t> shape) {
  Graph g;
  Op op;
  op.kind = OpKind::Reshape;
  op.name = "r";
  op.attrs["shape"] = shape;
  op.inputs.push_back(g.add_tensor("X", DType::f32, in, Role::input));
  op.outputs.push_back(g.add_tensor("Y", DType::f32, Shape(shape.begin(), shape.end()), Role::activation));
  g.add_op(op);
  return g;
}

TEST(Describe, ReshapeRegroupingIsOpaque) {
  Graph g = reshape_graph({6, 4}, {4, 6});
  Description d = describe(g, g.op(0))[0];
  EXPECT_EQ(to_string(d), "Y[i,j] = reshape(X[k,l])  {i=4, j=6, k=6, l=4} opaque(i,j,k,l)");
  EXPECT_TRUE(splittable_vars(d).empty());
  // Unit dims are indexed by 0 and do not block the affine groups around them.
  Graph u = reshape_graph({2, 3, 1, 4}, {6, 1, 4});
  EXPECT_EQ(to_string(describe(u, u.op(0))[0]), "Y[i*3+j,0,k] = X[i,j,0,k]  {i=2, j=3, k=4}");
}

}  // namespace
}  // namespace cleave::describe

namespace cleave::describe {
namespace {

// Edge and reflect padding read a clamped or mirrored index, which is not affine: the padded dims are opaque (so
// never split) and the access still spans the whole of X along them; unpadded dims stay splittable.
TEST(Describe, EdgeAndReflectPaddedDimsAreOpaque) {
  for (std::string mode : {"edge", "reflect"}) {
    Graph g;
    Op op;
    op.kind = OpKind::Pad;
    op.name = "p";
    op.attrs["pads"] = std::vector<int64_t>{0, 2, 0, 1};
    op.attrs["value"] = 0.0;
    op.attrs["mode"] = mode;
    op.inputs.push_back(g.add_tensor("X", DType::f32, {4, 5}, Role::input));
    op.outputs.push_back(g.add_tensor("Y", DType::f32, {4, 8}, Role::activation));
    g.add_op(op);
    Description d = describe(g, g.op(0))[0];
    EXPECT_EQ(to_string(d), "Y[i,j] = pad_" + mode + "(X[i,j-2])  {i=4, j=8} opaque(j)");
    EXPECT_EQ(splittable_vars(d), std::vector<int>{0});
  }
}

}  // namespace
}  // namespace cleave::describe
