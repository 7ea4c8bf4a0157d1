// The oneDNN paths of the CPU backend (runtime/cpu/onednn.cpp) against the runtime's own kernels (themselves tested
// against the interpreter in kernels_dense_test and kernels_window_block_test) on the same inputs: convolutions with
// groups, strides, dilations, asymmetric and negative pads in 1-3 d, pools with ceil-mode outputs, count_include_pad
// and tied maxima, batch norm, layer norm, softmax. Each case also checks that oneDNN took the shape (or, for the
// cases listed as ours, that it declined it). Skipped when the runtime was built without oneDNN.
#include "runtime/cpu/onednn.h"
#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

namespace dnn = cleave::rt::detail::onednn;

/** Runs f with the oneDNN paths off: the runtime's own kernels. */
template <class F>
void ours(F f) {
  dnn::set_enabled(false);
  f();
  dnn::set_enabled(true);
}

std::vector<float> random_f32(unsigned seed, int64_t n, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  return to_f32(random_data(rng, n, lo, hi));
}

double compare(const std::vector<float> &got, const std::vector<float> &want) {
  return max_error(got, std::vector<double>(want.begin(), want.end()));
}

struct Conv {
  int64_t n, c, m, group;
  Dims xs, ks, strides, pads, dilations;

  ConvShape shape() const {
    ConvShape s{n, c, m, group, xs, ks, {}, strides, pads, dilations};
    size_t sp = xs.size();
    for (size_t d = 0; d < sp; ++d) {
      int64_t span = xs[d] + pads[d] + pads[d + sp] - dilations[d] * (ks[d] - 1) - 1;
      s.y.push_back((span >= 0 ? span / strides[d] : -((-span + strides[d] - 1) / strides[d])) + 1);
    }
    return s;
  }
  /** Elements of X, W and Y. */
  struct Sizes {
    int64_t x, w, y;
  };
  Sizes sizes() const {
    Sizes z{n * c, m * (c / group), n * m};
    for (int64_t v : xs) z.x *= v;
    for (int64_t v : ks) z.w *= v;
    for (int64_t v : shape().y) z.y *= v;
    return z;
  }
  std::string name(const char *what) const {
    Shape x{n, c}, w{m, c / group};
    x.insert(x.end(), xs.begin(), xs.end());
    w.insert(w.end(), ks.begin(), ks.end());
    return std::string(what) + "(x=" + dims_str(x) + ",w=" + dims_str(w) + ",s=" + dims_str(strides) +
           ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) + ",g=" + std::to_string(group) + ")";
  }
};

std::vector<KernelCase> conv_cases(const Conv &p) {
  ConvShape s = p.shape();
  const Conv::Sizes z = p.sizes();
  const int64_t nx = z.x, nw = z.w, ny = z.y;
  unsigned seed = static_cast<unsigned>(nx * 7 + nw * 13 + ny);
  std::vector<KernelCase> out;
  out.push_back({p.name("ONEDNN_CONV"), 1e-5, [=] {
                   auto x = random_f32(seed, nx), w = random_f32(seed + 1, nw), b = random_f32(seed + 2, p.m);
                   std::vector<float> got(static_cast<size_t>(ny), NAN), want(got.size());
                   if (!dnn::conv_forward(s, x.data(), w.data(), b.data(), got.data())) return double(INFINITY);
                   ours([&] { conv_forward(s, x.data(), w.data(), b.data(), want.data()); });
                   std::vector<float> got_nb(got.size(), NAN), want_nb(got.size());
                   if (!dnn::conv_forward(s, x.data(), w.data(), nullptr, got_nb.data())) return double(INFINITY);
                   ours([&] { conv_forward(s, x.data(), w.data(), nullptr, want_nb.data()); });
                   return std::max(compare(got, want), compare(got_nb, want_nb));
                 }});
  out.push_back({p.name("ONEDNN_CONV_BWD_DATA"), 1e-5, [=] {
                   auto dy = random_f32(seed + 3, ny), w = random_f32(seed + 4, nw);
                   std::vector<float> got(static_cast<size_t>(nx), NAN), want(got.size());
                   if (!dnn::conv_backward_data(s, dy.data(), w.data(), got.data())) return double(INFINITY);
                   ours([&] { conv_backward_data(s, dy.data(), w.data(), want.data()); });
                   return compare(got, want);
                 }});
  out.push_back({p.name("ONEDNN_CONV_BWD_FILTER"), 1e-5, [=] {
                   auto dy = random_f32(seed + 5, ny), x = random_f32(seed + 6, nx);
                   std::vector<float> got(static_cast<size_t>(nw), NAN), want(got.size());
                   if (!dnn::conv_backward_filter(s, dy.data(), x.data(), got.data())) return double(INFINITY);
                   ours([&] { conv_backward_filter(s, dy.data(), x.data(), want.data()); });
                   return compare(got, want);
                 }});
  return out;
}

