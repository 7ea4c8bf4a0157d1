// Activation and rounding kernels and their gradient kernels against torch 1.13 (make_activation_reference.py), and
// NaN/inf propagation through ReLU, Max/Min, MaxPool, Clip, the activations and the losses as torch propagates them.
#include <limits>

#include "tests/interp/reference_data.h"

namespace cleave::interp::testing {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST(InterpTorch, ActivationsAndGradients) {
  struct A {
    const char *name;
    OpKind fwd, grad;
    AttrMap attrs;
  };
  const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
  const A cases[] = {
      {"clip", OpKind::Clip, OpKind::ClipGrad, {{"min", -0.5}, {"max", 2.0}}},
      {"relu6", OpKind::Clip, OpKind::ClipGrad, {{"min", 0.0}, {"max", 6.0}}},
      {"hardsigmoid", OpKind::HardSigmoid, OpKind::HardSigmoidGrad, {{"alpha", 1.0 / 6}, {"beta", 0.5}}},
      {"hardswish", OpKind::HardSwish, OpKind::HardSwishGrad, {}},
      {"leakyrelu", OpKind::LeakyRelu, OpKind::LeakyReluGrad, {{"alpha", 0.1}}},
      {"elu", OpKind::Elu, OpKind::EluGrad, {{"alpha", 1.5}}},
      {"selu", OpKind::Selu, OpKind::SeluGrad, {{"alpha", selu_a}, {"gamma", selu_g}}},
      {"celu", OpKind::Celu, OpKind::CeluGrad, {{"alpha", 2.0}}},
      {"softplus", OpKind::Softplus, OpKind::SoftplusGrad, {}},
      {"softsign", OpKind::Softsign, OpKind::SoftsignGrad, {}},
      {"thresholdedrelu", OpKind::ThresholdedRelu, OpKind::ThresholdedReluGrad, {{"alpha", 0.3}}},
      {"gelu", OpKind::Gelu, OpKind::GeluGrad, {}},
  };
  for (const A &a : cases) {
    SCOPED_TRACE(a.name);
    std::string p = std::string("act.") + a.name;
    Case c;
    TensorId x = c.feed("act.x"), dy = c.feed("act.dy");
    TensorId y = c.out_like(p + ".y"), dx = c.out_like(p + ".dx");
    c.op(a.fwd, {x}, {y}, a.attrs);
    c.op(a.grad, {dy, x}, {dx}, a.attrs, Phase::backward);
    Values v = c.run();
    expect_matches(v, y, p + ".y");
    expect_matches(v, dx, p + ".dx");
  }
}

TEST(InterpTorch, AbsAndRounding) {
  Case c;
  TensorId x = c.feed("act.x"), r = c.feed("act.r");
  TensorId y = c.out_like("act.abs.y");
  c.op(OpKind::Abs, {x}, {y});
  std::vector<std::pair<std::string, TensorId>> outs;
  for (auto [name, kind] : {std::pair{"sign", OpKind::Sign}, std::pair{"floor", OpKind::Floor},
                            std::pair{"ceil", OpKind::Ceil}, std::pair{"round", OpKind::Round}}) {
    TensorId o = c.out_like(std::string("act.") + name + ".y");
    c.op(kind, {r}, {o});
    outs.emplace_back(std::string("act.") + name + ".y", o);
  }
  Values v = c.run();
  expect_matches(v, y, "act.abs.y");
  for (const auto &[ref, id] : outs) expect_matches(v, id, ref, 0.0);
}

/** RoundToBf16 and RoundToFp16 are torch's casts to bfloat16 and float16 and back, exactly. */
TEST(InterpTorch, RoundingOpsAreTorchsCasts) {
  for (auto [name, kind] : {std::pair{"bf16", OpKind::RoundToBf16}, std::pair{"fp16", OpKind::RoundToFp16}}) {
    Case c;
    TensorId x = c.feed(std::string("act.") + name + ".x");
    TensorId y = c.out_like(std::string("act.") + name + ".y");
    c.op(kind, {x}, {y});
    Values v = c.run();
    expect_matches(v, y, std::string("act.") + name + ".y", 0.0);
  }
}

TEST(InterpTorch, PReluPerChannelSlope) {
  Case c;
  TensorId x = c.feed("act.prelu.x"), s = c.feed("act.prelu.slope"), dy = c.feed("act.prelu.dy");
  TensorId y = c.out_like("act.prelu.y"), dx = c.out_like("act.prelu.dx"), ds = c.out_like("act.prelu.dslope_full");
  c.op(OpKind::PRelu, {x, s}, {y});
  c.op(OpKind::PReluGrad, {dy, x, s}, {dx, ds}, {}, Phase::backward);
  Values v = c.run();
  expect_matches(v, y, "act.prelu.y");
  expect_matches(v, dx, "act.prelu.dx");
  expect_matches(v, ds, "act.prelu.dslope_full");
}

// ---- NaN and inf: each expectation is what torch 1.13 prints for the same call (noted per case) ----

Values run_one(OpKind kind, std::vector<Value> ins, std::vector<Shape> out_shapes, AttrMap attrs = {},
               Phase phase = Phase::forward, std::vector<DType> out_dtypes = {}) {
  Case c;
  std::vector<TensorId> in_ids, out_ids;
  for (size_t i = 0; i < ins.size(); ++i) in_ids.push_back(c.feed_value("in" + std::to_string(i), ins[i]));
  for (size_t i = 0; i < out_shapes.size(); ++i)
    out_ids.push_back(c.out("out" + std::to_string(i), out_shapes[i], i < out_dtypes.size() ? out_dtypes[i] : DType::f32));
  c.op(kind, in_ids, out_ids, std::move(attrs), phase);
  Values v = c.run();
  Values outs;
  for (TensorId id : out_ids) outs.push_back(v[static_cast<size_t>(id)]);
  return outs;
}

Value f32(Shape shape, std::vector<double> data) { return Value{DType::f32, std::move(shape), std::move(data)}; }

/** Elementwise equality where NaN equals NaN. */
void expect_same(const Value &got, const std::vector<double> &want, const std::string &what) {
  ASSERT_EQ(got.data.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got.data[i])) << what << "[" << i << "] = " << got.data[i];
    else EXPECT_EQ(got.data[i], want[i]) << what << "[" << i << "]";
  }
}

