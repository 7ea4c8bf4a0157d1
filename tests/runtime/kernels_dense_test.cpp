// GEMM, batched GEMM, convolution and pooling kernels against the reference interpreter (forward and backward).
#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

KernelCase gemm_case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha, double beta) {
  std::ostringstream name;
  name << "GEMM(m=" << m << ",n=" << n << ",k=" << k << ",ta=" << ta << ",tb=" << tb << ",alpha=" << alpha
       << ",beta=" << beta << ")";
  return {name.str(), 1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 17 + k));
            Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
            auto a = random_data(rng, m * k), b = random_data(rng, k * n), c = random_data(rng, m * n);
            OneOp op;
            op.in(sa, a);
            op.in(sb, b);
            op.in({m, n}, c);
            op.out({m, n});
            auto ref = op.run(OpKind::Gemm, {{"alpha", alpha}, {"beta", beta}, {"transA", int64_t{ta}},
                                             {"transB", int64_t{tb}}});
            auto fa = to_f32(a), fb = to_f32(b), fc = to_f32(c);
            gemm(ta, tb, m, n, k, static_cast<float>(alpha), fa.data(), sa[1], fb.data(), sb[1],
                 static_cast<float>(beta), fc.data(), n);
            return max_error(fc, ref[0]);
          }};
}

KernelCase batched_gemm_case(int64_t batch, int64_t m, int64_t n, int64_t k, bool broadcast_b) {
  std::ostringstream name;
  name << "GEMM_BATCHED(b=" << batch << ",m=" << m << ",n=" << n << ",k=" << k << ",bcast_b=" << broadcast_b << ")";
  return {name.str(), 1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(batch * 7 + m * 5 + n * 3 + k));
            Shape sb = broadcast_b ? Shape{k, n} : Shape{batch, k, n};
            auto a = random_data(rng, batch * m * k), b = random_data(rng, count(sb));
            OneOp op;
            op.in({batch, m, k}, a);
            op.in(sb, b);
            op.out({batch, m, n});
            auto ref = op.run(OpKind::MatMul);
            auto fa = to_f32(a), fb = to_f32(b);
            std::vector<float> fc(static_cast<size_t>(batch * m * n), NAN);  // beta 0 must ignore old contents
            gemm_strided_batched(false, false, m, n, k, 1.0f, fa.data(), k, m * k, fb.data(), n,
                                 broadcast_b ? 0 : k * n, 0.0f, fc.data(), n, m * n, batch);
            return max_error(fc, ref[0]);
          }};
}

/** One conv configuration: x [n, c, xs...], kernel spatial ks, m output channels. */
struct ConvParams {
  int64_t n, c, m, group;
  Dims xs, ks, strides, pads, dilations;
  std::string name(const char *what) const {
    Shape x{n, c}, w{m, c / group};
    x.insert(x.end(), xs.begin(), xs.end());
    w.insert(w.end(), ks.begin(), ks.end());
    return std::string(what) + "(x=" + dims_str(x) + ",w=" + dims_str(w) + ",s=" + dims_str(strides) +
           ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) + ",g=" + std::to_string(group) + ")";
  }
  ConvShape shape() const {
    ConvShape s{n, c, m, group, xs, ks, {}, strides, pads, dilations};
    size_t sp = xs.size();
    for (size_t d = 0; d < sp; ++d)
      s.y.push_back((xs[d] + pads[d] + pads[d + sp] - dilations[d] * (ks[d] - 1) - 1) / strides[d] + 1);
    return s;
  }
  AttrMap attrs() const {
    return {{"strides", strides}, {"pads", pads}, {"dilations", dilations}, {"group", group}};
  }
};

