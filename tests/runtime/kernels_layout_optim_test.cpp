// Layout ops (broadcast, transpose, slice, concat, split, region copy), optimizer steps, Dropout and RandomLike
// against the reference interpreter.
#include <limits>

#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

/** Runs a single-input op of kind `kind` on random x and compares with `mine(x, y)`. */
KernelCase unary_case(std::string name, OpKind kind, AttrMap attrs, Shape x, Shape y,
                      std::function<void(const float *, float *)> mine) {
  return {std::move(name), 0.0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + count(y)));
            auto xd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            f.out(y);
            auto ref = f.run(kind, attrs);
            auto fx = to_f32(xd);
            std::vector<float> fy(static_cast<size_t>(count(y)), NAN);
            mine(fx.data(), fy.data());
            return max_error(fy, ref[0]);
          }};
}

TEST(RuntimeKernels, Layout) {
  std::vector<KernelCase> cases;
  for (auto [in, out] : std::vector<std::pair<Shape, Shape>>{{{3, 1}, {2, 3, 4}}, {{4}, {3, 4}}, {{2, 1, 5}, {2, 3, 5}},
                                                             {{1, 1, 7}, {2, 3, 7}}, {{2, 1, 1}, {2, 3, 4}}, {{}, {2, 3}}})
    cases.push_back(unary_case("BROADCAST(in=" + dims_str(in) + ",out=" + dims_str(out) + ")", OpKind::Expand,
                               {{"shape", out}}, in, out,
                               [=](const float *x, float *y) { broadcast(in, out, x, y); }));
  // reduce_to_shape is the adjoint of broadcast: ReduceSum over the broadcast axes (keepdims) has its layout.
  cases.push_back(unary_case("REDUCE_TO_SHAPE(in=[2,3,4],out=[3,1])", OpKind::ReduceSum,
                             {{"axes", Dims{0, 2}}, {"keepdims", int64_t{1}}}, {2, 3, 4}, {1, 3, 1},
                             [](const float *x, float *y) { reduce_to_shape({2, 3, 4}, {3, 1}, x, y); }));
  // Small shapes, and ones past a 32x32 tile with partial tiles and merged dims (the tiled and row-copy paths).
  for (auto [x, perm] : std::vector<std::pair<Shape, Dims>>{{{2, 3, 4}, {1, 0, 2}}, {{2, 3, 4}, {2, 0, 1}},
                                                          {{2, 3, 4}, {0, 2, 1}}, {{70, 45}, {1, 0}},
                                                          {{3, 40, 33}, {0, 2, 1}}, {{5, 37, 3, 34}, {1, 3, 0, 2}},
                                                          {{4, 1, 6, 35}, {0, 2, 1, 3}}, {{6, 5, 4, 3}, {2, 3, 0, 1}}}) {
    Shape y;
    for (int64_t p : perm) y.push_back(x[static_cast<size_t>(p)]);
    cases.push_back(unary_case("TRANSPOSE(x=" + dims_str(x) + ",perm=" + dims_str(perm) + ")", OpKind::Transpose,
                               {{"perm", perm}}, x, y, [=](const float *a, float *b) { transpose(x, perm, a, b); }));
  }
  {
    Shape x{5, 6, 4};
    Dims starts{1, 5, 0}, ends{4, 0, 4}, steps{2, -2, 1};
    AttrMap attrs{{"starts", starts}, {"ends", ends}, {"axes", Dims{0, 1, 2}}, {"steps", steps}};
    cases.push_back(unary_case("SLICE(x=[5,6,4],starts=[1,5,0],ends=[4,0,4],steps=[2,-2,1])", OpKind::Slice, attrs,
                               x, {2, 3, 4}, [=](const float *a, float *b) { slice(x, starts, ends, steps, a, b); }));
    cases.push_back(unary_case("SLICE_BWD(x=[5,6,4],starts=[1,5,0],ends=[4,0,4],steps=[2,-2,1])", OpKind::SliceGrad,
                               attrs, {2, 3, 4}, x,
                               [=](const float *a, float *b) { slice_backward(x, starts, ends, steps, a, b); }));
  }
  cases.push_back({"CONCAT_SPLIT(parts=[2,1,4]+[2,3,4]+[2,2,4],axis=1)", 0.0, [] {
                     std::mt19937 rng(3);
                     std::vector<Shape> shapes{{2, 1, 4}, {2, 3, 4}, {2, 2, 4}};
                     OneOp f;
                     std::vector<std::vector<float>> parts;
                     for (const Shape &s : shapes) {
                       auto d = random_data(rng, count(s));
                       f.in(s, d);
                       parts.push_back(to_f32(d));
                     }
                     f.out({2, 6, 4});
                     auto ref = f.run(OpKind::Concat, {{"axis", int64_t{1}}});
                     std::vector<float> y(48);
                     concat({parts[0].data(), parts[1].data(), parts[2].data()}, shapes, 1, y.data());
                     double err = max_error(y, ref[0]);
                     std::vector<float> a(8), b(24), c(16);
                     split({2, 6, 4}, 1, {1, 3, 2}, y.data(), {a.data(), b.data(), c.data()});
                     return std::max({err, a == parts[0] ? 0.0 : INFINITY, b == parts[1] ? 0.0 : INFINITY,
                                      c == parts[2] ? 0.0 : INFINITY});
                   }});
  // Region copy of two boxes side by side equals Concat of the two Slices.
  cases.push_back({"REGION_COPY(a=[4,5,3][1:3,0:2,:]+b=[3,6,3][0:2,2:6,:]->[2,6,3])", 0.0, [] {
                     std::mt19937 rng(4);
                     auto ad = random_data(rng, 60), bd = random_data(rng, 54);
                     OneOp sa;
                     sa.in({4, 5, 3}, ad);
                     sa.out({2, 2, 3});
                     auto ra = sa.run(OpKind::Slice, {{"starts", Dims{1, 0}}, {"ends", Dims{3, 2}}, {"axes", Dims{0, 1}},
                                                      {"steps", Dims{1, 1}}});
                     OneOp sb;
                     sb.in({3, 6, 3}, bd);
                     sb.out({2, 4, 3});
                     auto rb = sb.run(OpKind::Slice, {{"starts", Dims{0, 2}}, {"ends", Dims{2, 6}}, {"axes", Dims{0, 1}},
                                                      {"steps", Dims{1, 1}}});
                     OneOp cat;
                     cat.in({2, 2, 3}, ra[0]);
                     cat.in({2, 4, 3}, rb[0]);
                     cat.out({2, 6, 3});
                     auto ref = cat.run(OpKind::Concat, {{"axis", int64_t{1}}});
                     auto fa = to_f32(ad), fb = to_f32(bd);
                     std::vector<float> y(36, NAN);
                     region_copy({Box{fa.data(), {4, 5, 3}, {1, 0, 0}, {2, 2, 3}, {0, 0, 0}},
                                  Box{fb.data(), {3, 6, 3}, {0, 2, 0}, {2, 4, 3}, {0, 2, 0}}},
                                 y.data(), {2, 6, 3});
                     return max_error(y, ref[0]);
                   }});
  // view_copy as codegen composes it (compose_moves.h): attention's k cut from a [T=4, B=3, 3E=12] projection
  // (E = 4, H = 2 heads of d = 2), reshaped to [T, B*H, d] and transposed to [B*H, d, T], against the interpreter's
  // Slice, Reshape and Transpose.
  cases.push_back({"view_copy", 0.0, [] {
                     std::mt19937 rng(42);
                     auto xd = random_data(rng, 4 * 3 * 12);
                     OneOp cut;
                     cut.in({4, 3, 12}, xd);
                     cut.out({4, 3, 4});
                     auto k = cut.run(OpKind::Slice, {{"starts", Dims{4}}, {"ends", Dims{8}}, {"axes", Dims{2}},
                                                      {"steps", Dims{1}}});
                     OneOp t;
                     t.in({4, 6, 2}, k[0]);
                     t.out({6, 2, 4});
                     auto ref = t.run(OpKind::Transpose, {{"perm", Dims{1, 2, 0}}});
                     auto fx = to_f32(xd);
                     std::vector<float> y(48, NAN);
                     view_copy(fx.data(), {3, 2, 2, 4}, {12, 2, 1, 36}, 4, y.data());
                     return max_error(y, ref[0]);
                   }});
  // A Concat's parts written into their places by view_copy (one part transposed on the way), against the
  // interpreter's Transpose and Concat.
  cases.push_back({"view_copy_into_place", 0.0, [] {
                     std::mt19937 rng(43);
                     auto ad = random_data(rng, 2 * 3 * 4), bd = random_data(rng, 3 * 2 * 2);
                     OneOp t;
                     t.in({3, 2, 2}, bd);
                     t.out({2, 3, 2});
                     auto bt = t.run(OpKind::Transpose, {{"perm", Dims{1, 0, 2}}});
                     OneOp cat;
                     cat.in({2, 3, 4}, ad);
                     cat.in({2, 3, 2}, bt[0]);
                     cat.out({2, 3, 6});
                     auto ref = cat.run(OpKind::Concat, {{"axis", int64_t{2}}});
                     auto fa = to_f32(ad), fb = to_f32(bd);
                     std::vector<float> y(36, NAN);
                     view_copy(fa.data(), {2, 3, 4}, {12, 4, 1}, 0, y.data(), {18, 6, 1}, 0);
                     view_copy(fb.data(), {2, 3, 2}, {2, 4, 1}, 0, y.data(), {18, 6, 1}, 4);
                     return max_error(y, ref[0]);
                   }});
  run_cases(cases);
}

