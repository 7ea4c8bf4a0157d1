// The runtime kernels behind the mask/selection and layer-norm kinds against the interpreter: layer_norm_forward /
// backward (LayerNormalization, LayerNormalizationGrad), pad_constant (Pad), reduce_max (ReduceMax, ReduceMin) and
// broadcast_bytes (Expand on int64 and bool operands).
#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

KernelCase layer_norm_case(Shape x, int64_t axis, bool bias) {
  return {"LAYER_NORM(x=" + dims_str(x) + ",axis=" + std::to_string(axis) + (bias ? ",bias" : "") + ")", 1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + axis));
            Shape ps(x.begin() + axis, x.end()), stat(x.begin(), x.begin() + axis);
            stat.resize(x.size(), 1);
            int64_t inner = count(ps), outer = count(x) / inner;
            auto xd = random_data(rng, count(x), -2, 2), sd = random_data(rng, inner, 0.5, 1.5);
            auto bd = random_data(rng, inner), dyd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            f.in(ps, sd);
            if (bias) f.in(ps, bd);
            f.out(x);
            f.out(stat);
            f.out(stat);
            auto ref = f.run(OpKind::LayerNormalization, {{"axis", axis}, {"epsilon", 1e-5}});
            auto fx = to_f32(xd), fs = to_f32(sd), fb = to_f32(bd), fdy = to_f32(dyd);
            std::vector<float> y(fx.size()), mean(static_cast<size_t>(outer)), invstd(mean.size());
            layer_norm_forward(outer, inner, fx.data(), fs.data(), bias ? fb.data() : nullptr, 1e-5f, y.data(),
                               mean.data(), invstd.data());
            double err = std::max({max_error(y, ref[0]), max_error(mean, ref[1]), max_error(invstd, ref[2])});
            // The gradient from the same (float) statistics on both sides.
            OneOp b;
            b.in(x, dyd);
            b.in(x, xd);
            b.in(ps, sd);
            b.in(stat, std::vector<double>(mean.begin(), mean.end()));
            b.in(stat, std::vector<double>(invstd.begin(), invstd.end()));
            b.out(x);
            b.out(ps);
            b.out(ps);
            auto rb = b.run(OpKind::LayerNormalizationGrad, {{"axis", axis}});
            std::vector<float> dx(fx.size()), ds(static_cast<size_t>(inner)), db(ds.size());
            layer_norm_backward(outer, inner, fdy.data(), fx.data(), fs.data(), mean.data(), invstd.data(), dx.data(),
                                ds.data(), db.data());
            return std::max({err, max_error(dx, rb[0]), max_error(ds, rb[1]), max_error(db, rb[2])});
          }};
}

TEST(RuntimeKernels, LayerNorm) {
  run_cases({layer_norm_case({4, 16}, 1, true), layer_norm_case({2, 3, 8}, 2, false),
             layer_norm_case({2, 3, 4}, 1, true), layer_norm_case({3, 5}, 0, true)});
}

KernelCase pad_case(Shape x, std::vector<int64_t> pads, double value) {
  return {"PAD(x=" + dims_str(x) + ",pads=" + dims_str(pads) + ")", 0.0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + pads[0]));
            auto xd = random_data(rng, count(x));
            Shape y = x;
            for (size_t d = 0; d < x.size(); ++d) y[d] += pads[d] + pads[d + x.size()];
            OneOp f;
            f.in(x, xd);
            f.out(y);
            auto ref = f.run(OpKind::Pad, {{"pads", pads}, {"value", value}});
            auto fx = to_f32(xd);
            std::vector<float> got(static_cast<size_t>(count(y)), NAN);
            pad_constant(x, pads, static_cast<float>(value), fx.data(), got.data());
            return max_error(got, ref[0]);
          }};
}

TEST(RuntimeKernels, PadConstant) {
  run_cases({pad_case({2, 3, 4, 4}, {0, 0, 1, 1, 0, 0, 1, 1}, 0.0), pad_case({3, 5}, {1, -2, 0, 3}, -1.5),
             pad_case({4}, {-1, -2}, 0.0)});
}

KernelCase reduce_max_case(Shape x, std::vector<int64_t> axes, bool min) {
  return {std::string(min ? "REDUCE_MIN" : "REDUCE_MAX") + "(x=" + dims_str(x) + ",axes=" + dims_str(axes) + ")", 0.0,
          [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + axes.size()));
            auto xd = random_data(rng, count(x));
            Shape y = x;
            for (int64_t a : axes) y[static_cast<size_t>(a)] = 1;
            OneOp f;
            f.in(x, xd);
            f.out(y);
            auto ref = f.run(min ? OpKind::ReduceMin : OpKind::ReduceMax, {{"axes", axes}, {"keepdims", int64_t{1}}});
            auto fx = to_f32(xd);
            std::vector<float> got(static_cast<size_t>(count(y)), NAN);
            reduce_max(x, axes, fx.data(), got.data(), min);
            return max_error(got, ref[0]);
          }};
}

TEST(RuntimeKernels, ReduceMaxMin) {
  run_cases({reduce_max_case({2, 3, 4}, {2}, false), reduce_max_case({2, 3, 4}, {0, 2}, true),
             reduce_max_case({5, 6}, {0, 1}, false), reduce_max_case({2, 1, 3}, {1}, true)});
}

TEST(RuntimeKernels, BroadcastBytesOfMasksAndIndices) {
  // Expand in the interpreter is dtype-agnostic; broadcast_bytes must move int64 and bool elements the same way.
  std::vector<double> idx{3, -1, 7}, mask{1, 0, 0, 1};
  OneOp fi;
  fi.in({3, 1}, idx, DType::i64);
  fi.out({2, 3, 4}, DType::i64);
  auto ri = fi.run(OpKind::Expand, {{"shape", std::vector<int64_t>{2, 3, 4}}});
  std::vector<int64_t> src = to_i64(idx), got(24, -99);
  broadcast_bytes({3, 1}, {2, 3, 4}, src.data(), got.data(), sizeof(int64_t));
  EXPECT_EQ(std::vector<double>(got.begin(), got.end()), ri[0]);
  OneOp fm;
  fm.in({1, 4}, mask, DType::boolean);
  fm.out({3, 4}, DType::boolean);
  auto rm = fm.run(OpKind::Expand, {{"shape", std::vector<int64_t>{3, 4}}});
  std::vector<uint8_t> msrc{1, 0, 0, 1}, mgot(12, 7);
  broadcast_bytes({1, 4}, {3, 4}, msrc.data(), mgot.data(), 1);
  EXPECT_EQ(std::vector<double>(mgot.begin(), mgot.end()), rm[0]);
}

}  // namespace
}  // namespace cleave::rt::testing
