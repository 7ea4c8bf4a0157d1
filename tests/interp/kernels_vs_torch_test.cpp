// Forward and backward kernels against torch 1.13 (float64) references from make_reference.py.
#include "tests/interp/reference_data.h"

namespace cleave::interp::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(InterpTorch, Conv2dGroupsStrideDilationAsymmetricPads) {
  Case c;
  TensorId x = c.feed("conv2d.x"), w = c.feed("conv2d.w", DType::f32, Role::param), b = c.feed("conv2d.b");
  TensorId dy = c.feed("conv2d.dy");
  AttrMap attrs{{"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{2, 1}}, {"group", int64_t{2}}};
  TensorId y = c.out_like("conv2d.y"), dx = c.out_like("conv2d.dx"), dw = c.out_like("conv2d.dw");
  c.op(OpKind::Conv, {x, w, b}, {y}, attrs);
  c.op(OpKind::ConvGradData, {dy, w}, {dx}, attrs, Phase::backward);
  c.op(OpKind::ConvGradFilter, {dy, x}, {dw}, attrs, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "conv2d.y");
  expect_matches(v, dx, "conv2d.dx");
  expect_matches(v, dw, "conv2d.dw");
}

TEST(InterpTorch, Conv1dNoBias) {
  Case c;
  TensorId x = c.feed("conv1d.x"), w = c.feed("conv1d.w"), dy = c.feed("conv1d.dy");
  AttrMap attrs{{"strides", Ints{2}}, {"pads", Ints{1, 1}}, {"dilations", Ints{2}}, {"group", int64_t{1}}};
  TensorId y = c.out_like("conv1d.y"), dx = c.out_like("conv1d.dx"), dw = c.out_like("conv1d.dw");
  c.op(OpKind::Conv, {x, w, kNoTensor}, {y}, attrs);
  c.op(OpKind::ConvGradData, {dy, w}, {dx}, attrs, Phase::backward);
  c.op(OpKind::ConvGradFilter, {dy, x}, {dw}, attrs, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "conv1d.y");
  expect_matches(v, dx, "conv1d.dx");
  expect_matches(v, dw, "conv1d.dw");
}

TEST(InterpTorch, MaxPoolCeilDilationIndicesAndGrad) {
  Case c;
  TensorId x = c.feed("maxpool.x"), dy = c.feed("maxpool.dy");
  AttrMap attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}},     {"pads", Ints{1, 1, 1, 1}},
                {"dilations", Ints{1, 2}},    {"ceil_mode", int64_t{1}}, {"storage_order", int64_t{0}}};
  TensorId y = c.out_like("maxpool.y"), idx = c.out_like("maxpool.indices", DType::i64);
  TensorId dx = c.out_like("maxpool.dx");
  c.op(OpKind::MaxPool, {x}, {y, idx}, attrs);
  c.op(OpKind::MaxPoolGrad, {dy, x}, {dx}, attrs, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "maxpool.y");
  expect_matches(v, idx, "maxpool.indices", 0.0);
  expect_matches(v, dx, "maxpool.dx");
}

TEST(InterpTorch, AveragePoolCeilPadsBothCountModes) {
  for (int include : {0, 1}) {
    SCOPED_TRACE(include);
    std::string p = "avgpool" + std::to_string(include);
    Case c;
    TensorId x = c.feed("avgpool.x"), dy = c.feed(p + ".dy");
    AttrMap attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                  {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{include}}};
    TensorId y = c.out_like(p + ".y"), dx = c.out_like(p + ".dx");
    c.op(OpKind::AveragePool, {x}, {y}, attrs);
    c.op(OpKind::AveragePoolGrad, {dy}, {dx}, attrs, Phase::backward);
    Values v = c.run();
    expect_matches(v, y, p + ".y");
    expect_matches(v, dx, p + ".dx");
  }
}