KernelCase optimizer_case(OpKind kind, AttrMap attrs, int64_t step, const std::string &name) {
  return {name, 1e-6, [=] {
            int64_t n = 37;
            int states = kind == OpKind::SGDUpdate ? 0 : kind == OpKind::MomentumUpdate ? 1 : 2;
            std::mt19937 rng(static_cast<unsigned>(states * 11 + step));
            std::vector<std::vector<double>> in;
            for (int i = 0; i < 2 + states; ++i) in.push_back(random_data(rng, n, i == 3 ? 0 : -1, 1));
            OneOp f;
            for (auto &v : in) f.in({n}, v);
            for (int i = 0; i < 1 + states; ++i) f.out({n});
            auto ref = f.run(kind, attrs, step);
            std::vector<std::vector<float>> v;
            for (auto &d : in) v.push_back(to_f32(d));
            auto get = [&](const char *k) { return static_cast<float>(std::get<double>(attrs.at(k))); };
            auto flag = [&](const char *k) { return attrs.count(k) && std::get<int64_t>(attrs.at(k)) != 0; };
            // Outputs alias inputs: generated code updates parameters and state in place.
            if (kind == OpKind::SGDUpdate) sgd_step(n, v[0].data(), v[1].data(), get("lr"), get("weight_decay"), v[0].data());
            if (kind == OpKind::MomentumUpdate)
              momentum_step(n, v[0].data(), v[1].data(), v[2].data(), get("lr"), get("momentum"), get("weight_decay"),
                            flag("nesterov"), v[0].data(), v[2].data());
            if (kind == OpKind::AdamUpdate)
              adam_step(n, v[0].data(), v[1].data(), v[2].data(), v[3].data(), get("lr"), get("beta1"), get("beta2"),
                        get("eps"), get("weight_decay"), flag("decoupled"), step, v[0].data(), v[2].data(), v[3].data());
            double err = max_error(v[0], ref[0]);
            for (int i = 0; i < states; ++i) err = std::max(err, max_error(v[static_cast<size_t>(2 + i)], ref[static_cast<size_t>(1 + i)]));
            return err;
          }};
}

