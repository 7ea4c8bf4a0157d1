#pragma once
// The pooling and batch-norm cases of kernel_cases.cpp, with the path the CUDA backend must take for each one
// (cuDNN or its kernels): kernel_cases runs them on both backends, cudnn_paths checks the choice without a GPU.
// Geometry notes: "floor" cases have the output extent (x + 2 pad - kernel) / stride + 1 with symmetric pads below
// the kernel, so every window lies inside the padded input (cuDNN's case); "ceil" cases have one more output whose
// window runs past it (the kernels' case).
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt::cases {

enum class Pool { max, avg };

struct PoolCase {
  std::string name;
  Pool kind;
  PoolShape shape;
  bool ties;         // input drawn as max(0, multiple of 1/4): many equal maxima, most of them ReLU zeros
  bool indices;      // max_pool_forward also returns indices (cuDNN has none)
  bool cudnn_fwd;    // the forward must run on cuDNN
  bool cudnn_bwd;    // the backward must run on cuDNN (never for max pooling: cuDNN documents no tie rule)
};

inline PoolShape pool_shape(int64_t nc, Dims x, Dims y, Dims kernel, Dims strides, Dims pads, Dims dil,
                            bool include_pad = false) {
  PoolShape s;
  s.nc = nc;
  s.x = x;
  s.y = y;
  s.kernel = kernel;
  s.strides = strides;
  s.pads = pads;
  s.dilations = dil;
  s.count_include_pad = include_pad;
  return s;
}

/** Whole-op pooling cases (the spatial-block cases stay in kernel_cases.cpp: they always run kernels). */
inline std::vector<PoolCase> pool_cases() {
  // 8x8, kernel 3, stride 2, pads 1: ceil-mode output 5x5 (floor: 4x4); the last windows start at 7 and reach 9, past
  // the padded input [-1, 8]. (7x7 would not do: its floor and ceil outputs are both 4x4.)
  PoolShape ceil = pool_shape(6, {8, 8}, {5, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1});
  PoolShape ceil_incl = ceil;
  ceil_incl.count_include_pad = true;
  // 8x9, kernel 3x2, stride 2x1, pads (1, 0) on both sides: floor output 4x8.
  PoolShape max2d = pool_shape(6, {8, 9}, {4, 8}, {3, 2}, {2, 1}, {1, 0, 1, 0}, {1, 1});
  PoolShape max1d = pool_shape(4, {11}, {6}, {3}, {2}, {1, 1}, {1});
  PoolShape max3d = pool_shape(2, {4, 5, 6}, {2, 6, 3}, {2, 2, 3}, {2, 1, 2}, {0, 1, 1, 0, 1, 1}, {1, 1, 1});
  // 8x9, kernel 3, stride 2, pads 1: floor output 4x5, border windows partly in the padding.
  PoolShape avg2d = pool_shape(6, {8, 9}, {4, 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1});
  PoolShape avg2d_incl = avg2d;
  avg2d_incl.count_include_pad = true;
  PoolShape avg1d_incl = pool_shape(3, {10}, {5}, {4}, {2}, {1, 1}, {1}, true);
  PoolShape avg3d = pool_shape(2, {5, 4, 6}, {3, 2, 3}, {3, 2, 2}, {2, 2, 2}, {1, 0, 0, 1, 0, 0}, {1, 1, 1});
  // Kernel cases that look like cuDNN's: asymmetric pads, dilation, 4 spatial dims.
  PoolShape asym = pool_shape(3, {8, 9}, {4, 4}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {1, 1});
  PoolShape dilated = pool_shape(3, {9, 8}, {5, 8}, {2, 3}, {2, 1}, {1, 1, 1, 1}, {2, 1});
  PoolShape pool4d = pool_shape(2, {3, 4, 3, 5}, {2, 3, 2, 4}, {2, 2, 2, 2}, {1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0},
                                {1, 1, 1, 1});
  return {
      {"maxpool_ceil", Pool::max, ceil, false, false, false, false},
      {"maxpool_ceil_ties", Pool::max, ceil, true, false, false, false},
      {"avgpool_exclude_pad", Pool::avg, ceil, false, false, false, false},
      {"avgpool_include_pad", Pool::avg, ceil_incl, false, false, false, false},
      {"maxpool2d_floor", Pool::max, max2d, false, false, false, false},
      {"maxpool2d_floor_ties", Pool::max, max2d, true, false, false, false},
      {"maxpool2d_floor_indices", Pool::max, max2d, true, true, false, false},
      {"maxpool1d_floor_ties", Pool::max, max1d, true, false, true, false},
      {"maxpool3d_floor_ties", Pool::max, max3d, true, false, true, false},
      {"avgpool2d_floor_exclude_pad", Pool::avg, avg2d, false, false, true, true},
      {"avgpool2d_floor_include_pad", Pool::avg, avg2d_incl, false, false, true, true},
      {"avgpool1d_floor_include_pad", Pool::avg, avg1d_incl, false, false, true, true},
      {"avgpool3d_floor_exclude_pad", Pool::avg, avg3d, false, false, true, true},
      {"avgpool2d_asym_pad", Pool::avg, asym, false, false, false, false},
      {"maxpool2d_asym_pad_ties", Pool::max, asym, true, false, false, false},
      {"avgpool2d_dilated", Pool::avg, dilated, false, false, false, false},
      {"maxpool4d_ties", Pool::max, pool4d, true, false, false, false},
  };
}

/** Global average pooling: [nc, spatial], divisor (0: spatial). */
struct GlobalCase {
  std::string name;
  int64_t nc, spatial, divisor;
  bool cudnn;  // forward and backward must run on cuDNN
};

inline std::vector<GlobalCase> global_cases() {
  return {
      {"global_avg", 6, 20, 0, true},
      {"global_avg_56x56", 8, 56 * 56, 0, true},
      {"global_avg_block", 6, 20, 40, false},  // a spatial block's partial means: the whole op's divisor
      // ResNet-50 at batch 64: cuDNN 9 takes the forward but refuses the backward (NOT_SUPPORTED), which then runs
      // the kernels (the predicate still says cuDNN: the refusal is only known by asking).
      {"global_avg_resnet50", 64 * 2048, 49, 0, true},
  };
}

/** Batch norm training forward + backward over X [n, c, d]. */
struct NormCase {
  std::string name;
  int64_t n, c, d;
  float eps, momentum;
  bool saved;      // the forward returns saved mean / inverse std; else only running statistics and no backward runs
  bool want_dx;    // the backward computes dX (else only dscale and dbias)
  bool cudnn_fwd, cudnn_bwd;
};

inline std::vector<NormCase> norm_cases() {
  return {
      {"bn", 4, 5, 9, 1e-5f, 0.9f, true, true, true, true},
      // epsilon large against the variance: a path that loses or double-counts it shows in every output
      {"bn_eps_large", 3, 4, 7, 0.5f, 0.8f, true, true, true, true},
      {"bn_2d_input", 16, 7, 1, 1e-5f, 0.9f, true, true, true, true},
      {"bn_running_only", 2, 3, 11, 1e-3f, 0.7f, false, true, true, false},
      {"bn_params_only", 4, 5, 9, 1e-5f, 0.9f, true, false, true, false},
  };
}

}  // namespace cleave::rt::cases