std::vector<KernelCase> conv_cases(const ConvParams &p) {
  ConvShape s = p.shape();
  Shape x{p.n, p.c}, w{p.m, p.c / p.group}, y{p.n, p.m};
  x.insert(x.end(), p.xs.begin(), p.xs.end());
  w.insert(w.end(), p.ks.begin(), p.ks.end());
  y.insert(y.end(), s.y.begin(), s.y.end());
  std::mt19937 seed_rng(static_cast<unsigned>(count(x) + 31 * count(w)));
  unsigned seed = seed_rng();
  std::vector<KernelCase> out;
  out.push_back({p.name("CONV"), 1e-5, [=] {
                   std::mt19937 rng(seed);
                   auto xd = random_data(rng, count(x)), wd = random_data(rng, count(w)), bd = random_data(rng, p.m);
                   OneOp op;
                   op.in(x, xd);
                   op.in(w, wd);
                   op.in({p.m}, bd);
                   op.out(y);
                   auto ref = op.run(OpKind::Conv, p.attrs());
                   auto fx = to_f32(xd), fw = to_f32(wd), fb = to_f32(bd);
                   std::vector<float> fy(static_cast<size_t>(count(y)));
                   conv_forward(s, fx.data(), fw.data(), fb.data(), fy.data());
                   return max_error(fy, ref[0]);
                 }});
  out.push_back({p.name("CONV_BWD_DATA"), 1e-5, [=] {
                   std::mt19937 rng(seed + 1);
                   auto dyd = random_data(rng, count(y)), wd = random_data(rng, count(w));
                   OneOp op;
                   op.in(y, dyd);
                   op.in(w, wd);
                   op.out(x);
                   auto ref = op.run(OpKind::ConvGradData, p.attrs());
                   auto fdy = to_f32(dyd), fw = to_f32(wd);
                   std::vector<float> fdx(static_cast<size_t>(count(x)), NAN);
                   conv_backward_data(s, fdy.data(), fw.data(), fdx.data());
                   return max_error(fdx, ref[0]);
                 }});
  out.push_back({p.name("CONV_BWD_FILTER"), 1e-5, [=] {
                   std::mt19937 rng(seed + 2);
                   auto dyd = random_data(rng, count(y)), xd = random_data(rng, count(x));
                   OneOp op;
                   op.in(y, dyd);
                   op.in(x, xd);
                   op.out(w);
                   auto ref = op.run(OpKind::ConvGradFilter, p.attrs());
                   auto fdy = to_f32(dyd), fx = to_f32(xd);
                   std::vector<float> fdw(static_cast<size_t>(count(w)), NAN);
                   conv_backward_filter(s, fdy.data(), fx.data(), fdw.data());
                   double err = max_error(fdw, ref[0]);
                   // The bias gradient is ReduceSum of dY over every axis but the channel.
                   Dims axes{0};
                   for (size_t d = 0; d < p.xs.size(); ++d) axes.push_back(static_cast<int64_t>(d + 2));
                   OneOp red;
                   red.in(y, dyd);
                   red.out({p.m});
                   auto rb = red.run(OpKind::ReduceSum, {{"axes", axes}, {"keepdims", int64_t{0}}});
                   std::vector<float> fdb(static_cast<size_t>(p.m));
                   conv_backward_bias(s, fdy.data(), fdb.data());
                   return std::max(err, max_error(fdb, rb[0]));
                 }});
  return out;
}

TEST(RuntimeKernels, Gemm) {
  std::vector<KernelCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) cases.push_back(gemm_case(7, 5, 9, ta, tb, 1.0, 0.0));
  cases.push_back(gemm_case(33, 17, 65, false, true, 0.5, 2.0));
  cases.push_back(gemm_case(1, 1, 1, true, false, -1.5, 1.0));
  cases.push_back(batched_gemm_case(3, 4, 6, 5, false));
  cases.push_back(batched_gemm_case(4, 2, 3, 7, true));
  run_cases(cases);
}