TEST(RuntimeKernels, Optimizers) {
  run_cases({
      optimizer_case(OpKind::SGDUpdate, {{"lr", 0.1}, {"weight_decay", 0.01}}, 1, "SGD(lr=0.1,wd=0.01)"),
      optimizer_case(OpKind::MomentumUpdate, {{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 0.0}}, 1,
                     "MOMENTUM(lr=0.05,mu=0.9,wd=0,nesterov=0)"),
      optimizer_case(OpKind::MomentumUpdate,
                     {{"lr", 0.05}, {"momentum", 0.8}, {"weight_decay", 0.1}, {"nesterov", int64_t{1}}}, 1,
                     "MOMENTUM(lr=0.05,mu=0.8,wd=0.1,nesterov=1)"),
      optimizer_case(OpKind::AdamUpdate,
                     {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.1},
                      {"decoupled", int64_t{0}}},
                     3, "ADAM(lr=0.01,wd=0.1,step=3)"),
      optimizer_case(OpKind::AdamUpdate,
                     {{"lr", 0.02}, {"beta1", 0.8}, {"beta2", 0.99}, {"eps", 1e-6}, {"weight_decay", 0.05},
                      {"decoupled", int64_t{1}}},
                     7, "ADAMW(lr=0.02,wd=0.05,step=7)"),
  });
}

