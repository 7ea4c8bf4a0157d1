// Kernel cases for comparing the CUDA backend with the CPU backend: the same source is built against each runtime
// (kernel_cases_cpu as C++, kernel_cases_cuda as CUDA through kernel_cases.cu). Inputs are drawn on the device by
// rt::map_index from cleave/rng.h, so both builds see identical inputs; every output is written with
// rt::checkpoint_save to argv[1] and compare_checkpoints.py checks the two files against each other.
// Cases cover the shapes the codegen emits: transposed/strided GEMMs, asymmetric and negative conv pads (spatial
// blocks), groups, 1-d/3-d convs, pooling windows past the input, batch/layer/instance norm, conv transpose, resize,
// argmax/argmin, cumsum, one-hot, gather/scatter elements and gather_nd (negative indices, atomics of repeated targets),
// losses with ignore_index and weights, layout ops, region copy of several boxes, the elementwise maps' loops,
// dropout (masks must match bit for bit), random draws, optimizers. The pooling and batch-norm cases
// (pool_norm_cases.h) take cuDNN and kernel paths, tie-heavy max pooling included;
// kernels_vs_cpu.sh also runs the CUDA build with CLEAVE_CUDNN_POOL_NORM=0, so each case is checked on both paths,
// and both builds with --mixed (mixed_cases: mixed precision's GEMMs and convolutions).
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cleave/rt.h"
#include "pool_norm_cases.h"

namespace rt = cleave::rt;

namespace {

rt::Arena *g_arena = nullptr;
size_t g_used = 0;
std::vector<rt::NamedBuffer> g_outputs;

void *alloc_bytes(int64_t bytes) {
  void *p = g_arena->at(g_used, static_cast<size_t>(bytes));
  g_used += (static_cast<size_t>(bytes) + 255) / 256 * 256;
  return p;
}

float *alloc(int64_t n) { return static_cast<float *>(alloc_bytes(n * 4)); }

/** n values uniform in [lo, hi), drawn from (seed, i). */
float *input(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  float *p = alloc(n);
  rt::map_index(n, [=] CLEAVE_HD(int64_t i) { p[i] = lo + (hi - lo) * cleave::rng_uniform(seed, 7, i); });
  return p;
}

/** n labels in [0, c), every `ignore_every`-th one replaced by `ignore` (0: none). */
int64_t *labels(int64_t n, int64_t c, uint64_t seed, int64_t ignore_every = 0, int64_t ignore = -100) {
  auto *p = static_cast<int64_t *>(alloc_bytes(n * 8));
  rt::map_index(n, [=] CLEAVE_HD(int64_t i) {
    p[i] = ignore_every > 0 && i % ignore_every == 1 ? ignore
                                                      : static_cast<int64_t>(cleave::rng_uniform(seed, 3, i) * c);
  });
  return p;
}

float *output(const std::string &name, int64_t n) {
  float *p = alloc(n);
  rt::fill_bytes(p, 0xff, n * 4);  // NaN: an element a kernel forgets to write shows up
  g_outputs.push_back({name, p, n * 4});
  return p;
}

void record(const std::string &name, void *p, int64_t bytes) { g_outputs.push_back({name, p, bytes}); }

int64_t prod(const rt::Dims &d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

void gemm_cases() {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      int64_t m = 37, n = 19, k = 23, lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
      float *a = input((ta ? k : m) * lda, 1), *b = input((tb ? n : k) * ldb, 2);
      std::string tag = std::string("gemm_") + (ta ? "t" : "n") + (tb ? "t" : "n");
      float *c0 = output(tag + "_beta0", m * n);
      rt::gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.0f, c0, n);  // C starts as NaN: beta 0 must ignore it
      float *c1 = output(tag + "_beta1", m * ldc);
      rt::copy(c1, input(m * ldc, 3), m * ldc * 4);
      rt::gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.75f, c1, ldc);
    }
  float *c_k0 = output("gemm_k0", 3 * 4);
  rt::gemm(false, false, 3, 4, 0, 1.0f, c_k0, 1, c_k0, 4, 0.0f, c_k0, 4);  // k = 0, beta 0: zeros over the NaNs
  int64_t batch = 5, m = 8, n = 6, k = 4;
  float *a = input(m * k, 4), *b = input(batch * k * n, 5);
  float *c = output("gemm_batched_broadcast_a", batch * m * n);
  rt::gemm_strided_batched(false, false, m, n, k, 1.0f, a, k, 0, b, n, k * n, 0.0f, c, n, m * n, batch);
}

void conv_case(const std::string &name, rt::ConvShape s, bool bias) {
  int64_t nx = s.n * s.c * prod(s.x), nw = s.m * (s.c / s.group) * prod(s.w), ny = s.n * s.m * prod(s.y);
  float *x = input(nx, 11), *w = input(nw, 12), *b = bias ? input(s.m, 13) : nullptr, *dy = input(ny, 14);
  rt::conv_forward(s, x, w, b, output(name + "_y", ny));
  rt::conv_backward_data(s, dy, w, output(name + "_dx", nx));
  rt::conv_backward_filter(s, dy, x, output(name + "_dw", nw));
  rt::conv_backward_bias(s, dy, output(name + "_db", s.m));
}

