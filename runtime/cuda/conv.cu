// N-d convolution and its gradients on cuDNN 9's legacy API: _v7 heuristics choosing among the algorithms whose math
// the call allows (math_allowed: fp32 exactly, or tensor cores under --precision tf32 and on bf16/fp16 operands)
// and whose workspace fits the cap (CLEAVE_CUDNN_WORKSPACE_MB, default 256), deterministic ones first, once
// per direction and shape (planned()); the direct kernels below when the heuristics offer none.
// cuDNN's padding is symmetric and non-negative; other pads (asymmetric ONNX pads, the negative pads of codegen's
// spatial blocks) are applied explicitly: X is padded/cropped into scratch (pad_constant) and convolved unpadded,
// and dX is cropped/zero-extended back. Shapes cuDNN cannot take (more than 3 spatial dims, sizes beyond int) run
// direct kernels with cpu/conv.cpp's index arithmetic.
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "common/shapes.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

using detail::Small;

// ---------------------------------------------------------------- direct kernels (the fallback)

struct ConvGeom {
  int sp = 0;
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0, nx = 1, ny = 1, nk = 1;
  Small x, w, y, strides, pb, dil;
};

ConvGeom make_geom(const ConvShape &s) {
  size_t sp = s.x.size();
  ConvGeom g;
  g.sp = static_cast<int>(sp);
  g.n = s.n;
  g.c = s.c;
  g.m = s.m;
  g.group = s.group;
  g.cg = s.c / s.group;
  g.mg = s.m / s.group;
  g.x = detail::small(s.x, "conv");
  g.w = detail::small(s.w, "conv");
  g.y = detail::small(s.y, "conv");
  g.strides = detail::small(s.strides, "conv");
  g.dil = detail::small(s.dilations, "conv");
  g.pb = detail::small(Dims(s.pads.begin(), s.pads.begin() + static_cast<int64_t>(sp)), "conv");
  g.nx = detail::product(s.x);
  g.ny = detail::product(s.y);
  g.nk = detail::product(s.w);
  return g;
}

/** The X offset read by kernel tap kf at output yf, or -1 in the padding. */
__device__ int64_t conv_tap(const ConvGeom &g, int64_t yf, int64_t kf) {
  int64_t off = 0, mult = 1;
  bool inside = true;
  for (int d = g.sp - 1; d >= 0; --d) {
    int64_t yi = yf % g.y[d], ki = kf % g.w[d];
    yf /= g.y[d];
    kf /= g.w[d];
    int64_t xd = yi * g.strides[d] + ki * g.dil[d] - g.pb[d];
    inside = inside && xd >= 0 && xd < g.x[d];
    off += xd * mult;
    mult *= g.x[d];
  }
  return inside ? off : -1;
}

#define CLEAVE_FOR_EACH(i, n)                                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void direct_forward(ConvGeom g, const float *x, const float *w, const float *b, float *y) {
  CLEAVE_FOR_EACH(e, g.n * g.m * g.ny) {
    int64_t yf = e % g.ny, mo = e / g.ny % g.m, n = e / g.ny / g.m, grp = mo / g.mg;
    double acc = b ? b[mo] : 0.0;
    for (int64_t ci = 0; ci < g.cg; ++ci)
      for (int64_t kf = 0; kf < g.nk; ++kf) {
        int64_t t = conv_tap(g, yf, kf);
        if (t >= 0) acc += static_cast<double>(x[(n * g.c + grp * g.cg + ci) * g.nx + t]) * w[(mo * g.cg + ci) * g.nk + kf];
      }
    y[e] = static_cast<float>(acc);
  }
}

/** dX (zeroed first) += W^T dY, scattered per (n, m, y) with atomics. */
__global__ void direct_backward_data(ConvGeom g, const float *dy, const float *w, float *dx) {
  CLEAVE_FOR_EACH(e, g.n * g.m * g.ny) {
    int64_t yf = e % g.ny, mo = e / g.ny % g.m, n = e / g.ny / g.m, grp = mo / g.mg;
    float v = dy[e];
    for (int64_t ci = 0; ci < g.cg; ++ci)
      for (int64_t kf = 0; kf < g.nk; ++kf) {
        int64_t t = conv_tap(g, yf, kf);
        if (t >= 0) atomicAdd(&dx[(n * g.c + grp * g.cg + ci) * g.nx + t], v * w[(mo * g.cg + ci) * g.nk + kf]);
      }
  }
}

