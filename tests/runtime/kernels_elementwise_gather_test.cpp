// The header-only elementwise map with a CLEAVE_HD functor (what generated fused code calls) against a chain of
// interpreter ops, map_block against a broadcasting op, and Gather / GatherGrad (whole and row-sharded) against the
// interpreter.
#include <cstring>

#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

/** A fused chain as the codegen would emit it: y = relu(a * b + c), dx-style second output via map_index. */
struct MulAddRelu {
  CLEAVE_HD float operator()(float a, float b, float c) const {
    float v = a * b + c;
    return v > 0 ? v : 0;
  }
};

TEST(RuntimeKernels, MapRunsAFusedFunctorLikeTheOpChain) {
  Shape s{3, 7};
  std::mt19937 rng(21);
  auto a = random_data(rng, 21), b = random_data(rng, 21), c = random_data(rng, 21);
  OneOp mul;
  mul.in(s, a);
  mul.in(s, b);
  mul.out(s);
  auto ab = mul.run(OpKind::Mul);
  OneOp add;
  add.in(s, ab[0]);
  add.in(s, c);
  add.out(s);
  auto abc = add.run(OpKind::Add);
  OneOp relu;
  relu.in(s, abc[0]);
  relu.out(s);
  auto ref = relu.run(OpKind::Relu);
  auto fa = to_f32(a), fb = to_f32(b), fc = to_f32(c);
  std::vector<float> y(21, NAN);
  map(21, MulAddRelu{}, y.data(), fa.data(), fb.data(), fc.data());
  // The interpreter rounds after each op, as the fused float code does (a*b rounded, then +c): equal up to FMA.
  EXPECT_LE(max_error(y, ref[0]), 1e-7);
  int positive = 0;
  for (float v : y) positive += v > 0;
  EXPECT_GT(positive, 0);
  EXPECT_LT(positive, 21);
  // map_index: ReluGrad as an indexed functor with its own operands.
  auto dyd = random_data(rng, 21);
  OneOp grad;
  grad.in(s, dyd);
  grad.in(s, abc[0]);
  grad.out(s);
  auto rg = grad.run(OpKind::ReluGrad);
  auto fdy = to_f32(dyd), fx = to_f32(abc[0]);
  std::vector<float> dx(21, NAN);
  const float *pdy = fdy.data(), *px = fx.data();
  float *pdx = dx.data();
  map_index(21, [=](int64_t i) { pdx[i] = px[i] > 0 ? pdy[i] : 0.0f; });
  EXPECT_LE(max_error(dx, rg[0]), 0.0);
}

/** rt::map_block (codegen's maps with an operand that broadcasts as one block: bias rows, per-channel scales) against
 *  the interpreter's broadcasting Sub, which also checks that the block's value is f's first argument; and with two
 *  full operands (a fused chain's), against Sub then Mul. */
TEST(RuntimeKernels, MapBlockIsABroadcastingBinaryOp) {
  struct Case {
    Shape block;
    int64_t inner, mid;  // of the block within a [3, 4, 5] output
  };
  const Shape y{3, 4, 5};
  std::mt19937 rng(33);
  for (const Case &c : {Case{{5}, 1, 5}, Case{{4, 1}, 5, 4}, Case{{3, 1, 1}, 20, 3}, Case{{4, 5}, 1, 20},
                        Case{{1}, 60, 1}}) {
    int64_t nb = 1;
    for (int64_t d : c.block) nb *= d;
    auto full = random_data(rng, 60), block = random_data(rng, nb);
    OneOp sub;
    sub.in(y, full);
    sub.in(c.block, block);
    sub.out(y);
    auto ref = sub.run(OpKind::Sub);
    auto ff = to_f32(full), fb = to_f32(block);
    std::vector<float> out(60, NAN);
    map_block(60, c.inner, c.mid, [](float b, float a) { return a - b; }, out.data(), fb.data(), ff.data());
    EXPECT_LE(max_error(out, ref[0]), 0.0) << "block of " << nb << ", inner " << c.inner;
    auto scale = random_data(rng, 60);
    OneOp mul;
    mul.in(y, ref[0]);
    mul.in(y, scale);
    mul.out(y);
    auto ref2 = mul.run(OpKind::Mul);
    auto fs = to_f32(scale);
    std::vector<float> out2(60, NAN);
    map_block(60, c.inner, c.mid, [](float b, float a, float s) { return (a - b) * s; }, out2.data(), fb.data(),
              ff.data(), fs.data());
    EXPECT_LE(max_error(out2, ref2[0]), 1e-6) << "block of " << nb << ", inner " << c.inner << ", fused";
  }
}

/** rt::round_fp16 (generated code's RoundToFp16, host and device) against the interpreter's RoundToFp16, which
 *  tests/interp/activations_test.cpp checks against torch's float -> half cast: every float32 exponent, each with
 *  random fractions and the halfway patterns of binary16's normal and subnormal steps, both signs, inf and NaN. */