TEST(RuntimeOneDnn, Conv) {
  if (!dnn::enabled()) GTEST_SKIP() << "the runtime is built without oneDNN (or CLEAVE_ONEDNN=0)";
  std::vector<Conv> params = {
      {4, 16, 32, 1, {16, 16}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},             // a ResNet block's stride-2 conv
      {2, 3, 8, 1, {15, 15}, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}},                // a stem: 3 input channels
      {2, 8, 16, 1, {9, 9}, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}},                 // 1x1 downsample
      {1, 4, 6, 2, {6, 5}, {3, 2}, {1, 2}, {0, 1, 2, 0}, {2, 1}},                  // groups, asymmetric pads, dilation
      {2, 6, 6, 6, {5, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},                  // depthwise
      {3, 2, 3, 1, {11}, {4}, {3}, {2, 1}, {2}},                                   // 1-d
      {2, 4, 6, 2, {13}, {3}, {2}, {0, 2}, {3}},                                   // 1-d, groups, dilation
      {1, 2, 2, 1, {4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 1}, {1, 1, 2}},  // 3-d
      {2, 4, 4, 2, {5, 6, 4}, {3, 2, 2}, {2, 1, 1}, {1, 1, 0, 0, 1, 1}, {1, 2, 1}},  // 3-d, groups
      // Negative pads (a spatial block of a larger conv): a box of X is read, the rest has no gradient.
      {2, 4, 4, 1, {10, 9}, {3, 3}, {1, 1}, {-1, 1, 1, -2}, {1, 1}},
      {1, 4, 6, 2, {12, 8}, {3, 2}, {2, 1}, {-2, 0, -1, 1}, {1, 2}},
      {2, 3, 2, 1, {12}, {3}, {2}, {-3, -1}, {1}},
      {1, 2, 4, 1, {6, 7, 6}, {3, 3, 2}, {1, 2, 1}, {-1, 1, 0, 1, -1, -2}, {1, 1, 2}},
      // Taps that read only padding: ours cuts them off before im2col, oneDNN here runs the whole kernel.
      {4, 16, 8, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {4, 16, 8, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {2, 4, 4, 2, {3, 2}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
  };
  std::vector<KernelCase> cases;
  for (const Conv &p : params)
    for (KernelCase &c : conv_cases(p)) cases.push_back(std::move(c));
  run_cases(cases);
}

/** A conv whose dead taps are cut (conv.cpp's live_taps) runs on oneDNN over a box of W's whole kernel rows. Each case
 *  gives the whole conv and, worked out by hand, its cut: oneDNN on the cut reading and writing W through the box
 *  must equal ours on the whole conv (whose cut taps get a zero gradient). */
TEST(RuntimeOneDnn, ConvOverAKernelBox) {
  struct Cut {
    Conv whole;
    Dims ks, pads, lo;  // the cut kernel, its pads, and where it starts in a kernel row
  };
  std::vector<Cut> cuts = {
      // 3x3 on a 1x1 map (ResNet's layer4 at 32x32): the centre tap only.
      {{4, 16, 8, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      // 3x3 at stride 2 on 2x2: the first row and column read padding only.
      {{4, 16, 8, 1, {2, 2}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}}, {2, 2}, {0, 0, 1, 1}, {1, 1}},
      // Groups, a 1x2 map, dilation 2: rows cut to the centre; the columns' outer taps also read padding only, but a
      // box may keep them.
      {{2, 4, 6, 2, {1, 2}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}}, {1, 3}, {0, 2, 0, 2}, {1, 0}},
  };
  std::vector<KernelCase> cases;
  for (const Cut &c : cuts) {
    ConvShape whole = c.whole.shape(), cut = whole;
    cut.w = c.ks;
    cut.pads = c.pads;
    dnn::KernelBox box{whole.w, c.lo};
    const Conv::Sizes z = c.whole.sizes();
    const int64_t nx = z.x, nw = z.w, ny = z.y;
    cases.push_back({c.whole.name("ONEDNN_BOX_CONV"), 1e-5, [=] {
                       auto x = random_f32(1, nx), w = random_f32(2, nw), b = random_f32(3, c.whole.m);
                       std::vector<float> got(static_cast<size_t>(ny), NAN), want(got.size());
                       if (!dnn::conv_forward(cut, x.data(), w.data(), b.data(), got.data(), box))
                         return double(INFINITY);
                       ours([&] { conv_forward(whole, x.data(), w.data(), b.data(), want.data()); });
                       return compare(got, want);
                     }});
    cases.push_back({c.whole.name("ONEDNN_BOX_CONV_BWD_DATA"), 1e-5, [=] {
                       auto dy = random_f32(4, ny), w = random_f32(5, nw);
                       std::vector<float> got(static_cast<size_t>(nx), NAN), want(got.size());
                       if (!dnn::conv_backward_data(cut, dy.data(), w.data(), got.data(), box))
                         return double(INFINITY);
                       ours([&] { conv_backward_data(whole, dy.data(), w.data(), want.data()); });
                       return compare(got, want);
                     }});
    cases.push_back({c.whole.name("ONEDNN_BOX_CONV_BWD_FILTER"), 1e-5, [=] {
                       auto dy = random_f32(6, ny), x = random_f32(7, nx);
                       std::vector<float> got(static_cast<size_t>(nw), 0.0f), want(got.size(), NAN);
                       if (!dnn::conv_backward_filter(cut, dy.data(), x.data(), got.data(), box))
                         return double(INFINITY);
                       ours([&] { conv_backward_filter(whole, dy.data(), x.data(), want.data()); });
                       return compare(got, want);
                     }});
    // The public kernels take the same path (oneDNN on the cut) and must agree with ours.
    cases.push_back({c.whole.name("ONEDNN_CUT_CONV_RT"), 1e-5, [=] {
                       auto dy = random_f32(8, ny), x = random_f32(9, nx);
                       std::vector<float> got(static_cast<size_t>(nw), NAN), want(got.size(), NAN);
                       conv_backward_filter(whole, dy.data(), x.data(), got.data());
                       ours([&] { conv_backward_filter(whole, dy.data(), x.data(), want.data()); });
                       return compare(got, want);
                     }});
  }
  run_cases(cases);
}

struct Pool {
  Dims x, kernel, strides, pads, dilations;
  bool ceil_mode = false, include_pad = false;
  bool avg_onednn = true;  // whether oneDNN must take the average pool (false: its divisor differs; ours must run)

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
  std::string name(const char *what) const {
    return std::string(what) + "(x=" + dims_str(x) + ",k=" + dims_str(kernel) + ",s=" + dims_str(strides) +
           ",p=" + dims_str(pads) + ",d=" + dims_str(dilations) + ",ceil=" + std::to_string(ceil_mode) +
           ",include_pad=" + std::to_string(include_pad) + ")";
  }
};

/** Inputs with many ties (a ReLU's zeros and a few repeated values), so the max pools' choice of the first maximum
 *  in each window is exercised. */
std::vector<float> tied(unsigned seed, int64_t n) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-3, 2);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &e : x) e = static_cast<float>(std::max(0, v(rng)));
  return x;
}