TEST(InterpNaN, ActivationsPropagateNaN) {
  const Value x = f32({4}, {kNaN, -1.0, 0.0, 2.0});
  // torch.relu / F.relu6 / torch.clamp(x, 0, 6) / F.hardsigmoid / F.hardswish / F.leaky_relu(x, 0.1) of x:
  // [nan, 0, 0, 2], [nan, 0, 0, 2], [nan, 0, 0, 2], [nan, 1/3, 1/2, 5/6], [nan, -1/3, 0, 5/3], [nan, -0.1, 0, 2].
  expect_same(*run_one(OpKind::Relu, {x}, {{4}})[0], {kNaN, 0, 0, 2}, "Relu");
  expect_same(*run_one(OpKind::Clip, {x}, {{4}}, {{"min", 0.0}, {"max", 6.0}})[0], {kNaN, 0, 0, 2}, "Clip");
  expect_same(*run_one(OpKind::ThresholdedRelu, {x}, {{4}}, {{"alpha", 1.0}})[0], {kNaN, 0, 0, 2}, "Threshold");
  for (OpKind k : {OpKind::HardSigmoid, OpKind::HardSwish, OpKind::LeakyRelu, OpKind::Elu, OpKind::Selu,
                   OpKind::Celu, OpKind::Softplus, OpKind::Softsign, OpKind::Abs, OpKind::Floor, OpKind::Ceil,
                   OpKind::Round})
    EXPECT_TRUE(std::isnan(run_one(k, {x}, {{4}})[0]->data[0])) << op_kind_name(k);
  // torch.sign(nan) = 0 (sgn is (0 < x) - (x < 0)).
  expect_same(*run_one(OpKind::Sign, {x}, {{4}})[0], {0, -1, 0, 1}, "Sign");
  // PRelu: slope * nan = nan.
  expect_same(*run_one(OpKind::PRelu, {x, f32({1}, {0.25})}, {{4}})[0], {kNaN, -0.25, 0, 2}, "PRelu");
  // Infinities: relu(-inf) = 0, clamp(inf, 0, 6) = 6, softplus(inf) = inf, softplus(-inf) = 0.
  const Value inf = f32({2}, {-kInf, kInf});
  expect_same(*run_one(OpKind::Relu, {inf}, {{2}})[0], {0, kInf}, "Relu inf");
  expect_same(*run_one(OpKind::Clip, {inf}, {{2}}, {{"min", 0.0}, {"max", 6.0}})[0], {0, 6}, "Clip inf");
  expect_same(*run_one(OpKind::Softplus, {inf}, {{2}})[0], {0, kInf}, "Softplus inf");
}