TEST(RuntimeKernels, Conv) {
  std::vector<ConvParams> params = {
      {2, 3, 4, 1, {7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {1, 4, 6, 2, {6, 5}, {3, 2}, {1, 2}, {0, 1, 2, 0}, {2, 1}},   // groups, asymmetric pads, dilation
      {2, 6, 6, 6, {5, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},   // depthwise
      {3, 2, 3, 1, {11}, {4}, {3}, {2, 1}, {2}},                     // 1-d
      {1, 2, 2, 1, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}},  // 3-d
      // Taps that read only padding, which conv.cpp cuts off: a 3x3 conv on a 1x1 map (ResNet's layer4 at 32x32),
      // on 2x2 at stride 2 (its first conv), a dilated one whose outer taps miss, and one cut in 1 of 3 dims.
      {2, 4, 3, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {2, 4, 3, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {1, 4, 4, 2, {3, 2}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
      {1, 2, 3, 1, {1, 4, 3}, {3, 2, 2}, {1, 1, 1}, {1, 0, 0, 1, 1, 1}, {1, 1, 1}},
  };
  // Random configurations from a fixed seed.
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 6; ++i) {
    ConvParams p;
    size_t sp = static_cast<size_t>(pick(1, 3));
    p.group = pick(1, 3);
    p.n = pick(1, 3);
    p.c = p.group * pick(1, 3);
    p.m = p.group * pick(1, 3);
    for (size_t d = 0; d < sp; ++d) {
      p.ks.push_back(pick(1, 3));
      p.strides.push_back(pick(1, 3));
      p.dilations.push_back(pick(1, 2));
      p.xs.push_back(pick(p.dilations[d] * (p.ks[d] - 1) + 1, 9 - 2 * static_cast<int64_t>(sp)));
    }
    for (size_t d = 0; d < 2 * sp; ++d) p.pads.push_back(pick(0, 2));
    params.push_back(p);
  }
  std::vector<KernelCase> cases;
  for (const ConvParams &p : params)
    for (KernelCase &c : conv_cases(p)) cases.push_back(std::move(c));
  run_cases(cases);
}

/** One pooling configuration over x [n, c, xs...]. */
struct PoolParams {
  Dims x, kernel, strides, pads, dilations;
  bool ceil_mode = false, include_pad = false;

  PoolShape shape() const {
    PoolShape s{x[0] * x[1], Dims(x.begin() + 2, x.end()), {}, kernel, strides, pads, dilations, include_pad};
    size_t sp = kernel.size();
    for (size_t d = 0; d < sp; ++d) {
      int64_t span = s.x[d] + pads[d] + pads[d + sp] - dilations[d] * (kernel[d] - 1) - 1;
      int64_t o = (ceil_mode ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
      if (ceil_mode && (o - 1) * strides[d] >= s.x[d] + pads[d]) --o;  // the last window must start inside
      s.y.push_back(o);
    }
    return s;
  }
  Shape y_shape() const {
    Shape y{x[0], x[1]};
    for (int64_t v : shape().y) y.push_back(v);
    return y;
  }
  std::string name(const char *what) const {
    return std::string(what) + "(x=" + dims_str(x) + ",k=" + dims_str(kernel) + ",s=" + dims_str(strides) +
           ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) + ",ceil=" + std::to_string(ceil_mode) +
           ",include_pad=" + std::to_string(include_pad) + ")";
  }
  AttrMap attrs(bool max) const {
    AttrMap a{{"kernel_shape", kernel}, {"strides", strides},           {"pads", pads},
              {"dilations", dilations},  {"ceil_mode", int64_t{ceil_mode}}};
    if (!max) a["count_include_pad"] = int64_t{include_pad};
    return a;
  }
};

std::vector<KernelCase> pool_cases(const PoolParams &p) {
  PoolShape s = p.shape();
  Shape y = p.y_shape();
  std::vector<KernelCase> out;
  out.push_back({p.name("MAX_POOL"), 1e-6, [=] {
                   std::mt19937 rng(static_cast<unsigned>(count(p.x)));
                   auto xd = random_data(rng, count(p.x)), dyd = random_data(rng, count(y));
                   OneOp f;
                   f.in(p.x, xd);
                   f.out(y);
                   f.out(y, DType::i64);
                   auto ref = f.run(OpKind::MaxPool, p.attrs(true));
                   auto fx = to_f32(xd), fdy = to_f32(dyd);
                   std::vector<float> fy(static_cast<size_t>(count(y))), fdx(static_cast<size_t>(count(p.x)));
                   std::vector<int64_t> idx(fy.size());
                   max_pool_forward(s, fx.data(), fy.data(), idx.data());
                   double err = max_error(fy, ref[0]);
                   for (size_t i = 0; i < idx.size(); ++i)
                     if (static_cast<double>(idx[i]) != ref[1][i]) err = INFINITY;
                   OneOp b;
                   b.in(y, dyd);
                   b.in(p.x, xd);
                   b.out(p.x);
                   auto rb = b.run(OpKind::MaxPoolGrad, p.attrs(true));
                   max_pool_backward(s, fdy.data(), fx.data(), fdx.data());
                   return std::max(err, max_error(fdx, rb[0]));
                 }});
  out.push_back({p.name("AVG_POOL"), 1e-6, [=] {
                   std::mt19937 rng(static_cast<unsigned>(count(p.x) + 1));
                   auto xd = random_data(rng, count(p.x)), dyd = random_data(rng, count(y));
                   OneOp f;
                   f.in(p.x, xd);
                   f.out(y);
                   auto ref = f.run(OpKind::AveragePool, p.attrs(false));
                   auto fx = to_f32(xd), fdy = to_f32(dyd);
                   std::vector<float> fy(static_cast<size_t>(count(y))), fdx(static_cast<size_t>(count(p.x)));
                   avg_pool_forward(s, fx.data(), fy.data());
                   OneOp b;
                   b.in(y, dyd);
                   b.out(p.x);
                   auto rb = b.run(OpKind::AveragePoolGrad, p.attrs(false));
                   avg_pool_backward(s, fdy.data(), fdx.data());
                   return std::max(max_error(fy, ref[0]), max_error(fdx, rb[0]));
                 }});
  return out;
}

TEST(RuntimeKernels, Pool) {
  std::vector<PoolParams> params = {
      {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
      {{1, 2, 8, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, true},
      {{1, 2, 8, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, false},
      {{2, 2, 10}, {3}, {2}, {0, 0}, {2}, true, false},
      {{1, 1, 5, 4, 6}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1, 1, 0, 1}, {1, 1, 1}, false, true},
  };
  std::vector<KernelCase> cases;
  for (const PoolParams &p : params)
    for (KernelCase &c : pool_cases(p)) cases.push_back(std::move(c));
  Shape gx{3, 4, 5, 6};
  cases.push_back({"GLOBAL_AVG_POOL(x=" + dims_str(gx) + ")", 1e-6, [=] {
                     std::mt19937 rng(5);
                     auto xd = random_data(rng, count(gx)), dyd = random_data(rng, 12);
                     OneOp f;
                     f.in(gx, xd);
                     f.out({3, 4, 1, 1});
                     auto ref = f.run(OpKind::GlobalAveragePool);
                     OneOp b;
                     b.in({3, 4, 1, 1}, dyd);
                     b.out(gx);
                     auto rb = b.run(OpKind::GlobalAveragePoolGrad);
                     auto fx = to_f32(xd), fdy = to_f32(dyd);
                     std::vector<float> fy(12), fdx(static_cast<size_t>(count(gx)));
                     global_avg_pool_forward(12, 30, fx.data(), fy.data());
                     global_avg_pool_backward(12, 30, fdy.data(), fdx.data());
                     return std::max(max_error(fy, ref[0]), max_error(fdx, rb[0]));
                   }});
  run_cases(cases);
}

}  // namespace
}  // namespace cleave::rt::testing