std::vector<KernelCase> pool_cases(const Pool &p) {
  PoolShape s = p.shape();
  int64_t nx = count(p.x), ny = s.nc;
  for (int64_t v : s.y) ny *= v;
  unsigned seed = static_cast<unsigned>(nx + 3 * ny);
  // The result when oneDNN must take the shape: the error; when it must decline: 0, or infinite if it took it.
  auto check = [](bool must, bool took, double err) { return took == must ? (took ? err : 0.0) : double(INFINITY); };
  std::vector<KernelCase> out;
  for (bool ties : {false, true})
    out.push_back({p.name(ties ? "ONEDNN_MAX_POOL_TIES" : "ONEDNN_MAX_POOL"), 1e-6, [=] {
                     auto x = ties ? tied(seed, nx) : random_f32(seed, nx), dy = random_f32(seed + 1, ny);
                     std::vector<float> y(static_cast<size_t>(ny), NAN), want_y(y.size());
                     std::vector<float> dx(static_cast<size_t>(nx), NAN), want_dx(dx.size());
                     bool took = dnn::max_pool_forward(s, x.data(), y.data());
                     took = dnn::max_pool_backward(s, dy.data(), x.data(), dx.data()) && took;
                     ours([&] {
                       max_pool_forward(s, x.data(), want_y.data(), nullptr);
                       max_pool_backward(s, dy.data(), x.data(), want_dx.data());
                     });
                     return check(true, took, std::max(compare(y, want_y), compare(dx, want_dx)));
                   }});
  out.push_back({p.name("ONEDNN_AVG_POOL"), 1e-6, [=] {
                   auto x = random_f32(seed + 2, nx), dy = random_f32(seed + 3, ny);
                   std::vector<float> y(static_cast<size_t>(ny), NAN), want_y(y.size());
                   std::vector<float> dx(static_cast<size_t>(nx), NAN), want_dx(dx.size());
                   bool took = dnn::avg_pool_forward(s, x.data(), y.data());
                   took = dnn::avg_pool_backward(s, dy.data(), dx.data()) && took;
                   ours([&] {
                     avg_pool_forward(s, x.data(), want_y.data());
                     avg_pool_backward(s, dy.data(), want_dx.data());
                   });
                   return check(p.avg_onednn, took, std::max(compare(y, want_y), compare(dx, want_dx)));
                 }});
  return out;
}