__global__ void direct_backward_filter(ConvGeom g, const float *dy, const float *x, float *dw) {
  CLEAVE_FOR_EACH(e, g.m * g.cg * g.nk) {
    int64_t kf = e % g.nk, ci = e / g.nk % g.cg, mo = e / g.nk / g.cg, grp = mo / g.mg;
    double acc = 0;
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t yf = 0; yf < g.ny; ++yf) {
        int64_t t = conv_tap(g, yf, kf);
        if (t >= 0) acc += static_cast<double>(dy[(n * g.m + mo) * g.ny + yf]) * x[(n * g.c + grp * g.cg + ci) * g.nx + t];
      }
    dw[e] = static_cast<float>(acc);
  }
}

// ---------------------------------------------------------------- cuDNN

size_t workspace_cap() {
  const char *env = std::getenv("CLEAVE_CUDNN_WORKSPACE_MB");
  long long mb = env && *env ? std::atoll(env) : 256;
  return static_cast<size_t>(mb < 0 ? 0 : mb) << 20;
}

/** Descriptors for one convolution, over the (possibly explicitly padded) X extent. 1-d convolutions are 2-d with
 *  a leading spatial dim of 1. */
struct CudnnConv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  CudnnConv(const ConvShape &s, const Dims &x_extent, const Dims &pads) {
    size_t sp = s.x.size();
    std::vector<int> xd{static_cast<int>(s.n), static_cast<int>(s.c)}, yd{static_cast<int>(s.n), static_cast<int>(s.m)},
        wd{static_cast<int>(s.m), static_cast<int>(s.c / s.group)}, pad, stride, dil;
    if (sp == 1) {
      xd.push_back(1);
      yd.push_back(1);
      wd.push_back(1);
      pad.push_back(0);
      stride.push_back(1);
      dil.push_back(1);
    }
    for (size_t d = 0; d < sp; ++d) {
      xd.push_back(static_cast<int>(x_extent[d]));
      yd.push_back(static_cast<int>(s.y[d]));
      wd.push_back(static_cast<int>(s.w[d]));
      pad.push_back(static_cast<int>(pads[d]));
      stride.push_back(static_cast<int>(s.strides[d]));
      dil.push_back(static_cast<int>(s.dilations[d]));
    }
    auto strides_of = [](const std::vector<int> &dims) {
      std::vector<int> st(dims.size(), 1);
      for (size_t i = dims.size() - 1; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
      return st;
    };
    int nd = static_cast<int>(xd.size());
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &x);
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &y);
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &bias);
    CLEAVE_CUDNN(cudnnCreateFilterDescriptor, &w);
    CLEAVE_CUDNN(cudnnCreateConvolutionDescriptor, &conv);
    std::vector<int> xs = strides_of(xd), ys = strides_of(yd);
    CLEAVE_CUDNN(cudnnSetTensorNdDescriptor, x, CUDNN_DATA_FLOAT, nd, xd.data(), xs.data());
    CLEAVE_CUDNN(cudnnSetTensorNdDescriptor, y, CUDNN_DATA_FLOAT, nd, yd.data(), ys.data());
    std::vector<int> bd(static_cast<size_t>(nd), 1);
    bd[1] = static_cast<int>(s.m);
    std::vector<int> bs = strides_of(bd);
    CLEAVE_CUDNN(cudnnSetTensorNdDescriptor, bias, CUDNN_DATA_FLOAT, nd, bd.data(), bs.data());
    CLEAVE_CUDNN(cudnnSetFilterNdDescriptor, w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd, wd.data());
    CLEAVE_CUDNN(cudnnSetConvolutionNdDescriptor, conv, nd - 2, pad.data(), stride.data(), dil.data(),
                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    CLEAVE_CUDNN(cudnnSetConvolutionGroupCount, conv, static_cast<int>(s.group));
    // Plain fp32 arithmetic (no TF32 tensor cores), so GPU runs match CPU runs within fp32 tolerance; under
    // --precision tf32, or on a mixed-precision program's bf16/fp16 operands, cuDNN's default math, which uses
    // tensor cores on Ampere and later.
    CLEAVE_CUDNN(cudnnSetConvolutionMathType, conv,
                 detail::tensor_math(s.operands) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    std::vector<int> out(static_cast<size_t>(nd));
    CLEAVE_CUDNN(cudnnGetConvolutionNdForwardOutputDim, conv, x, w, nd, out.data());
    if (out != yd) fail("conv: cuDNN's output shape differs from the caller's (internal error)");
  }
  ~CudnnConv() {
    CLEAVE_CUDNN(cudnnDestroyConvolutionDescriptor, conv);
    CLEAVE_CUDNN(cudnnDestroyFilterDescriptor, w);
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, bias);
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, y);
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, x);
  }
  CudnnConv(const CudnnConv &) = delete;
  CudnnConv &operator=(const CudnnConv &) = delete;
};