TEST(RuntimeKernels, RoundFp16IsTheInterpretersRoundToFp16) {
  std::mt19937 rng(16);
  std::vector<double> xs = {0.0, 65504.0, 65519.99609375, 65520.0, INFINITY, NAN};
  for (int e = -40; e <= 40; ++e) {
    for (uint32_t frac : {0x000000u, 0x001000u, 0x003000u, 0x7fffffu, static_cast<uint32_t>(rng() & 0x7fffffu)}) {
      uint32_t bits = (static_cast<uint32_t>(e + 127) << 23) | frac;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      xs.push_back(f);
      xs.push_back(-f);
    }
  }
  Shape s{static_cast<int64_t>(xs.size())};
  OneOp op;
  op.in(s, xs);
  op.out(s);
  auto ref = op.run(OpKind::RoundToFp16);
  int subnormal = 0, overflow = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float y = cleave::round_fp16(static_cast<float>(xs[i]));
    if (std::isnan(ref[0][i])) {
      EXPECT_TRUE(std::isnan(y)) << xs[i];
      continue;
    }
    EXPECT_EQ(static_cast<double>(y), ref[0][i]) << "x = " << xs[i];
    subnormal += y != 0 && std::fabs(y) < 0x1p-14f;
    overflow += std::isinf(y) && !std::isinf(xs[i]);
  }
  EXPECT_GT(subnormal, 10);
  EXPECT_GT(overflow, 10);
}

KernelCase gather_case(Shape data, int64_t axis, std::vector<double> indices) {
  return {"GATHER(data=" + dims_str(data) + ",axis=" + std::to_string(axis) + ",n=" + std::to_string(indices.size()) +
              ")",
          0.0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(data) + axis));
            auto dd = random_data(rng, count(data));
            Shape y = data;
            y[static_cast<size_t>(axis)] = static_cast<int64_t>(indices.size());
            auto dyd = random_data(rng, count(y));
            int64_t nidx = static_cast<int64_t>(indices.size()), dim = data[static_cast<size_t>(axis)];
            OneOp f;
            f.in(data, dd);
            f.in({nidx}, indices, DType::i64);
            f.out(y);
            auto ref = f.run(OpKind::Gather, {{"axis", axis}});
            OneOp b;
            b.in(y, dyd);
            b.in({nidx}, indices, DType::i64);
            b.out(data);
            auto rb = b.run(OpKind::GatherGrad, {{"axis", axis}});
            auto fd = to_f32(dd), fdy = to_f32(dyd);
            auto idx = to_i64(indices);
            std::vector<float> fy(static_cast<size_t>(count(y)), NAN), fdd(static_cast<size_t>(count(data)), NAN);
            gather(data, axis, idx.data(), nidx, fd.data(), fy.data(), dim);
            gather_backward(data, axis, idx.data(), nidx, fdy.data(), fdd.data(), dim);
            double err = std::max(max_error(fy, ref[0]), max_error(fdd, rb[0]));
            // Row shards [0, h) and [h, dim): the outputs sum to the whole; the gradients concatenate to it.
            int64_t h = dim / 2;
            std::vector<float> sum(fy.size(), 0.0f), dcat;
            for (auto [base, rows] : {std::pair<int64_t, int64_t>{0, h}, {h, dim - h}}) {
              Dims shard = data;
              shard[static_cast<size_t>(axis)] = rows;
              std::vector<float> part(static_cast<size_t>(count(shard))), out(fy.size()), dpart(part.size());
              Dims starts(data.size(), 0), steps(data.size(), 1), ends = data;
              starts[static_cast<size_t>(axis)] = base;
              ends[static_cast<size_t>(axis)] = base + rows;
              slice(data, starts, ends, steps, fd.data(), part.data());
              gather(shard, axis, idx.data(), nidx, part.data(), out.data(), dim, base);
              for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];
              gather_backward(shard, axis, idx.data(), nidx, fdy.data(), dpart.data(), dim, base);
              std::vector<float> full(fdd.size(), 0.0f);
              slice_backward(data, starts, ends, steps, dpart.data(), full.data());
              if (dcat.empty()) dcat = full;
              else for (size_t i = 0; i < dcat.size(); ++i) dcat[i] += full[i];
            }
            return std::max({err, max_error(sum, ref[0]), max_error(dcat, rb[0])});
          }};
}

TEST(RuntimeKernels, Gather) {
  run_cases({gather_case({6, 4}, 0, {5, 0, -1, 2, 2, 3}), gather_case({3, 5, 2}, 1, {4, -5, 1}),
             gather_case({2, 3, 4}, 2, {3, 3, 0, -2, 1})});
}

}  // namespace
}  // namespace cleave::rt::testing