TEST(RuntimeKernels, OptimizersLeaveAnInfiniteParameterWithoutDecayInfinite) {
  // torch.optim adds the decay term only when weight_decay != 0: a -inf mask entry trained by mistake (a buffer
  // exported as an initializer) with a zero gradient stays -inf, in the interpreter and in the kernels, not NaN.
  const double inf = std::numeric_limits<double>::infinity();
  for (OpKind kind : {OpKind::SGDUpdate, OpKind::MomentumUpdate, OpKind::AdamUpdate}) {
    int states = kind == OpKind::SGDUpdate ? 0 : kind == OpKind::MomentumUpdate ? 1 : 2;
    AttrMap attrs{{"lr", 0.1}, {"weight_decay", 0.0}, {"momentum", 0.9}, {"beta1", 0.9}, {"beta2", 0.999},
                  {"eps", 1e-8}};
    OneOp f;
    f.in({2}, {-inf, 1.0});
    f.in({2}, {0.0, 0.5});
    for (int i = 0; i < states; ++i) f.in({2}, {0.0, 0.0});
    for (int i = 0; i < 1 + states; ++i) f.out({2});
    auto ref = f.run(kind, attrs, 1);
    EXPECT_EQ(ref[0][0], -inf) << op_kind_name(kind);
    std::vector<float> p{-std::numeric_limits<float>::infinity(), 1.0f}, g{0.0f, 0.5f}, m{0, 0}, v{0, 0};
    if (kind == OpKind::SGDUpdate) sgd_step(2, p.data(), g.data(), 0.1f, 0.0f, p.data());
    if (kind == OpKind::MomentumUpdate) momentum_step(2, p.data(), g.data(), m.data(), 0.1f, 0.9f, 0.0f, false, p.data(), m.data());
    if (kind == OpKind::AdamUpdate)
      adam_step(2, p.data(), g.data(), m.data(), v.data(), 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 1, p.data(), m.data(),
                v.data());
    EXPECT_EQ(p[0], -std::numeric_limits<float>::infinity()) << op_kind_name(kind);
    EXPECT_NEAR(p[1], ref[0][1], 1e-6) << op_kind_name(kind);
  }
}

/** ai.onnx.preview.training ops with one tensor: (R, T, X, G, states...) -> (X', states'...). */
KernelCase onnx_optimizer_case(OpKind kind, AttrMap attrs, double r, int64_t t, const std::string &name) {
  return {name, 1e-6, [=] {
            int64_t n = 29;
            int states = kind == OpKind::Adam ? 2 : 1;
            std::mt19937 rng(static_cast<unsigned>(states * 13 + t));
            std::vector<std::vector<double>> in;
            for (int i = 0; i < 2 + states; ++i) in.push_back(random_data(rng, n, i >= 2 && kind != OpKind::Momentum ? 0 : -1, 1));
            OneOp f;
            f.in({}, {r});
            f.in({}, {static_cast<double>(t)}, DType::i64);
            for (auto &v : in) f.in({n}, v);
            for (int i = 0; i < 1 + states; ++i) f.out({n});
            auto ref = f.run(kind, attrs);
            std::vector<std::vector<float>> v;
            for (auto &d : in) v.push_back(to_f32(d));
            auto get = [&](const char *k, double def) {
              return static_cast<float>(attrs.count(k) ? std::get<double>(attrs.at(k)) : def);
            };
            float lr = static_cast<float>(r);
            if (kind == OpKind::Momentum)
              onnx_momentum_step(n, v[0].data(), v[1].data(), v[2].data(), lr, t, get("alpha", 0), get("beta", 0),
                                 get("norm_coefficient", 0), std::get<std::string>(attrs.at("mode")) == "nesterov",
                                 v[0].data(), v[2].data());
            if (kind == OpKind::Adam)
              onnx_adam_step(n, v[0].data(), v[1].data(), v[2].data(), v[3].data(), lr, t, get("alpha", 0.9),
                             get("beta", 0.999), get("epsilon", 1e-6), get("norm_coefficient", 0),
                             get("norm_coefficient_post", 0), v[0].data(), v[2].data(), v[3].data());
            if (kind == OpKind::Adagrad)
              onnx_adagrad_step(n, v[0].data(), v[1].data(), v[2].data(), lr, t, get("decay_factor", 0),
                                get("epsilon", 1e-6), get("norm_coefficient", 0), v[0].data(), v[2].data());
            double err = max_error(v[0], ref[0]);
            for (int i = 0; i < states; ++i)
              err = std::max(err, max_error(v[static_cast<size_t>(2 + i)], ref[static_cast<size_t>(1 + i)]));
            return err;
          }};
}