/** Whether an algorithm of math type `t` computes a convolution on `operands` as the program's precision allows:
 *  - tensor cores (tensor_math): TF32 for float32 data, exact on bf16 and fp16 operands; and for fp16 operands the
 *    conversion of float32 data to fp16, exact on them (never for others: fp16's range is narrower than TF32's);
 *  - otherwise fp32 exactly: FMA math, or default math where NVIDIA_TF32_OVERRIDE=0 keeps it from using TF32 (set by
 *    init() under --precision fp32; a mixed-precision program leaves TF32 allowed for its bf16/fp16 operands, so
 *    its other convolutions take FMA algorithms only). */
bool math_allowed(cudnnMathType_t t, Operands operands) {
  if (t == CUDNN_FMA_MATH) return true;
  if (detail::tensor_math(operands))
    return t == CUDNN_DEFAULT_MATH || t == CUDNN_TENSOR_OP_MATH ||
           (t == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && operands == Operands::fp16 &&
            detail::low_math() == detail::LowMath::native);
  return t == CUDNN_DEFAULT_MATH && math() == Math::fp32;
}

/** The first usable heuristic result: math allowed (math_allowed), workspace within the cap, deterministic if any
 *  is; null if none (the caller then runs the direct kernels). */
template <typename Perf>
const Perf *pick(const Perf *perf, int count, Operands operands) {
  size_t cap = workspace_cap();
  const Perf *any = nullptr;
  for (int i = 0; i < count; ++i) {
    const Perf &p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || !math_allowed(p.mathType, operands) || p.memory > cap) continue;
    if (p.determinism == CUDNN_DETERMINISTIC) return &p;
    if (!any) any = &p;
  }
  return any;
}

/** Whether cuDNN takes this shape (else the direct kernels run). */
bool cudnn_can(const ConvShape &s, const Dims &x_extent) {
  if (s.x.size() > 3) return false;
  for (int64_t v : {s.n, s.c, s.m}) if (v > INT_MAX) return false;
  for (int64_t v : x_extent) if (v < 1 || v > INT_MAX) return false;
  int64_t big = std::max({s.n * s.c * detail::product(x_extent), s.n * s.m * detail::product(s.y),
                          s.m * (s.c / s.group) * detail::product(s.w)});
  return big <= INT_MAX;
}

/** How the convolution meets cuDNN: symmetric non-negative pads go to cuDNN; any other pads are applied to X. */
struct Padding {
  bool explicit_pad = false;
  Dims cudnn_pads;  // per spatial dim
  Dims x_extent;    // X's spatial extent as cuDNN sees it
};

Padding padding_for(const ConvShape &s) {
  size_t sp = s.x.size();
  Padding p;
  for (size_t d = 0; d < sp; ++d)
    if (s.pads[d] != s.pads[d + sp] || s.pads[d] < 0) p.explicit_pad = true;
  for (size_t d = 0; d < sp; ++d) {
    p.cudnn_pads.push_back(p.explicit_pad ? 0 : s.pads[d]);
    p.x_extent.push_back(p.explicit_pad ? s.x[d] + s.pads[d] + s.pads[d + sp] : s.x[d]);
  }
  return p;
}

enum class Direction { forward, backward_data, backward_filter };