TEST(RuntimeOneDnn, Pool) {
  if (!dnn::enabled()) GTEST_SKIP() << "the runtime is built without oneDNN (or CLEAVE_ONEDNN=0)";
  std::vector<Pool> params = {
      {{4, 16, 16, 16}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},  // ResNet's stem pool
      {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {{1, 2, 8, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, false},   // ceil mode: a wider end pad
      {{2, 2, 7, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},               // the last input in no window
      {{2, 2, 10}, {3}, {2}, {0, 0}, {2}, true, false},                   // 1-d, dilation, ceil mode
      {{1, 1, 5, 4, 6}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1, 1, 0, 1}, {1, 1, 1}, false, true},  // 3-d, include_pad
      {{2, 3, 6, 6, 5}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, false, false},
      // count_include_pad with a window past the padded input (ceil mode): oneDNN would divide by the whole kernel,
      // ours by the positions inside the padded input; the max pool is the same either way.
      {{1, 2, 8, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, true, false},
  };
  std::vector<KernelCase> cases;
  for (const Pool &p : params)
    for (KernelCase &c : pool_cases(p)) cases.push_back(std::move(c));
  run_cases(cases);
}

/** Batch norm statistics oneDNN accumulates in float against ours in double: on a large batch with a mean far from
 *  zero, the error bound says how far they drift apart. */
KernelCase batch_norm_case(int64_t n, int64_t c, int64_t d, double offset, double bound) {
  std::string name = "ONEDNN_BATCH_NORM(x=" + dims_str({n, c, d}) + ",offset=" + std::to_string(offset) + ")";
  return {name, bound, [=] {
            int64_t nx = n * c * d;
            unsigned seed = static_cast<unsigned>(nx + c);
            auto x = random_f32(seed, nx, offset - 1, offset + 1), dy = random_f32(seed + 1, nx);
            auto scale = random_f32(seed + 2, c), bias = random_f32(seed + 3, c);
            std::vector<float> y(static_cast<size_t>(nx), NAN), want_y(y.size()), dx(y.size(), NAN), want_dx(y.size());
            std::vector<float> rm(static_cast<size_t>(c), 0.5f), rv(rm.size(), 2.0f), want_rm = rm, want_rv = rv;
            std::vector<float> mean(rm.size()), invstd(rm.size()), want_mean(rm.size()), want_invstd(rm.size());
            std::vector<float> ds(rm.size()), db(rm.size()), want_ds(rm.size()), want_db(rm.size());
            std::vector<float> m(rm.size()), v(rm.size());
            if (!dnn::batch_norm_train_forward(n, c, d, x.data(), scale.data(), bias.data(), 1e-5f, y.data(), m.data(),
                                               v.data()))
              return double(INFINITY);
            batch_norm_train_forward(n, c, d, x.data(), scale.data(), bias.data(), 1e-5f, 0.9f, y.data(), rm.data(),
                                     rv.data(), mean.data(), invstd.data());
            if (!dnn::batch_norm_backward(n, c, d, dy.data(), x.data(), scale.data(), mean.data(), invstd.data(),
                                          dx.data(), ds.data(), db.data()))
              return double(INFINITY);
            ours([&] {
              batch_norm_train_forward(n, c, d, x.data(), scale.data(), bias.data(), 1e-5f, 0.9f, want_y.data(),
                                       want_rm.data(), want_rv.data(), want_mean.data(), want_invstd.data());
              batch_norm_backward(n, c, d, dy.data(), x.data(), scale.data(), want_mean.data(), want_invstd.data(),
                                  want_dx.data(), want_ds.data(), want_db.data());
            });
            // The sums dscale and dbias grow with the batch: compared relative to their largest value.
            auto rel = [](const std::vector<float> &got, const std::vector<float> &want) {
              double big = 1;
              for (float w : want) big = std::max(big, double(std::fabs(w)));
              double err = 0;
              for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]) / big);
              return err;
            };
            return std::max({compare(y, want_y), compare(rm, want_rm), compare(rv, want_rv), compare(mean, want_mean),
                             compare(invstd, want_invstd), compare(dx, want_dx), rel(ds, want_ds), rel(db, want_db)});
          }};
}