TEST(InterpNaN, GradientsAtNaNFollowTorch) {
  // torch.autograd of sum(f(x)) at x = nan: relu 1 (threshold_backward: x <= 0 ? 0 : dy), relu6/hardtanh 1,
  // hardsigmoid 0, hardswish 1, leaky_relu(0.1) 0.1, elu 1, threshold 1.
  const Value x = f32({1}, {kNaN}), dy = f32({1}, {1.0});
  auto grad = [&](OpKind k, AttrMap a = {}) { return run_one(k, {dy, x}, {{1}}, a, Phase::backward)[0]->data[0]; };
  EXPECT_EQ(grad(OpKind::ReluGrad), 1.0);
  EXPECT_EQ(grad(OpKind::ClipGrad, {{"min", 0.0}, {"max", 6.0}}), 1.0);
  EXPECT_EQ(grad(OpKind::HardSigmoidGrad, {{"alpha", 1.0 / 6}, {"beta", 0.5}}), 0.0);
  EXPECT_EQ(grad(OpKind::HardSwishGrad), 1.0);
  EXPECT_NEAR(grad(OpKind::LeakyReluGrad, {{"alpha", 0.1}}), 0.1, 1e-7);
  EXPECT_EQ(grad(OpKind::EluGrad, {{"alpha", 1.0}}), 1.0);
  EXPECT_EQ(grad(OpKind::ThresholdedReluGrad, {{"alpha", 1.0}}), 1.0);
  EXPECT_TRUE(std::isnan(grad(OpKind::SoftplusGrad)));
}

TEST(InterpNaN, MaxMinAndReductionsPropagateNaN) {
  // torch.maximum / torch.minimum propagate NaN from either side; amax/amin over a row with NaN give NaN.
  const Value a = f32({3}, {kNaN, 1.0, 2.0}), b = f32({3}, {0.0, kNaN, 1.0});
  expect_same(*run_one(OpKind::Max, {a, b}, {{3}})[0], {kNaN, kNaN, 2}, "Max");
  expect_same(*run_one(OpKind::Min, {a, b}, {{3}})[0], {kNaN, kNaN, 1}, "Min");
  const Value m = f32({2, 3}, {1.0, kNaN, 3.0, 4.0, 5.0, 6.0});
  expect_same(*run_one(OpKind::ReduceMax, {m}, {{2}}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}})[0],
              {kNaN, 6}, "ReduceMax");
}

TEST(InterpNaN, MaxPoolWindowWithNaNIsNaN) {
  // F.max_pool2d(x, 2) of [[nan, 1, 2, 3], [4, 5, 6, 7]] (1x1x2x4) = [[nan, 7]]; a window without NaN is unaffected.
  const Value x = f32({1, 1, 2, 4}, {kNaN, 1, 2, 3, 4, 5, 6, 7});
  AttrMap attrs = {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                   {"pads", std::vector<int64_t>{0, 0, 0, 0}}};
  expect_same(*run_one(OpKind::MaxPool, {x}, {{1, 1, 1, 2}}, attrs)[0], {kNaN, 7}, "MaxPool");
}

TEST(InterpNaN, LossesOfNaNAreNaN) {
  // F.cross_entropy / F.nll_loss with a NaN score in one row: nan (mean over the batch).
  const Value scores = f32({2, 3}, {0.1, kNaN, 0.3, 0.5, 0.2, 0.1});
  const Value labels{DType::i64, {2}, {0, 2}};
  Values sce = run_one(OpKind::SoftmaxCrossEntropyLoss, {scores, labels}, {{}, {2, 3}},
                       {{"reduction", std::string("mean")}});
  EXPECT_TRUE(std::isnan(sce[0]->data[0])) << sce[0]->data[0];
  // nll_loss reads only the labelled entries: NaN where a label picks the NaN (row 0, class 1).
  const Value picks{DType::i64, {2}, {1, 2}};
  Values nll = run_one(OpKind::NegativeLogLikelihoodLoss, {scores, picks}, {{}}, {{"reduction", std::string("mean")}});
  EXPECT_TRUE(std::isnan(nll[0]->data[0])) << nll[0]->data[0];
}

}  // namespace
}  // namespace cleave::interp::testing