/** The conv's output extent from cpu/conv.cpp's formula (floor division, negative pads allowed). */
rt::ConvShape conv_shape(int64_t n, int64_t c, int64_t m, int64_t group, rt::Dims x, rt::Dims w, rt::Dims strides,
                         rt::Dims pads, rt::Dims dil) {
  rt::ConvShape s{n, c, m, group, x, w, {}, strides, pads, dil};
  size_t sp = x.size();
  for (size_t d = 0; d < sp; ++d) {
    int64_t span = x[d] + pads[d] + pads[d + sp] - dil[d] * (w[d] - 1) - 1;
    s.y.push_back((span >= 0 ? span / strides[d] : -((-span + strides[d] - 1) / strides[d])) + 1);
  }
  return s;
}

void conv_cases() {
  conv_case("conv2d_sym", conv_shape(2, 3, 4, 1, {9, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true);
  conv_case("conv2d_asym_stride", conv_shape(2, 4, 6, 2, {10, 9}, {3, 2}, {2, 2}, {0, 1, 2, 0}, {1, 1}), true);
  conv_case("conv2d_negative_block", conv_shape(1, 2, 3, 1, {8, 7}, {3, 3}, {1, 1}, {-1, 1, 0, -2}, {1, 2}), false);
  conv_case("conv1d", conv_shape(3, 2, 5, 1, {12}, {4}, {2}, {1, 2}, {1}), true);
  conv_case("conv3d", conv_shape(1, 2, 2, 1, {5, 4, 6}, {2, 3, 2}, {1, 1, 2}, {1, 0, 1, 1, 0, 1}, {1, 1, 1}), true);
  // 4 spatial dims: past cuDNN's convolutions, the CUDA backend's direct kernels.
  conv_case("conv4d_direct",
            conv_shape(1, 2, 2, 1, {3, 3, 3, 4}, {2, 2, 2, 2}, {1, 1, 1, 1}, {0, 0, 0, 1, 1, 0, 0, 0}, {1, 1, 1, 1}),
            true);
}

/** n values of `input` rounded to bfloat16 (operands Operands::bf16) or binary16 (Operands::fp16). */
float *low_input(int64_t n, uint64_t seed, rt::Operands operands) {
  float *p = input(n, seed);
  if (operands == rt::Operands::bf16)
    rt::map_index(n, [=] CLEAVE_HD(int64_t i) { p[i] = cleave::round_bf16(p[i]); });
  else
    rt::map_index(n, [=] CLEAVE_HD(int64_t i) { p[i] = cleave::round_fp16(p[i]); });
  return p;
}

/** Run with --mixed (rt::Math::mixed, a --precision bf16/fp16 program): GEMMs and convolutions on operands that hold
 *  bf16 or fp16 values, which the CUDA backend multiplies on those types' tensor cores, and on float32 operands, which
 *  it must still multiply in fp32 exactly (not TF32). kernels_vs_cpu.sh compares them with the CPU backend within
 *  1e-5: long sums (k = 512, 576 taps) make TF32's rounding of float32 operands (2^-11) show. */
void mixed_cases() {
  int64_t m = 33, n = 17, k = 512;
  for (rt::Operands o : {rt::Operands::f32, rt::Operands::bf16, rt::Operands::fp16}) {
    std::string tag = o == rt::Operands::f32 ? "f32" : o == rt::Operands::bf16 ? "bf16" : "fp16";
    auto operand = [&](int64_t count, uint64_t seed) { return o == rt::Operands::f32 ? input(count, seed)
                                                                                     : low_input(count, seed, o); };
    for (int ta = 0; ta < 2; ++ta) {
      float *a = operand(m * k, 21), *b = operand(k * n, 22);
      std::string name = "mixed_gemm_" + tag + (ta ? "_tn" : "_nn");
      rt::gemm(ta, false, m, n, k, 1.0f, a, ta ? m : k, b, n, 0.0f, output(name, m * n), n, o);
    }
    int64_t batch = 3;
    float *a = operand(batch * m * k, 23), *b = operand(k * n, 24);
    rt::gemm_strided_batched(false, false, m, n, k, 1.0f, a, k, m * k, b, n, 0, 0.0f,
                             output("mixed_gemm_batched_" + tag, batch * m * n), n, m * n, batch, o);
    for (auto [name, s] : {std::pair{std::string("conv2d"), conv_shape(2, 64, 8, 1, {6, 5}, {3, 3}, {1, 1},
                                                                      {1, 1, 1, 1}, {1, 1})},
                           std::pair{std::string("conv2d_asym_group"), conv_shape(2, 64, 8, 2, {7, 6}, {3, 3}, {2, 1},
                                                                                 {0, 1, 2, 0}, {1, 1})}}) {
      s.operands = o;
      int64_t nx = s.n * s.c * prod(s.x), nw = s.m * (s.c / s.group) * prod(s.w), ny = s.n * s.m * prod(s.y);
      float *x = operand(nx, 25), *w = operand(nw, 26), *dy = operand(ny, 27);
      std::string at = "mixed_" + name + "_" + tag;
      rt::conv_forward(s, x, w, nullptr, output(at + "_y", ny));
      rt::conv_backward_data(s, dy, w, output(at + "_dx", nx));
      rt::conv_backward_filter(s, dy, x, output(at + "_dw", nw));
    }
  }
}

/** n values max(0, k / 4) for k uniform in [-4, 4) drawn from (seed, i): ReLU-like, most windows hold several equal
 *  maxima (zeros above all), so a max-pool gradient sent to another than the first maximum shows. */
float *tie_input(int64_t n, uint64_t seed) {
  float *p = alloc(n);
  rt::map_index(n, [=] CLEAVE_HD(int64_t i) {
    float k = floorf(8.0f * cleave::rng_uniform(seed, 7, i)) - 4.0f;
    p[i] = k > 0.0f ? k / 4.0f : 0.0f;
  });
  return p;
}

void pool_case(const rt::cases::PoolCase &c) {
  const rt::PoolShape &s = c.shape;
  int64_t nx = s.nc * prod(s.x), ny = s.nc * prod(s.y);
  float *x = c.ties ? tie_input(nx, 21) : input(nx, 21), *dy = input(ny, 22);
  if (c.kind == rt::cases::Pool::max) {
    int64_t *indices = nullptr;
    if (c.indices) {
      indices = static_cast<int64_t *>(alloc_bytes(ny * 8));
      record(c.name + "_indices", indices, ny * 8);
    }
    rt::max_pool_forward(s, x, output(c.name + "_y", ny), indices);
    rt::max_pool_backward(s, dy, x, output(c.name + "_dx", nx));
  } else {
    rt::avg_pool_forward(s, x, output(c.name + "_y", ny));
    rt::avg_pool_backward(s, dy, output(c.name + "_dx", nx));
  }
}

void pool_cases() {
  for (const auto &c : rt::cases::pool_cases()) pool_case(c);
  // A spatial block (codegen's halo splits): X holds global [2, 7) of 9, the outputs global [1, 3), kernel 3,
  // stride 2; the dX block of max_pool_backward is global [3, 6).
  rt::PoolShape b;
  b.nc = 3;
  b.x = {5};
  b.y = {2};
  b.kernel = {3};
  b.strides = {2};
  b.pads = {0, 0};
  b.dilations = {1};
  b.x_begin = {2};
  b.y_begin = {1};
  b.x_full = {9};
  float *bx = input(3 * 5, 25), *bdy = input(3 * 2, 26);
  rt::max_pool_forward(b, bx, output("maxpool_block_y", 3 * 2), nullptr);
  rt::avg_pool_forward(b, bx, output("avgpool_block_y", 3 * 2));
  rt::avg_pool_backward(b, bdy, output("avgpool_block_dx", 3 * 5));
  b.dx_begin = {3};
  b.dx = {3};
  rt::max_pool_backward(b, bdy, bx, output("maxpool_block_dx", 3 * 3));
  for (const auto &g : rt::cases::global_cases()) {
    float *x = input(g.nc * g.spatial, 23);
    rt::global_avg_pool_forward(g.nc, g.spatial, x, output(g.name + "_y", g.nc), g.divisor);
    rt::global_avg_pool_backward(g.nc, g.spatial, input(g.nc, 24), output(g.name + "_dx", g.nc * g.spatial),
                                 g.divisor);
  }
}

void norm_case(const rt::cases::NormCase &k) {
  int64_t n = k.n, c = k.c, d = k.d;
  float *x = input(n * c * d, 31, -2, 3), *scale = input(c, 32), *bias = input(c, 33), *dy = input(n * c * d, 34);
  float *rm = output(k.name + "_running_mean", c), *rv = output(k.name + "_running_var", c);
  rt::copy(rm, input(c, 35), c * 4);
  rt::copy(rv, input(c, 36, 0.5f, 1.5f), c * 4);
  float *mean = k.saved ? output(k.name + "_saved_mean", c) : nullptr;
  float *invstd = k.saved ? output(k.name + "_saved_invstd", c) : nullptr;
  rt::batch_norm_train_forward(n, c, d, x, scale, bias, k.eps, k.momentum, output(k.name + "_y", n * c * d), rm, rv,
                               mean, invstd);
  if (!k.saved) return;
  float *dx = k.want_dx ? output(k.name + "_dx", n * c * d) : nullptr;
  rt::batch_norm_backward(n, c, d, dy, x, scale, mean, invstd, dx, output(k.name + "_dscale", c),
                          output(k.name + "_dbias", c));
}

void norm_cases() {
  for (const auto &k : rt::cases::norm_cases()) norm_case(k);
  int64_t n = 4, c = 5, d = 9;
  float *x = input(n * c * d, 31, -2, 3), *scale = input(c, 32), *bias = input(c, 33);
  float *rm = input(c, 35), *rv = input(c, 36, 0.5f, 1.5f);
  rt::batch_norm_infer_forward(n, c, d, x, scale, bias, rm, rv, 1e-5f, output("bn_infer_y", n * c * d));
  rt::batch_norm_partial_stats(n, c, d, x, rm, output("bn_partial_stats", 2 * c));
  // Layer norm: rows a warp takes (33 wide; 300 rows, so the parameters' sums span chunks of rows) and rows a block
  // takes (1500 wide).
  for (auto [tag, outer, inner] : {std::tuple{std::string(""), int64_t{6}, int64_t{33}},
                                   std::tuple{std::string("_tall"), int64_t{300}, int64_t{33}},
                                   std::tuple{std::string("_wide"), int64_t{5}, int64_t{1500}}}) {
    float *lx = input(outer * inner, 37), *ls = input(inner, 38), *lb = input(inner, 39);
    float *ldy = input(outer * inner, 40);
    float *lm = output("ln_mean" + tag, outer), *li = output("ln_invstd" + tag, outer);
    rt::layer_norm_forward(outer, inner, lx, ls, lb, 1e-5f, output("ln_y" + tag, outer * inner), lm, li);
    rt::layer_norm_backward(outer, inner, ldy, lx, ls, lm, li, output("ln_dx" + tag, outer * inner),
                            output("ln_dscale" + tag, inner), output("ln_dbias" + tag, inner));
  }
}

void image_cases() {
  int64_t n = 3, c = 4, sp = 37;
  float *x = input(n * c * sp, 51, -2, 3), *scale = input(c, 52), *bias = input(c, 53), *dy = input(n * c * sp, 54);
  float *mean = output("in_mean", n * c), *invstd = output("in_invstd", n * c);
  rt::instance_norm_forward(n, c, sp, x, scale, bias, 1e-5f, output("in_y", n * c * sp), mean, invstd);
  rt::instance_norm_backward(n, c, sp, dy, x, scale, mean, invstd, output("in_dx", n * c * sp),
                             output("in_dscale", c), output("in_dbias", c));
  // ConvTranspose: the data gradient of a grouped, strided conv whose input (Y) carries output_padding, plus a bias.
  rt::ConvShape t = conv_shape(2, 6, 4, 2, {9, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1});
  float *tx = input(t.n * t.m * prod(t.y), 55), *tw = input(t.m * (t.c / t.group) * prod(t.w), 56);
  rt::conv_transpose_forward(t, tx, tw, input(t.c, 57), output("conv_transpose_y", t.n * t.c * prod(t.x)));
  struct R {
    const char *name;
    rt::Dims x, y;
    rt::ResizeMode mode;
    rt::ResizeCoord coord;
  };
  for (const R &r : {R{"resize_nearest", {5, 6}, {10, 12}, rt::ResizeMode::nearest, rt::ResizeCoord::asymmetric},
                     R{"resize_linear", {5, 6}, {10, 12}, rt::ResizeMode::linear, rt::ResizeCoord::half_pixel},
                     R{"resize_linear_corners", {4, 3, 5}, {8, 6, 7}, rt::ResizeMode::linear,
                       rt::ResizeCoord::align_corners},
                     R{"resize_cubic", {5, 6}, {10, 9}, rt::ResizeMode::cubic, rt::ResizeCoord::pytorch_half_pixel},
                     R{"resize_cubic_corners", {4, 3, 5}, {8, 6, 3}, rt::ResizeMode::cubic,
                       rt::ResizeCoord::align_corners}}) {
    rt::ResizeShape s;
    s.planes = 6;
    s.x = r.x;
    s.y = r.y;
    for (size_t d = 0; d < r.x.size(); ++d) s.scales.push_back(static_cast<double>(r.y[d]) / static_cast<double>(r.x[d]));
    s.mode = r.mode;
    s.coord = r.coord;
    s.nearest = rt::ResizeNearest::floor;
    int64_t nx = s.planes * prod(r.x), ny = s.planes * prod(r.y);
    rt::resize_forward(s, input(nx, 58), output(std::string(r.name) + "_y", ny));
    rt::resize_backward(s, input(ny, 59), output(std::string(r.name) + "_dx", nx));
  }
}

void index_cases() {
  // [outer, len, inner] = [3, 37, 5]; inputs on a coarse grid so ArgMax/ArgMin meet ties (the last-index variants
  // differ from the first-index ones only there).
  int64_t outer = 3, len = 37, inner = 5, lines = outer * inner;
  float *x = input(outer * len * inner, 61);
  rt::map_index(outer * len * inner, [=] CLEAVE_HD(int64_t i) { x[i] = static_cast<float>(static_cast<int>(x[i] * 4)); });
  for (int min = 0; min < 2; ++min)
    for (int last = 0; last < 2; ++last) {
      auto *y = static_cast<int64_t *>(alloc_bytes(lines * 8));
      rt::arg_extreme(outer, len, inner, x, y, min != 0, last != 0);
      record(std::string(min ? "argmin" : "argmax") + (last ? "_last" : ""), y, lines * 8);
    }
  for (int largest = 0; largest < 2; ++largest) {
    int64_t k = len > 2 ? len - 1 : len;
    auto *y = static_cast<int64_t *>(alloc_bytes(outer * k * inner * 8));
    rt::top_k(outer, len, inner, x, y, k, largest != 0);
    record(largest ? "top_k" : "bottom_k", y, outer * k * inner * 8);
  }
  float *cx = input(outer * len * inner, 62);
  for (int exclusive = 0; exclusive < 2; ++exclusive)
    for (int reverse = 0; reverse < 2; ++reverse)
      rt::cumsum(outer, len, inner, cx, output("cumsum" + std::string(exclusive ? "_exclusive" : "") +
                                               (reverse ? "_reverse" : ""), outer * len * inner),
                 exclusive != 0, reverse != 0);
  int64_t depth = 6;
  int64_t *ind = labels(lines, depth + 2, 63);  // [0, depth + 2): the last two are out of range
  float *values = input(2, 64);
  rt::one_hot(outer, depth, inner, ind, values, output("one_hot", outer * depth * inner), sizeof(float));
}

void gather_scatter_cases() {
  // GatherElements and ScatterElements along axis 1 of [6, 37, 5], indices [4, 30, 5] (every third one negative).
  rt::Dims data{6, 37, 5}, ind{4, 30, 5};
  int64_t nd = prod(data), ni = prod(ind);
  float *x = input(nd, 71), *u = input(ni, 73);
  int64_t *gi = labels(ni, 37, 72);
  rt::map_index(ni, [=] CLEAVE_HD(int64_t i) { gi[i] -= i % 3 == 0 ? 37 : 0; });
  rt::gather_elements(data, ind, 1, gi, x, output("gather_elements", ni));
  rt::scatter_elements(data, ind, 1, gi, x, u, output("scatter_elements_add", nd), true);
  // Without a reduction the targets of a line are distinct: position j of line l hits (7 j + l) mod 37.
  auto *di = static_cast<int64_t *>(alloc_bytes(ni * 8));
  rt::map_index(ni, [=] CLEAVE_HD(int64_t i) {
    int64_t j = i / 5 % 30, line = i / 150 * 5 + i % 5;
    di[i] = (7 * j + line) % 37 - (i % 2 != 0 ? 37 : 0);
  });
  rt::scatter_elements(data, ind, 1, di, x, u, output("scatter_elements", nd), false);
  // GatherND: batch_dims 1 with rows ([6, 20, 1] into [6, 37, 5]); batch_dims 0 with [row, col] pairs.
  int64_t *ti = labels(6 * 20, 37, 74);
  rt::gather_nd(data, {6, 20, 1}, 1, ti, x, output("gather_nd", 6 * 20 * 5));
  rt::gather_nd_backward(data, {6, 20, 1}, 1, ti, input(6 * 20 * 5, 75), output("gather_nd_backward", nd));
  auto *pi = static_cast<int64_t *>(alloc_bytes(25 * 2 * 8));
  rt::map_index(50, [=] CLEAVE_HD(int64_t i) { pi[i] = i % 2 == 0 ? i * 5 % 6 - 6 * (i % 4 == 0) : i * 11 % 37; });
  rt::gather_nd(data, {25, 2}, 0, pi, x, output("gather_nd_pairs", 25 * 5));
  rt::gather_nd_backward(data, {25, 2}, 0, pi, input(25 * 5, 76), output("gather_nd_pairs_backward", nd));
}

void loss_cases() {
  for (int log = 0; log < 2; ++log) {
    std::string tag = log ? "logsoftmax" : "softmax";
    float *x = input(3 * 7 * 4, 41, -3, 3), *y = output(tag + "_y", 3 * 7 * 4);
    rt::softmax_forward(3, 7, 4, x, y, log);
    rt::softmax_backward(3, 7, 4, input(3 * 7 * 4, 42), y, output(tag + "_dx", 3 * 7 * 4), log);
    // Rows as long as a vocabulary (softmax_rows_kernel on the GPU).
    rt::softmax_forward(3, 5000, 1, input(3 * 5000, 52, -6, 6), output(tag + "_long_y", 3 * 5000), log);
  }
  rt::LossShape s{4, 6, 3, rt::Reduction::mean, true, -100, 0};
  float *scores = input(4 * 6 * 3, 43, -2, 2), *weights = input(6, 44, 0.5f, 2.0f);
  int64_t *lab = labels(4 * 3, 6, 45, 4, -100);
  float *logp = output("sce_log_prob", 4 * 6 * 3), *loss = output("sce_loss", 1), *dloss = input(1, 46);
  rt::softmax_cross_entropy_forward(s, scores, lab, weights, loss, logp);
  rt::softmax_cross_entropy_backward(s, dloss, logp, lab, weights, output("sce_dscores", 4 * 6 * 3));
  // Scores [n, c] (d = 1), as a classifier's or a language model's: the backward's row kernel, with a mean over
  // weighted and ignored positions and with no reduction.
  for (auto [tag, reduction] : {std::pair{std::string("mean"), rt::Reduction::mean},
                                std::pair{std::string("none"), rt::Reduction::none}}) {
    rt::LossShape rows{37, 1000, 1, reduction, true, -100, 0};
    float *rs = input(37 * 1000, 48, -4, 4), *rw = input(1000, 49, 0.5f, 2.0f);
    int64_t *rl = labels(37, 1000, 50, 5, -100);
    float *rlogp = output("sce_rows_log_prob_" + tag, 37 * 1000);
    float *rloss = output("sce_rows_loss_" + tag, reduction == rt::Reduction::none ? 37 : 1);
    rt::softmax_cross_entropy_forward(rows, rs, rl, rw, rloss, rlogp);
    rt::softmax_cross_entropy_backward(rows, input(reduction == rt::Reduction::none ? 37 : 1, 51), rlogp, rl, rw,
                                       output("sce_rows_dscores_" + tag, 37 * 1000));
  }
  rt::LossShape none = s;
  none.reduction = rt::Reduction::none;
  rt::nll_forward(none, logp, lab, nullptr, output("nll_none_loss", 4 * 3));
  rt::nll_backward(none, input(4 * 3, 47), lab, nullptr, output("nll_none_dinput", 4 * 6 * 3));
  float *total = output("loss_weight_total", 1);
  float host_total = static_cast<float>(rt::loss_weight_total(s, lab, weights));
  rt::map_index(1, [=] CLEAVE_HD(int64_t i) { total[i] = host_total; });
}

void layout_cases() {
  float *x = input(2 * 3 * 4 * 5, 51);
  rt::reduce({2, 3, 4, 5}, {1, 3}, x, output("reduce_mean_13", 2 * 4), true);
  rt::reduce_max({2, 3, 4, 5}, {0, 2}, x, output("reduce_max_02", 3 * 5), false);
  rt::reduce_max({2, 3, 4, 5}, {3}, x, output("reduce_min_3", 2 * 3 * 4), true);
  rt::reduce_to_shape({2, 3, 4, 5}, {3, 1, 5}, x, output("reduce_to_shape", 15));
  rt::broadcast({3, 1, 5}, {2, 3, 4, 5}, input(15, 52), output("broadcast", 120));
  rt::transpose({2, 3, 4, 5}, {2, 0, 3, 1}, x, output("transpose", 120));
  rt::slice({2, 3, 4, 5}, {1, 0, 3, 1}, {2, 3, -1, 5}, {1, 2, -2, 3}, x, output("slice", 1 * 2 * 2 * 2));
  rt::slice_backward({2, 3, 4, 5}, {1, 0, 3, 1}, {2, 3, -1, 5}, {1, 2, -2, 3}, input(8, 53), output("slice_dx", 120));
  rt::pad_constant({3, 4}, {1, -1, 2, 3}, 0.25f, input(12, 54), output("pad_constant", 6 * 6));
  float *p0 = input(2 * 2 * 5, 55), *p1 = input(2 * 3 * 5, 56);
  rt::concat({p0, p1}, {{2, 2, 5}, {2, 3, 5}}, 1, output("concat", 2 * 5 * 5));
  rt::split({2, 3, 4, 5}, 2, {1, 3}, x, {output("split_0", 30), output("split_1", 90)});
  auto *idx = static_cast<int64_t *>(alloc_bytes(7 * 8));
  rt::map_index(7, [=] CLEAVE_HD(int64_t i) { idx[i] = (i * 5) % 9 - 4; });  // negative indices wrap
  float *data = input(3 * 4 * 2, 57);  // rows [3, 7) of a global dim of 9 on axis 1
  rt::gather({3, 4, 2}, 1, idx, 7, data, output("gather_shard", 3 * 7 * 2), 9, 3);
  rt::gather_backward({3, 4, 2}, 1, idx, 7, input(3 * 7 * 2, 58), output("gather_backward_shard", 24), 9, 3);
  float *a = input(4 * 6, 59), *b = input(3 * 5, 60);
  float *dst = output("region_copy", 5 * 7);
  rt::fill_bytes(dst, 0, 5 * 7 * 4);
  rt::region_copy({{a, {4, 6}, {1, 2}, {3, 4}, {0, 0}}, {b, {3, 5}, {0, 1}, {2, 3}, {3, 4}}}, dst, {5, 7});
  auto *i64 = static_cast<int64_t *>(alloc_bytes(6 * 8));
  rt::map_index(6, [=] CLEAVE_HD(int64_t i) { i64[i] = (i + 1) * 1000000007ll; });
  auto *i64_dst = static_cast<int64_t *>(alloc_bytes(4 * 8));
  rt::region_copy({{i64, {2, 3}, {0, 1}, {2, 2}, {0, 0}}}, i64_dst, {2, 2}, 8);
  record("region_copy_i64", i64_dst, 4 * 8);
  auto *mask = static_cast<uint8_t *>(alloc_bytes(2 * 3 * 8));
  rt::broadcast_bytes({3, 1}, {2, 3, 8}, mask, static_cast<uint8_t *>(alloc_bytes(48)), 1);
  // The coalesced walks (common/strided_index.h): tiled 2-D and batched transposes with partial tiles, a bias
  // broadcast over rows, column sums in chunks, a contiguous slice (one copy).
  float *w = input(3 * 37 * 70, 67);
  rt::transpose({37, 70}, {1, 0}, w, output("transpose_2d_tiles", 37 * 70));
  rt::transpose({3, 37, 70}, {0, 2, 1}, w, output("transpose_batched_tiles", 3 * 37 * 70));
  rt::transpose({3, 37, 70}, {2, 1, 0}, w, output("transpose_reversed", 3 * 37 * 70));
  auto *w64 = static_cast<int64_t *>(alloc_bytes(37 * 70 * 8));
  rt::map_index(37 * 70, [=] CLEAVE_HD(int64_t i) { w64[i] = i * 1000000007ll; });
  auto *w64_t = static_cast<int64_t *>(alloc_bytes(37 * 70 * 8));
  rt::transpose({37, 70}, {1, 0}, reinterpret_cast<const float *>(w64), reinterpret_cast<float *>(w64_t), 8);
  record("transpose_i64_tiles", w64_t, 37 * 70 * 8);
  rt::broadcast({70}, {3, 37, 70}, input(70, 68), output("broadcast_rows", 3 * 37 * 70));
  rt::reduce_to_shape({3, 37, 70}, {70}, w, output("reduce_columns", 70));
  rt::reduce_to_shape({3, 37, 70}, {1, 1, 70}, w, output("reduce_columns_keepdims", 70));
  float *tall = input(3000 * 5, 69);
  rt::reduce_to_shape({3000, 5}, {5}, tall, output("reduce_columns_tall", 5));
  rt::reduce({3000, 5}, {0}, tall, output("reduce_mean_columns", 5), true);
  // A bias gradient's shape: [rows, B, C] over its first two dims, more columns than one tile.
  rt::reduce({40, 3, 1000}, {0, 1}, input(40 * 3 * 1000, 77), output("reduce_columns_wide", 1000), false);
  rt::slice({3, 37, 70}, {1, 0, 0}, {3, 37, 70}, {1, 1, 1}, w, output("slice_contiguous", 2 * 37 * 70));
  // A composed copy (codegen/compose_moves.h): k of attention cut from a [T=37, B=3, 3E=60] projection (E = 20,
  // H = 4 heads of d = 5) and moved to [B, H, d, T]; then a view whose innermost dim is not contiguous.
  float *qkv = input(37 * 3 * 60, 70);
  rt::view_copy(qkv, {3, 4, 5, 37}, {60, 5, 1, 180}, 20, output("view_copy_k", 3 * 4 * 5 * 37));
  rt::view_copy(qkv, {37, 3, 10}, {180, 60, 2}, 1, output("view_copy_odd", 37 * 3 * 10));
  // A transpose whose source-contiguous dim is the first of three: tiles with the middle dim as the batch.
  rt::view_copy(qkv, {40, 5, 33}, {1, 1330, 40}, 0, output("view_copy_far", 40 * 5 * 33));
  // Into places of a [T, B, 3E] gradient: a part moved back from [B, H, d, T], and a contiguous one beside it.
  float *into = output("view_copy_into", 37 * 3 * 60);
  rt::fill_bytes(into, 0, 37 * 3 * 60 * 4);
  rt::view_copy(qkv, {37, 3, 4, 5}, {1, 740, 185, 37}, 0, into, {180, 60, 5, 1}, 20);
  rt::view_copy(qkv, {37, 3, 20}, {60, 20, 1}, 7, into, {180, 60, 1}, 40);
}

/** rt::map and rt::map_block on both of the CUDA backend's loops: groups of four (a size that is a multiple of 4,
 *  aligned operands) and single elements (an odd size, an operand one float off its alignment, a mask operand that is
 *  not float, a block whose rows are not a multiple of 4 long). */
void map_cases() {
  const int64_t n = 4000;
  float *a = input(n + 1, 80), *b = input(n + 1, 81);
  auto mul_add = [] CLEAVE_HD(float x, float y) { return x * y + x; };
  rt::map(n, mul_add, output("map_vec4", n), a, b);
  rt::map(n + 1, mul_add, output("map_odd", n + 1), a, b);
  rt::map(n, mul_add, output("map_unaligned", n), a + 1, b);
  float *in_place = output("map_in_place", n);
  rt::copy(in_place, a, n * 4);
  rt::map(n, [] CLEAVE_HD(float x) { return x > 0.0f ? x : 0.0f; }, in_place, static_cast<const float *>(in_place));
  auto *mask = static_cast<uint8_t *>(alloc_bytes(n));
  rt::map_index(n, [=] CLEAVE_HD(int64_t i) { mask[i] = i % 3 == 0; });
  rt::map(n, [] CLEAVE_HD(float x, uint8_t m) { return m ? x : 0.0f; }, output("map_mask", n), a,
          static_cast<const uint8_t *>(mask));
  rt::map(n, [] CLEAVE_HD() { return 0.25f; }, output("map_fill", n));
  // map_block: a bias row (inner 1), a per-plane scale (inner 8), and shapes whose groups of four would straddle
  // two block values.
  float *row = input(12, 82);
  auto bias = [] CLEAVE_HD(float v, float x) { return x * 0.5f + v; };
  rt::map_block(48 * 12, 1, 12, bias, output("map_block_row", 48 * 12), row, a);
  rt::map_block(5 * 3 * 8, 8, 3, bias, output("map_block_plane", 5 * 3 * 8), row, a);
  rt::map_block(8 * 5 * 3, 3, 5, bias, output("map_block_inner3", 8 * 5 * 3), row, a);
  rt::map_block(40 * 6, 1, 6, bias, output("map_block_row6", 40 * 6), row, a);
  rt::map_block(48 * 12, 1, 12, bias, output("map_block_unaligned", 48 * 12), row, a + 1);
  float *block_in_place = output("map_block_in_place", 48 * 12);
  rt::copy(block_in_place, b, 48 * 12 * 4);
  rt::map_block(48 * 12, 4, 12, bias, block_in_place, row, static_cast<const float *>(block_in_place));
}

void optim_dropout_cases() {
  int64_t n = 1000;
  float *p = input(n, 61), *g = input(n, 62), *m = input(n, 63), *v = input(n, 64, 0, 1);
  rt::sgd_step(n, p, g, 0.1f, 0.01f, output("sgd_p", n));
  rt::momentum_step(n, p, g, m, 0.1f, 0.9f, 0.0f, true, output("momentum_p", n), output("momentum_b", n));
  rt::adam_step(n, p, g, m, v, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 3, output("adamw_p", n), output("adamw_m", n),
                output("adamw_v", n));
  rt::onnx_adagrad_step(n, p, g, v, 0.1f, 2, 0.1f, 1e-6f, 0.01f, output("onnx_adagrad_x", n), output("onnx_adagrad_h", n));
  auto *dmask = static_cast<uint8_t *>(alloc_bytes(4 * 50));
  rt::dropout_forward({4, 50}, {2, 10}, {100, 1}, 1234, 5, 0.3f, input(200, 65), output("dropout_y", 200), dmask);
  record("dropout_mask", dmask, 200);
  rt::dropout_backward(200, 0.3f, input(200, 66), dmask, output("dropout_dx", 200));
  auto *keep_all = static_cast<uint8_t *>(alloc_bytes(4 * 50));
  rt::dropout_forward({4, 50}, {2, 10}, {100, 1}, 1234, 5, 0.0f, input(200, 70), output("dropout_ratio0_y", 200),
                      keep_all);
  record("dropout_ratio0_mask", keep_all, 200);
  // RandomLike of a shard at global offset (2, 10) of a [6, 60] tensor: uniform, and normal (Box-Muller in float:
  // logf/cosf may differ in the last bits between the backends).
  rt::random_like({4, 50}, {2, 10}, {60, 1}, 99, 3, false, -1.0f, 2.0f, output("random_uniform", 200));
  rt::random_like({4, 50}, {2, 10}, {60, 1}, 99, 3, true, 0.5f, 2.0f, output("random_normal", 200));
}

}  // namespace

int main(int argc, char **argv) {
  bool mixed = argc == 3 && std::string(argv[2]) == "--mixed";
  if (mixed) rt::set_math(rt::Math::mixed);
  rt::init(&argc, &argv);
  if (argc != 2 && !mixed) rt::fail("usage: kernel_cases OUTPUT_CHECKPOINT [--mixed]");
  if (mixed) {
    rt::Arena arena(64 << 20);
    g_arena = &arena;
    mixed_cases();
    rt::checkpoint_save(argv[1], g_outputs);
  } else {
    rt::Arena arena(64 << 20);
    g_arena = &arena;
    gemm_cases();
    conv_cases();
    pool_cases();
    norm_cases();
    image_cases();
    index_cases();
    gather_scatter_cases();
    loss_cases();
    layout_cases();
    map_cases();
    optim_dropout_cases();
    rt::checkpoint_save(argv[1], g_outputs);
  }
  rt::finalize();
  return 0;
}