TEST(RuntimeOneDnn, BatchNorm) {
  if (!dnn::enabled()) GTEST_SKIP() << "the runtime is built without oneDNN (or CLEAVE_ONEDNN=0)";
  run_cases({batch_norm_case(4, 3, 25, 0, 1e-5), batch_norm_case(8, 6, 1, 0, 1e-5),
             batch_norm_case(32, 16, 256, 0, 1e-5), batch_norm_case(32, 16, 256, 3, 1e-5)});
}

/** Softmax forward and backward along the middle axis of [outer, dim, inner], oneDNN against our loops (a row of
 *  -inf but one entry, NaN in a row: both must give what ours gives). */
KernelCase softmax_case(int64_t outer, int64_t dim, int64_t inner, bool special) {
  std::string name = "ONEDNN_SOFTMAX(x=" + dims_str({outer, dim, inner}) + (special ? ",inf_nan" : "") + ")";
  return {name, 1e-6, [=] {
            int64_t n = outer * dim * inner;
            unsigned seed = static_cast<unsigned>(n + dim);
            auto x = random_f32(seed, n, -8, 8), dy = random_f32(seed + 1, n);
            if (special) {
              for (int64_t a = 1; a < dim; ++a) x[static_cast<size_t>(a * inner)] = -INFINITY;  // row 0: one finite
              x[static_cast<size_t>(dim * inner)] = NAN;                                   // row 1 of outer 1: NaN
            }
            std::vector<float> y(static_cast<size_t>(n)), dx(y.size()), y_ours(y.size()), dx_ours(y.size());
            if (!dnn::softmax_forward(outer, dim, inner, x.data(), y.data()) ||
                !dnn::softmax_backward(outer, dim, inner, dy.data(), y.data(), dx.data()))
              return double{INFINITY};  // oneDNN declined
            ours([&] {
              softmax_forward(outer, dim, inner, x.data(), y_ours.data(), false);
              softmax_backward(outer, dim, inner, dy.data(), y_ours.data(), dx_ours.data(), false);
            });
            // NaN where ours has NaN (max_error counts a NaN against a number as infinite error).
            return std::max(compare(y, y_ours), compare(dx, dx_ours));
          }};
}