TEST(InterpTorch, BatchNormTrainingAndGrad) {
  Case c;
  TensorId x = c.feed("bn.x"), s = c.feed("bn.scale"), b = c.feed("bn.bias");
  TensorId m = c.feed("bn.mean", DType::f32, Role::param), var = c.feed("bn.var", DType::f32, Role::param);
  TensorId dy = c.feed("bn.dy");
  TensorId y = c.out_like("bn.y"), rm = c.out_like("bn.running_mean"), rv = c.out_like("bn.running_var");
  TensorId sm = c.out_like("bn.saved_mean"), si = c.out_like("bn.saved_invstd");
  TensorId dx = c.out_like("bn.dx"), ds = c.out_like("bn.dscale"), db = c.out_like("bn.dbias");
  c.op(OpKind::BatchNormalization, {x, s, b, m, var}, {y, rm, rv, sm, si},
       {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}});
  c.op(OpKind::BatchNormalizationGrad, {dy, x, s, sm, si}, {dx, ds, db}, {{"epsilon", 1e-5}}, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "bn.y");
  expect_matches(v, rm, "bn.running_mean");
  expect_matches(v, rv, "bn.running_var");
  expect_matches(v, sm, "bn.saved_mean");
  expect_matches(v, si, "bn.saved_invstd");
  // saved statistics are rounded to float32 before the gradient reads them: allow for that.
  expect_matches(v, dx, "bn.dx", 1e-5);
  expect_matches(v, ds, "bn.dscale", 1e-5);
  expect_matches(v, db, "bn.dbias");
}

struct LossCase {
  const char *name;
  const char *reduction;
  bool weights;
  std::optional<int64_t> ignore;
};
const LossCase kLossCases[] = {
    {"mean_w_ign", "mean", true, 2}, {"sum_ign", "sum", false, 4}, {"none_w", "none", true, {}}, {"mean", "mean", false, {}}};

TEST(InterpTorch, SoftmaxCrossEntropyLossAndGrad) {
  for (const LossCase &lc : kLossCases) {
    SCOPED_TRACE(lc.name);
    std::string p = std::string("sce.") + lc.name;
    Case c;
    TensorId x = c.feed("sce.scores"), l = c.feed("sce.labels", DType::i64, Role::label);
    TensorId w = lc.weights ? c.feed("sce.weights") : kNoTensor;
    TensorId dl = c.feed(p + ".dloss");
    AttrMap attrs{{"reduction", std::string(lc.reduction)}};
    if (lc.ignore) attrs["ignore_index"] = *lc.ignore;
    TensorId loss = c.out_like(p + ".loss"), lp = c.out_like("sce.log_prob"), dx = c.out_like(p + ".dscores");
    c.op(OpKind::SoftmaxCrossEntropyLoss, {x, l, w}, {loss, lp}, attrs);
    c.op(OpKind::SoftmaxCrossEntropyLossGrad, {dl, lp, l, w}, {dx}, attrs, Phase::backward);
    Values v = c.run();
    expect_matches(v, loss, p + ".loss");
    expect_matches(v, lp, "sce.log_prob");
    expect_matches(v, dx, p + ".dscores", 1e-5);  // reads the float32-rounded log_prob
  }
}

TEST(InterpTorch, NegativeLogLikelihoodLossAndGrad) {
  for (const LossCase &lc : kLossCases) {
    SCOPED_TRACE(lc.name);
    std::string p = std::string("nll.") + lc.name;
    Case c;
    TensorId x = c.feed("sce.log_prob", DType::f64), l = c.feed("sce.labels", DType::i64, Role::label);
    TensorId w = lc.weights ? c.feed("sce.weights") : kNoTensor;
    TensorId dl = c.feed(std::string("sce.") + lc.name + ".dloss");
    AttrMap attrs{{"reduction", std::string(lc.reduction)}};
    if (lc.ignore) attrs["ignore_index"] = *lc.ignore;
    TensorId loss = c.out_like(p + ".loss"), dx = c.out_like(p + ".dinput");
    c.op(OpKind::NegativeLogLikelihoodLoss, {x, l, w}, {loss}, attrs);
    c.op(OpKind::NegativeLogLikelihoodLossGrad, {dl, x, l, w}, {dx}, attrs, Phase::backward);
    Values v = c.run();
    expect_matches(v, loss, p + ".loss");
    expect_matches(v, dx, p + ".dinput");
  }
}

TEST(InterpTorch, SoftmaxLogSoftmaxAndGrads) {
  for (auto [name, fwd, bwd] : {std::tuple{"softmax", OpKind::Softmax, OpKind::SoftmaxGrad},
                                std::tuple{"logsoftmax", OpKind::LogSoftmax, OpKind::LogSoftmaxGrad}}) {
    SCOPED_TRACE(name);
    std::string p = name;
    Case c;
    TensorId x = c.feed("softmax.x"), dy = c.feed(p + ".dy");
    TensorId y = c.out_like(p + ".y"), dx = c.out_like(p + ".dx");
    c.op(fwd, {x}, {y}, {{"axis", int64_t{1}}});
    c.op(bwd, {dy, y}, {dx}, {{"axis", int64_t{1}}}, Phase::backward);
    Values v = c.run();
    expect_matches(v, y, p + ".y");
    expect_matches(v, dx, p + ".dx", 1e-5);  // reads the float32-rounded Y
  }
}