TEST(RuntimeKernels, OnnxPreviewOptimizers) {
  AttrMap mom{{"alpha", 0.9}, {"beta", 0.5}, {"norm_coefficient", 0.01}, {"mode", std::string("standard")}};
  AttrMap nes = mom;
  nes["mode"] = std::string("nesterov");
  run_cases({
      onnx_optimizer_case(OpKind::Momentum, mom, 0.1, 0, "ONNX_MOMENTUM(mode=standard,T=0)"),
      onnx_optimizer_case(OpKind::Momentum, nes, 0.1, 3, "ONNX_MOMENTUM(mode=nesterov,T=3)"),
      onnx_optimizer_case(OpKind::Adam, {{"alpha", 0.9}, {"beta", 0.99}, {"epsilon", 1e-4}, {"norm_coefficient", 0.02},
                                         {"norm_coefficient_post", 0.1}}, 0.05, 4, "ONNX_ADAM(T=4,norm=0.02,post=0.1)"),
      onnx_optimizer_case(OpKind::Adam, {}, 0.05, 0, "ONNX_ADAM(T=0,defaults)"),
      onnx_optimizer_case(OpKind::Adagrad, {{"decay_factor", 0.1}, {"epsilon", 1e-5}, {"norm_coefficient", 0.01}}, 0.2,
                          2, "ONNX_ADAGRAD(T=2,decay=0.1)"),
  });
}

TEST(RuntimeKernels, DropoutMatchesTheInterpreterWholeAndSharded) {
  Shape x{4, 6};
  std::mt19937 rng(8);
  auto xd = random_data(rng, 24), dyd = random_data(rng, 24);
  const int64_t seed = 42, step = 5;
  OneOp f;
  f.in(x, xd);
  f.out(x);
  f.out(x, DType::boolean);
  auto ref = f.run(OpKind::Dropout, {{"ratio", 0.3}, {"training_mode", int64_t{1}}, {"seed", seed}}, step);
  auto fx = to_f32(xd), fdy = to_f32(dyd);
  std::vector<float> y(24);
  std::vector<uint8_t> mask(24);
  dropout_forward(x, {0, 0}, {6, 1}, seed, step, 0.3f, fx.data(), y.data(), mask.data());
  EXPECT_LE(max_error(y, ref[0]), 1e-7);
  int kept = 0;
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(mask[i], ref[1][i]) << "element " << i;
    kept += mask[i];
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 24);
  // Two column shards [4, 3] with global offsets (0, 0) and (0, 3) reproduce the whole tensor's draws.
  for (int64_t col0 : {0, 3}) {
    std::vector<float> xs(12), ys(12);
    std::vector<uint8_t> ms(12);
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 3; ++c) xs[static_cast<size_t>(r * 3 + c)] = fx[static_cast<size_t>(r * 6 + col0 + c)];
    dropout_forward({4, 3}, {0, col0}, {6, 1}, seed, step, 0.3f, xs.data(), ys.data(), ms.data());
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(ys[static_cast<size_t>(r * 3 + c)], y[static_cast<size_t>(r * 6 + col0 + c)]);
        EXPECT_EQ(ms[static_cast<size_t>(r * 3 + c)], mask[static_cast<size_t>(r * 6 + col0 + c)]);
      }
  }
  OneOp b;
  b.in(x, dyd);
  b.in(x, ref[1], DType::boolean);
  b.out(x);
  auto rb = b.run(OpKind::DropoutGrad, {{"ratio", 0.3}});
  std::vector<float> dx(24);
  dropout_backward(24, 0.3f, fdy.data(), mask.data(), dx.data());
  EXPECT_LE(max_error(dx, rb[0]), 1e-7);
}

TEST(RuntimeKernels, RandomLikeMatchesTheInterpreterWholeAndSharded) {
  Shape x{4, 6};
  const int64_t seed = 77, step = 3;
  for (int64_t normal : {0, 1}) {
    OneOp f;
    f.in(x, std::vector<double>(24, 0.0));
    f.out(x);
    auto ref = f.run(OpKind::RandomLike, {{"normal", normal}, {"a", -0.5}, {"b", 2.0}, {"seed", seed}}, step);
    std::vector<float> y(24);
    random_like(x, {0, 0}, {6, 1}, seed, step, normal != 0, -0.5f, 2.0f, y.data());
    EXPECT_LE(max_error(y, ref[0]), 0.0);
    // Two row-and-column shards [2, 3] at (2, 0) and (0, 3) draw what the whole tensor drew there.
    for (auto [row0, col0] : {std::pair<int64_t, int64_t>{2, 0}, {0, 3}}) {
      std::vector<float> ys(6);
      random_like({2, 3}, {row0, col0}, {6, 1}, seed, step, normal != 0, -0.5f, 2.0f, ys.data());
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(ys[static_cast<size_t>(r * 3 + c)], y[static_cast<size_t>((row0 + r) * 6 + col0 + c)]);
    }
  }
}

}  // namespace
}  // namespace cleave::rt::testing
