// InstanceNormalization over the planes of X [n, c, s] and its gradient with cpu/instance_norm.cpp's semantics: one
// block per plane (statistics in double), one block per channel for dscale/dbias.
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

__global__ void in_forward_kernel(int64_t planes, int64_t c, int64_t s, const float *x, const float *scale,
                                  const float *bias, double eps, float *y, float *mean, float *invstd) {
  __shared__ double shared[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float *row = x + p * s;
    int64_t ch = p % c;
    double sum = 0, sq = 0;
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) sum += row[i];
    double m = detail::block_sum(sum, shared) / static_cast<double>(s);
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) sq += (row[i] - m) * (row[i] - m);
    double is = 1.0 / sqrt(detail::block_sum(sq, shared) / static_cast<double>(s) + eps);
    float mf = static_cast<float>(m), isf = static_cast<float>(is);
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) y[p * s + i] = (row[i] - mf) * isf * scale[ch] + bias[ch];
    if (threadIdx.x == 0) {
      if (mean) mean[p] = mf;
      if (invstd) invstd[p] = isf;
    }
  }
}

__global__ void in_backward_dx_kernel(int64_t planes, int64_t c, int64_t s, const float *dy, const float *x,
                                      const float *scale, const float *mean, const float *invstd, float *dx) {
  __shared__ double shared[32];
  const double count = static_cast<double>(s);
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float *xr = x + p * s, *dyr = dy + p * s;
    double m = mean[p], is = invstd[p], g = scale[p % c];
    double sdy = 0, sdyx = 0;
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) {
      sdy += dyr[i];
      sdyx += dyr[i] * ((static_cast<double>(xr[i]) - m) * is);
    }
    sdy = detail::block_sum(sdy, shared);
    sdyx = detail::block_sum(sdyx, shared);
    for (int64_t i = threadIdx.x; i < s; i += blockDim.x) {
      double xhat = (static_cast<double>(xr[i]) - m) * is;
      dx[p * s + i] = static_cast<float>(is * g * (dyr[i] - sdy / count - xhat * sdyx / count));
    }
  }
}

/** One block per channel: dscale[ch] = sum over n and s of dY * xhat, dbias[ch] = sum of dY. */
__global__ void in_backward_params_kernel(int64_t n, int64_t c, int64_t s, const float *dy, const float *x,
                                          const float *mean, const float *invstd, float *dscale, float *dbias) {
  __shared__ double shared[32];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double ds = 0, db = 0;
    for (int64_t j = threadIdx.x; j < n * s; j += blockDim.x) {
      int64_t p = (j / s) * c + ch, e = p * s + j % s;
      ds += dy[e] * ((static_cast<double>(x[e]) - mean[p]) * invstd[p]);
      db += dy[e];
    }
    ds = detail::block_sum(ds, shared);
    db = detail::block_sum(db, shared);
    if (threadIdx.x == 0) {
      if (dscale) dscale[ch] = static_cast<float>(ds);
      if (dbias) dbias[ch] = static_cast<float>(db);
    }
  }
}

}  // namespace

void instance_norm_forward(int64_t n, int64_t c, int64_t s, const float *x, const float *scale, const float *bias,
                           float eps, float *y, float *mean, float *invstd) {
  if (s <= 0) fail("instance_norm_forward: empty spatial dims");
  if (n * c == 0) return;
  CLEAVE_LAUNCH(in_forward_kernel, detail::rows_grid(n * c), detail::kThreads, n * c, c, s, x, scale, bias,
                static_cast<double>(eps), y, mean, invstd);
}

void instance_norm_backward(int64_t n, int64_t c, int64_t s, const float *dy, const float *x, const float *scale,
                            const float *mean, const float *invstd, float *dx, float *dscale, float *dbias) {
  if (dx && n * c > 0)
    CLEAVE_LAUNCH(in_backward_dx_kernel, detail::rows_grid(n * c), detail::kThreads, n * c, c, s, dy, x, scale, mean,
                  invstd, dx);
  if ((dscale || dbias) && c > 0)
    CLEAVE_LAUNCH(in_backward_params_kernel, detail::rows_grid(c), detail::kThreads, n, c, s, dy, x, mean, invstd,
                  dscale, dbias);
}

}  // namespace cleave::rt