/** A convolution as cuDNN runs it in one direction: its descriptors and the algorithm picked for them (`algo` < 0:
 *  none usable, the direct kernels run). The _v7 heuristics cost more than a small convolution (about 100-250 us per
 *  call with cuDNN 9 on an H200, where the CNN's convolutions take a few us), and a rank program calls the same
 *  shapes every step, so each (direction, shape) is planned once per process and kept until it ends. */
struct Planned {
  CudnnConv d;
  int algo = -1;
  size_t memory = 0;
  Planned(const ConvShape &s, const Padding &p) : d(s, p.x_extent, p.cudnn_pads) {}
};

template <typename Perf>
void choose(Planned &pl, const Perf *perf, int count, Operands operands) {
  if (const Perf *a = pick(perf, count, operands)) {
    pl.algo = static_cast<int>(a->algo);
    pl.memory = a->memory;
    CLEAVE_CUDNN(cudnnSetConvolutionMathType, pl.d.conv, a->mathType);
  }
}

const Planned &planned(Direction dir, const ConvShape &s, const Padding &p) {
  std::vector<int64_t> key{static_cast<int64_t>(dir), static_cast<int64_t>(s.operands), s.n, s.c, s.m, s.group};
  for (const Dims *v : {&s.x, &s.w, &s.y, &s.strides, &s.pads, &s.dilations}) {
    key.push_back(static_cast<int64_t>(v->size()));
    key.insert(key.end(), v->begin(), v->end());
  }
  // Never destroyed: descriptors are host objects, and the process's end frees them after cuDNN's handle is gone.
  static auto *cache = new std::map<std::vector<int64_t>, std::unique_ptr<Planned>>;
  std::unique_ptr<Planned> &slot = (*cache)[key];
  if (slot) return *slot;
  slot = std::make_unique<Planned>(s, p);
  Planned &pl = *slot;
  int count = 0;
  switch (dir) {
    case Direction::forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      CLEAVE_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, detail::cudnn(), pl.d.x, pl.d.w, pl.d.conv, pl.d.y,
                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf);
      choose(pl, perf, count, s.operands);
      break;
    }
    case Direction::backward_data: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      CLEAVE_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7, detail::cudnn(), pl.d.w, pl.d.y, pl.d.conv, pl.d.x,
                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf);
      choose(pl, perf, count, s.operands);
      break;
    }
    case Direction::backward_filter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      CLEAVE_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7, detail::cudnn(), pl.d.x, pl.d.y, pl.d.conv, pl.d.w,
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf);
      choose(pl, perf, count, s.operands);
      break;
    }
  }
  return pl;
}

/** X padded (zeros) or cropped by the ONNX pads into scratch, as [n, c, x_extent]. */
const float *explicit_x(const ConvShape &s, const float *x, const Padding &p) {
  auto *xp = static_cast<float *>(detail::scratch(static_cast<size_t>(s.n * s.c * detail::product(p.x_extent)) * 4));
  Dims shape{s.n, s.c}, pads{0, 0};
  shape.insert(shape.end(), s.x.begin(), s.x.end());
  size_t sp = s.x.size();
  pads.insert(pads.end(), s.pads.begin(), s.pads.begin() + static_cast<int64_t>(sp));
  pads.push_back(0);
  pads.push_back(0);
  pads.insert(pads.end(), s.pads.begin() + static_cast<int64_t>(sp), s.pads.end());
  pad_constant(shape, pads, 0.0f, x, xp);
  return xp;
}

}  // namespace

void conv_forward(const ConvShape &s, const float *x, const float *w, const float *b, float *y) {
  host::check_conv_shape(s);
  if (s.n * s.m * detail::product(s.y) == 0) return;
  Padding p = padding_for(s);
  if (!cudnn_can(s, p.x_extent)) {
    ConvGeom g = make_geom(s);
    CLEAVE_LAUNCH(direct_forward, detail::grid_for(g.n * g.m * g.ny), detail::kThreads, g, x, w, b, y);
    return;
  }
  const Planned &pl = planned(Direction::forward, s, p);
  if (pl.algo < 0) {
    ConvGeom g = make_geom(s);
    CLEAVE_LAUNCH(direct_forward, detail::grid_for(g.n * g.m * g.ny), detail::kThreads, g, x, w, b, y);
    return;
  }
  const CudnnConv &d = pl.d;
  const float *xin = p.explicit_pad ? explicit_x(s, x, p) : x;
  void *ws = pl.memory ? detail::scratch2(pl.memory) : nullptr;
  float one = 1.0f, zero = 0.0f;
  CLEAVE_CUDNN(cudnnConvolutionForward, detail::cudnn(), &one, d.x, xin, d.w, w, d.conv,
               static_cast<cudnnConvolutionFwdAlgo_t>(pl.algo), ws, pl.memory, &zero, d.y, y);
  if (b) CLEAVE_CUDNN(cudnnAddTensor, detail::cudnn(), &one, d.bias, b, &one, d.y, y);
}

