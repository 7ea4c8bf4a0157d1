// Interpreter behaviour that has no torch counterpart: error messages, Dropout's and RandomLike's counter-based RNG,
// dispatch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ir/error.h"
#include "ir/rng.h"
#include "ir/tensor_data.h"
#include "tests/interp/reference_data.h"

namespace cleave::interp::testing {
namespace {

using ::testing::HasSubstr;

Value filled(Shape shape, double start, DType dtype = DType::f32) {
  Value v{dtype, shape, {}};
  for (int64_t i = 0; i < num_elements(shape); ++i) v.data.push_back(start + static_cast<double>(i));
  return v;
}

std::string user_error_of(Case &c) {
  try {
    c.run();
  } catch (const UserError &e) {
    return e.what();
  }
  return "no error";
}

TEST(InterpBehaviour, MissingInputIsAUserErrorNamingOpAndTensor) {
  Case c;
  TensorId a = c.g.add_tensor("a", DType::f32, {2}, Role::input);  // never fed
  TensorId b = c.feed_value("b", filled({2}, 1));
  TensorId y = c.out("y", {2});
  c.op(OpKind::Add, {a, b}, {y});
  EXPECT_THAT(user_error_of(c), HasSubstr("op \"Add\" (Add): input \"a\" has no value"));
}

TEST(InterpBehaviour, AbsentRequiredOperandIsAUserError) {
  Case c;
  TensorId x = c.feed_value("x", filled({1, 1, 3}, 0));
  TensorId y = c.out("y", {1, 1, 3});
  c.op(OpKind::Conv, {x, kNoTensor}, {y});
  EXPECT_THAT(user_error_of(c), HasSubstr("op \"Conv\" (Conv): required input 1 is missing"));
}

TEST(InterpBehaviour, GemmOfNoRowsOrColumns) {
  // Empty operands give an empty product, or zeros where only the summed dim is empty; the rows form (transA alone,
  // A [r..., m], B [r..., n]) sums leading dims that may be empty too.
  struct Gemm {
    Shape a, b, y;
    int64_t trans_a;
  };
  for (const Gemm &k : {Gemm{{3, 2}, {2, 0}, {3, 0}, 0}, Gemm{{3, 0}, {0, 4}, {3, 4}, 0},
                        Gemm{{2, 0, 3}, {2, 0, 4}, {3, 4}, 1}, Gemm{{0, 3}, {0, 2}, {3, 2}, 1}}) {
    Case c;
    TensorId a = c.feed_value("a", filled(k.a, 1)), b = c.feed_value("b", filled(k.b, 1));
    TensorId y = c.out("y", k.y);
    c.op(OpKind::Gemm, {a, b}, {y}, {{"transA", k.trans_a}});
    Values v = c.run();
    const Value &out = *v[y];
    EXPECT_EQ(out.shape, k.y);
    EXPECT_TRUE(std::all_of(out.data.begin(), out.data.end(), [](double x) { return x == 0.0; }));
  }
}

TEST(InterpBehaviour, GatherIndexOutOfRangeNamesTheOp) {
  Case c;
  TensorId d = c.feed_value("data", filled({3}, 0));
  TensorId i = c.feed_value("idx", Value{DType::i64, {2}, {1, 3}});
  TensorId y = c.out("y", {2});
  c.op(OpKind::Gather, {d, i}, {y}, {{"axis", int64_t{0}}});
  EXPECT_THAT(user_error_of(c), HasSubstr("op \"Gather\" (Gather): index 3 is out of range [-3, 3)"));
}

TEST(InterpBehaviour, LossLabelOutOfRangeNamesTheOp) {
  Case c;
  TensorId x = c.feed_value("x", filled({2, 3}, 0));
  TensorId l = c.feed_value("l", Value{DType::i64, {2}, {0, 5}});
  TensorId y = c.out("y", {});
  c.op(OpKind::SoftmaxCrossEntropyLoss, {x, l}, {y}, {{"reduction", std::string("mean")}});
  EXPECT_THAT(user_error_of(c), HasSubstr("(SoftmaxCrossEntropyLoss): label 5 is out of range [0, 3)"));
}

TEST(InterpBehaviour, F32OutputsAreRoundedIntegersExact) {
  Case c;
  TensorId a = c.feed_value("a", Value{DType::f32, {1}, {1.0}});
  TensorId b = c.feed_value("b", Value{DType::f32, {1}, {3.0}});
  TensorId ia = c.feed_value("ia", Value{DType::i64, {1}, {(1LL << 52) + 1}});
  TensorId ib = c.feed_value("ib", Value{DType::i64, {1}, {-2}});
  TensorId y = c.out("y", {1}), iy = c.out("iy", {1}, DType::i64), q = c.out("q", {1}, DType::i64);
  c.op(OpKind::Div, {a, b}, {y});
  c.op(OpKind::Add, {ia, ib}, {iy});
  c.op(OpKind::Div, {ia, ib}, {q});
  Values v = c.run();
  EXPECT_EQ(v[y]->data[0], static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(v[iy]->data[0], static_cast<double>((1LL << 52) - 1));
  EXPECT_EQ(v[q]->data[0], -static_cast<double>((1LL << 51)));  // truncates toward zero (odd / -2)
}

TEST(InterpBehaviour, DropoutInferenceAndZeroRatioAreIdentity) {
  for (auto [ratio, training] : {std::pair{0.0, int64_t{1}}, std::pair{0.5, int64_t{0}}}) {
    Case c;
    TensorId x = c.feed_value("x", filled({4, 5}, -3));
    TensorId y = c.out("y", {4, 5}), m = c.out("m", {4, 5}, DType::boolean);
    c.op(OpKind::Dropout, {x}, {y, m}, {{"ratio", ratio}, {"training_mode", training}, {"seed", int64_t{7}}});
    Values v = c.run(3);
    EXPECT_EQ(v[y]->data, v[x]->data);
    EXPECT_EQ(v[m]->data, std::vector<double>(20, 1.0));
  }
}

TEST(InterpBehaviour, DropoutTrainingUsesTheCounterRngAndScales) {
  const int64_t n = 4000;
  const double ratio = 0.25;
  std::vector<int> kept_at_step(3, 0);
  std::vector<std::vector<double>> masks;
  for (int64_t step : {1, 2}) {
    Case c;
    TensorId x = c.feed_value("x", filled({n}, 1));
    TensorId dy = c.feed_value("dy", filled({n}, 0.5));
    TensorId y = c.out("y", {n}), m = c.out("m", {n}, DType::boolean), dx = c.out("dx", {n});
    c.op(OpKind::Dropout, {x}, {y, m}, {{"ratio", ratio}, {"training_mode", int64_t{1}}, {"seed", int64_t{42}}});
    c.op(OpKind::DropoutGrad, {dy, m}, {dx}, {{"ratio", ratio}}, Phase::backward);
    Values v = c.run(step);
    for (int64_t i = 0; i < n; ++i) {
      bool keep = dropout_keep(42, step, i, static_cast<float>(ratio));
      ASSERT_EQ(v[m]->data[i], keep ? 1.0 : 0.0) << i;
      EXPECT_EQ(v[y]->data[i], keep ? static_cast<double>(static_cast<float>((1.0 + i) / 0.75)) : 0.0) << i;
      EXPECT_EQ(v[dx]->data[i], keep ? static_cast<double>(static_cast<float>((0.5 + i) / 0.75)) : 0.0) << i;
      kept_at_step[static_cast<size_t>(step)] += keep;
    }
    masks.push_back(v[m]->data);
  }
  // ~75% kept (binomial sd ~27), and the step changes the draw.
  EXPECT_NEAR(kept_at_step[1], 3000, 150);
  EXPECT_NEAR(kept_at_step[2], 3000, 150);
  EXPECT_NE(masks[0], masks[1]);
}

/** The moments of RandomLike's draws over 100,000 elements against the distribution's: mean, standard deviation, and
 *  (normal) the share within one sigma, each within about 5 standard errors. */
TEST(InterpBehaviour, RandomLikeDrawsHaveTheirDistributionsMoments) {
  const int64_t n = 100000;
  struct Dist {
    bool normal;
    double a, b, mean, sd;
  };
  for (Dist d : {Dist{true, 1.0, 2.0, 1.0, 2.0}, Dist{false, -1.0, 3.0, 1.0, 4.0 / std::sqrt(12.0)}}) {
    SCOPED_TRACE(d.normal ? "normal" : "uniform");
    std::vector<std::vector<double>> draws;
    for (int64_t step : {1, 2}) {
      Case c;
      TensorId x = c.feed_value("x", filled({n}, 0));
      TensorId y = c.out("y", {n});
      c.op(OpKind::RandomLike, {x}, {y}, {{"normal", int64_t{d.normal}}, {"a", d.a}, {"b", d.b}, {"seed", int64_t{9}}});
      draws.push_back(c.run(step)[y]->data);
    }
    const std::vector<double> &v = draws[0];
    double sum = 0, sq = 0, lo = v[0], hi = v[0];
    int64_t within = 0;
    for (double x : v) {
      sum += x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      within += std::abs(x - d.mean) < d.sd;
    }
    double mean = sum / n;
    for (double x : v) sq += (x - mean) * (x - mean);
    double sd = std::sqrt(sq / (n - 1));
    EXPECT_NEAR(mean, d.mean, 5 * d.sd / std::sqrt(n));
    EXPECT_NEAR(sd, d.sd, 5 * d.sd / std::sqrt(n));  // (the sd's standard error is at most sd / sqrt(n))
    if (d.normal) {
      EXPECT_NEAR(static_cast<double>(within) / n, 0.682689, 0.008);
      EXPECT_LT(lo, d.mean - 3.5 * d.sd);  // tails reach past 3.5 sigma (P = 2.3e-4 each way: 23 expected)
      EXPECT_GT(hi, d.mean + 3.5 * d.sd);
    } else {
      EXPECT_GE(lo, d.a);
      EXPECT_LT(hi, d.b);
      EXPECT_LT(lo, d.a + 0.001);
      EXPECT_GT(hi, d.b - 0.001);
    }
    EXPECT_NE(draws[0], draws[1]);  // the step keys the draw
  }
}

TEST(InterpBehaviour, ConstantsAndParamsComeFromTensorData) {
  Case c;
  Tensor t;
  t.name = "w";
  t.dtype = DType::f32;
  t.shape = {3};
  t.role = Role::constant;
  t.data = encode_doubles(DType::f32, {1.5, -2, 0.25});
  TensorId w = c.g.add_tensor(t);
  TensorId y = c.out("y", {3});
  c.op(OpKind::Neg, {w}, {y});
  Values v = c.run();
  EXPECT_EQ(v[y]->data, (std::vector<double>{-1.5, 2, -0.25}));
}

TEST(InterpBehaviour, ZeroElementConstantHasAValue) {
  Case c;
  TensorId e = c.g.add_tensor("empty", DType::i64, {0}, Role::constant);
  Values v = initial_values(c.g);
  ASSERT_TRUE(v[e].has_value());
  EXPECT_EQ(v[e]->shape, (Shape{0}));
  EXPECT_TRUE(v[e]->data.empty());
}

TEST(InterpBehaviour, AssignsAreSimultaneous) {
  Case c;
  TensorId a = c.feed_value("a", filled({1}, 1), Role::param);
  TensorId b = c.feed_value("b", filled({1}, 2), Role::param);
  c.g.assigns = {{a, b}, {b, a}};  // swap
  Values v = c.run();
  apply_assigns(c.g, v);
  EXPECT_EQ(v[a]->data[0], 2);
  EXPECT_EQ(v[b]->data[0], 1);
}

TEST(InterpBehaviour, RunOpsDropsComputedValuesAfterTheirLastReader) {
  // x -> a = x + x -> b = a + a -> c = b + x; d = b + b, read by nothing.
  Case c;
  TensorId x = c.feed_value("x", filled({2}, 1));
  TensorId a = c.out("a", {2}), b = c.out("b", {2}), y = c.out("y", {2}), d = c.out("d", {2});
  std::vector<OpId> ops = {c.op(OpKind::Add, {x, x}, {a}), c.op(OpKind::Add, {a, a}, {b}),
                           c.op(OpKind::Add, {b, x}, {y}), c.op(OpKind::Add, {b, b}, {d})};
  Values v = initial_values(c.g);
  for (auto &[id, val] : c.feeds) v[static_cast<size_t>(id)] = val;
  run_ops(c.g, ops, v, Context{}, [&](TensorId t) { return t == y; });
  EXPECT_FALSE(v[a].has_value());  // read last by b's op
  EXPECT_FALSE(v[b].has_value());  // read last by d's op
  EXPECT_FALSE(v[d].has_value());  // never read
  ASSERT_TRUE(v[y].has_value());   // kept
  EXPECT_EQ(v[y]->data, (std::vector<double>{5, 10}));  // 4x + x
  ASSERT_TRUE(v[x].has_value());   // data are not computed values
}

TEST(InterpBehaviour, AssignsMoveAComputedSourceReadOnce) {
  Case c;
  TensorId p = c.feed_value("p", filled({2}, 1), Role::param);
  TensorId q = c.feed_value("q", filled({2}, 5), Role::param);
  TensorId next = c.out("next", {2});
  c.op(OpKind::Add, {p, p}, {next}, {}, Phase::update);
  c.g.assigns = {{p, next}, {q, p}};  // p is read by an assign and is one's destination: copied
  Values v = c.run();
  apply_assigns(c.g, v);
  EXPECT_EQ(v[p]->data, (std::vector<double>{2, 4}));
  EXPECT_EQ(v[q]->data, (std::vector<double>{1, 2}));
  EXPECT_FALSE(v[next].has_value());  // moved into p

  Values kept = c.run();
  apply_assigns(c.g, kept, {}, [&](TensorId t) { return t == next; });
  EXPECT_EQ(kept[p]->data, (std::vector<double>{2, 4}));
  ASSERT_TRUE(kept[next].has_value());  // kept: copied into p
  EXPECT_EQ(kept[next]->data, (std::vector<double>{2, 4}));
}

}  // namespace
}  // namespace cleave::interp::testing