TEST(InterpTorch, GemmTransposedWithBroadcastC) {
  Case c;
  TensorId a = c.feed("gemm.a"), b = c.feed("gemm.b"), cc = c.feed("gemm.c");
  TensorId y = c.out_like("gemm.y");
  c.op(OpKind::Gemm, {a, b, cc}, {y},
       {{"alpha", 0.75}, {"beta", 1.5}, {"transA", int64_t{1}}, {"transB", int64_t{1}}});
  expect_matches(c.run(), y, "gemm.y");
}

/** MatMul of the reference's `p`.a and `p`.b with `flags` against its `p`.y. */
void expect_matmul(const std::string &p, const AttrMap &flags) {
  SCOPED_TRACE(p);
  Case c;
  TensorId a = c.feed(p + ".a"), b = c.feed(p + ".b");
  TensorId y = c.out_like(p + ".y");
  c.op(OpKind::MatMul, {a, b}, {y}, flags);
  expect_matches(c.run(), y, p + ".y");
}

TEST(InterpTorch, MatMulBatchedBroadcastAnd1D) {
  expect_matmul("matmul", {});
  expect_matmul("matmul1d", {});
}

TEST(InterpTorch, MatMulTransposedOperands) {
  // transA / transB against torch.matmul of the transposed views: batched with broadcast, and a matrix A by a batch.
  expect_matmul("matmul_t", {{"transA", int64_t{1}}, {"transB", int64_t{1}}});
  expect_matmul("matmul_ta", {{"transA", int64_t{1}}});
}

TEST(InterpTorch, PowAndPowGrad) {
  Case c;
  TensorId a = c.feed("pow.a"), b = c.feed("pow.b"), dy = c.feed("pow.dy");
  TensorId y = c.out_like("pow.y"), da = c.out_like("pow.da"), db = c.out_like("pow.db");
  c.op(OpKind::Pow, {a, b}, {y});
  c.op(OpKind::PowGrad, {dy, a, b}, {da, db}, {}, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "pow.y");
  expect_matches(v, da, "pow.da");
  expect_matches(v, db, "pow.db");
}

/** Three optimizer steps with state bound back through assigns, as a training loop runs them. */
void run_optimizer(const std::string &name, OpKind kind, AttrMap attrs, int num_state) {
  SCOPED_TRACE(name);
  Case c;
  TensorId p = c.feed("opt.p0", DType::f32, Role::param);
  TensorId g = c.g.add_tensor("grad", DType::f32, {2, 3}, Role::input);
  std::vector<TensorId> ins{p, g}, outs{c.out("p.new", {2, 3})};
  for (int s = 0; s < num_state; ++s) {
    Value zero{DType::f32, {2, 3}, std::vector<double>(6, 0.0)};
    ins.push_back(c.feed_value("state" + std::to_string(s), zero, Role::optimizer_state));
    outs.push_back(c.out("state" + std::to_string(s) + ".new", {2, 3}));
  }
  c.op(kind, ins, outs, std::move(attrs), Phase::update);
  for (size_t i = 0; i < outs.size(); ++i) c.g.assigns.push_back({ins[i == 0 ? 0 : i + 1], outs[i]});
  Values v = initial_values(c.g);
  for (auto &[id, val] : c.feeds) v[static_cast<size_t>(id)] = val;
  for (int step = 1; step <= 3; ++step) {
    v[static_cast<size_t>(g)] = ref_array("opt.g" + std::to_string(step));
    run_graph(c.g, v, Context{step});
    expect_matches(v, outs[0], name + ".p" + std::to_string(step), 1e-5);
    apply_assigns(c.g, v);
  }
}

TEST(InterpTorch, OptimizersMatchTorchOptim) {
  run_optimizer("sgd", OpKind::SGDUpdate, {{"lr", 0.1}, {"weight_decay", 0.01}}, 0);
  run_optimizer("momentum", OpKind::MomentumUpdate,
                {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", int64_t{0}}}, 1);
  run_optimizer("nesterov", OpKind::MomentumUpdate,
                {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}, {"nesterov", int64_t{1}}}, 1);
  AttrMap adam{{"lr", 0.01}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-6}, {"weight_decay", 0.1},
               {"decoupled", int64_t{0}}};
  run_optimizer("adam", OpKind::AdamUpdate, adam, 2);
  adam["decoupled"] = int64_t{1};
  run_optimizer("adamw", OpKind::AdamUpdate, adam, 2);
}

}  // namespace
}  // namespace cleave::interp::testing