void conv_backward_data(const ConvShape &s, const float *dy, const float *w, float *dx) {
  host::check_conv_shape(s);
  int64_t nxe = s.n * s.c * detail::product(s.x);
  Padding p = padding_for(s);
  auto direct = [&] {
    fill_bytes(dx, 0, nxe * 4);
    if (s.n * s.m * detail::product(s.y) == 0) return;
    ConvGeom g = make_geom(s);
    CLEAVE_LAUNCH(direct_backward_data, detail::grid_for(g.n * g.m * g.ny), detail::kThreads, g, dy, w, dx);
  };
  if (s.n * s.m * detail::product(s.y) == 0 || !cudnn_can(s, p.x_extent)) return direct();
  const Planned &pl = planned(Direction::backward_data, s, p);
  if (pl.algo < 0) return direct();
  const CudnnConv &d = pl.d;
  void *ws = pl.memory ? detail::scratch2(pl.memory) : nullptr;
  float one = 1.0f, zero = 0.0f;
  float *dxp = p.explicit_pad
                   ? static_cast<float *>(detail::scratch(static_cast<size_t>(s.n * s.c * detail::product(p.x_extent)) * 4))
                   : dx;
  CLEAVE_CUDNN(cudnnConvolutionBackwardData, detail::cudnn(), &one, d.w, w, d.y, dy, d.conv,
               static_cast<cudnnConvolutionBwdDataAlgo_t>(pl.algo), ws, pl.memory, &zero, d.x, dxp);
  if (!p.explicit_pad) return;
  // dX = the padded gradient with the added pads cropped off and zeros where X was cropped (it was never read).
  size_t sp = s.x.size();
  Dims shape{s.n, s.c}, pads{0, 0};
  shape.insert(shape.end(), p.x_extent.begin(), p.x_extent.end());
  for (size_t d2 = 0; d2 < sp; ++d2) pads.push_back(-s.pads[d2]);
  pads.push_back(0);
  pads.push_back(0);
  for (size_t d2 = 0; d2 < sp; ++d2) pads.push_back(-s.pads[d2 + sp]);
  pad_constant(shape, pads, 0.0f, dxp, dx);
}

void conv_backward_filter(const ConvShape &s, const float *dy, const float *x, float *dw) {
  host::check_conv_shape(s);
  int64_t nw = s.m * (s.c / s.group) * detail::product(s.w);
  Padding p = padding_for(s);
  if (s.n * s.m * detail::product(s.y) == 0) {
    fill_bytes(dw, 0, nw * 4);
    return;
  }
  auto direct = [&] {
    ConvGeom g = make_geom(s);
    CLEAVE_LAUNCH(direct_backward_filter, detail::grid_for(nw), detail::kThreads, g, dy, x, dw);
  };
  if (!cudnn_can(s, p.x_extent)) return direct();
  const Planned &pl = planned(Direction::backward_filter, s, p);
  if (pl.algo < 0) return direct();
  const CudnnConv &d = pl.d;
  const float *xin = p.explicit_pad ? explicit_x(s, x, p) : x;
  void *ws = pl.memory ? detail::scratch2(pl.memory) : nullptr;
  float one = 1.0f, zero = 0.0f;
  CLEAVE_CUDNN(cudnnConvolutionBackwardFilter, detail::cudnn(), &one, d.x, xin, d.y, dy, d.conv,
               static_cast<cudnnConvolutionBwdFilterAlgo_t>(pl.algo), ws, pl.memory, &zero, d.w, dw);
}

void conv_backward_bias(const ConvShape &s, const float *dy, float *db) {
  reduce({s.n, s.m, detail::product(s.y)}, {0, 2}, dy, db, false);
}

}  // namespace cleave::rt