/** LayerNormalization forward and backward over rows of [outer, inner], oneDNN against our loops (with and without
 *  bias; the statistics rt.h promises: mean and 1/sqrt(var + eps)). */
KernelCase layer_norm_case(int64_t outer, int64_t inner, bool bias, double offset) {
  std::string name = "ONEDNN_LAYER_NORM(x=" + dims_str({outer, inner}) + (bias ? ",bias" : "") +
                     ",offset=" + std::to_string(offset) + ")";
  return {name, 1e-5, [=] {
            int64_t n = outer * inner;
            unsigned seed = static_cast<unsigned>(n + inner);
            auto x = random_f32(seed, n, offset - 1, offset + 1), dy = random_f32(seed + 1, n);
            auto scale = random_f32(seed + 2, inner, 0.5, 1.5), b = random_f32(seed + 3, inner);
            const float *bp = bias ? b.data() : nullptr;
            auto run = [&](std::vector<float> &y, std::vector<float> &mean, std::vector<float> &invstd,
                           std::vector<float> &dx, std::vector<float> &ds, std::vector<float> &db) {
              y.resize(static_cast<size_t>(n));
              dx.resize(y.size());
              mean.resize(static_cast<size_t>(outer));
              invstd.resize(mean.size());
              ds.resize(static_cast<size_t>(inner));
              db.resize(ds.size());
              layer_norm_forward(outer, inner, x.data(), scale.data(), bp, 1e-5f, y.data(), mean.data(), invstd.data());
              layer_norm_backward(outer, inner, dy.data(), x.data(), scale.data(), mean.data(), invstd.data(),
                                  dx.data(), ds.data(), db.data());
            };
            std::vector<float> y, mean, invstd, dx, ds, db, y0, mean0, invstd0, dx0, ds0, db0;
            std::vector<float> probe(static_cast<size_t>(n));
            if (!dnn::layer_norm_forward(outer, inner, x.data(), scale.data(), bp, 1e-5f, probe.data(), nullptr,
                                         nullptr))
              return double{INFINITY};  // oneDNN declined
            run(y, mean, invstd, dx, ds, db);
            ours([&] { run(y0, mean0, invstd0, dx0, ds0, db0); });
            return std::max({compare(y, y0), compare(mean, mean0), compare(invstd, invstd0), compare(dx, dx0),
                             compare(ds, ds0), compare(db, db0)});
          }};
}

TEST(RuntimeOneDnn, LayerNorm) {
  if (!dnn::enabled()) GTEST_SKIP() << "the runtime is built without oneDNN (or CLEAVE_ONEDNN=0)";
  run_cases({layer_norm_case(1024, 256, true, 0), layer_norm_case(7, 5, false, 0), layer_norm_case(64, 48, true, 3),
             layer_norm_case(1, 1, true, 0)});
}

TEST(RuntimeOneDnn, Softmax) {
  if (!dnn::enabled()) GTEST_SKIP() << "the runtime is built without oneDNN (or CLEAVE_ONEDNN=0)";
  run_cases({softmax_case(4096, 64, 1, false), softmax_case(3, 10, 7, false), softmax_case(2, 5, 3, true),
             softmax_case(1, 1, 1, false)});
}

}  // namespace
}  // namespace cleave::rt::testing
