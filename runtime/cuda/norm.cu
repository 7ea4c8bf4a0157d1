// BatchNormalization (training, inference, batch-split partial sums and the synced forms) and LayerNormalization with
// cpu/norm.cpp's and cpu/layer_norm.cpp's semantics: cuDNN's legacy batch norm where it computes exactly that,
// kernels (one block per channel or row, sums in double) for everything else.
// cuDNN (cudnn_takes_batch_norm_forward/backward; CUDNN_BATCHNORM_SPATIAL over X [n, c, d] as NCHW [n, c, d, 1];
// descriptors created and destroyed per call):
//  - batch_norm_train_forward of an unsplit batch with epsilon >= CUDNN_BN_MIN_EPSILON and sizes within int. cuDNN
//    gets NULL running statistics: it would update the running variance with the unbiased batch variance, ONNX (and
//    the CPU backend) with the biased one. bn_running_stats_kernel updates them instead from cuDNN's saved mean and
//    inverse std 1 / sqrt(var + eps), with var = 1 / invstd^2 - eps in double (error ~1e-7 of var + eps).
//  - batch_norm_backward with dX wanted and the saved mean and inverse std given, passed as cuDNN's optional cache
//    of the forward's results. The API has no epsilon here (it is inside invstd already): cuDNN is passed
//    CUDNN_BN_MIN_EPSILON, which must not enter; tests/gpu's bn_eps_large case (epsilon 0.5) would show if it did.
// Kernels: batch norm with the batch split over ranks (partial stats, from-stats forward, partial sums, the synced
// forms: their all-reduce sits between two passes), inference mode, backward without dX, epsilon below cuDNN's
// minimum, sizes beyond int, and every call when CLEAVE_CUDNN_POOL_NORM=0; LayerNormalization always.
#include <algorithm>
#include <climits>
#include <cmath>

#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

/** Element k in [0, n*d) of channel ch of X [n, c, d]. */
__device__ inline int64_t at(int64_t k, int64_t c, int64_t d, int64_t ch) { return (k / d * c + ch) * d + k % d; }

__global__ void bn_train_kernel(int64_t n, int64_t c, int64_t d, const float *x, const float *scale,
                                const float *bias, double eps, double mom, double var_scale, float *y,
                                float *running_mean, float *running_var, float *saved_mean, float *saved_invstd) {
  __shared__ double shared[32];
  double count = static_cast<double>(n * d);
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum = 0;
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) sum += x[at(k, c, d, ch)];
    double mean = detail::block_sum(sum, shared) / count, sq = 0;
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
      double e = x[at(k, c, d, ch)] - mean;
      sq += e * e;
    }
    double var = detail::block_sum(sq, shared) / count;
    double invstd = 1.0 / sqrt(var + eps);
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
      int64_t e = at(k, c, d, ch);
      y[e] = static_cast<float>(scale[ch] * (x[e] - mean) * invstd + bias[ch]);
    }
    if (threadIdx.x != 0) continue;
    if (running_mean) running_mean[ch] = static_cast<float>(mom * running_mean[ch] + (1 - mom) * mean);
    if (running_var) running_var[ch] = static_cast<float>(mom * running_var[ch] + (1 - mom) * var * var_scale);
    if (saved_mean) saved_mean[ch] = static_cast<float>(mean);
    if (saved_invstd) saved_invstd[ch] = static_cast<float>(invstd);
  }
}

__global__ void bn_infer_kernel(int64_t n, int64_t c, int64_t d, const float *x, const float *scale,
                                const float *bias, const float *mean, const float *var, double eps, float *y) {
  int64_t total = n * c * d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t ch = e / d % c;
    double invstd = 1.0 / sqrt(static_cast<double>(var[ch]) + eps);
    y[e] = static_cast<float>(scale[ch] * (x[e] - mean[ch]) * invstd + bias[ch]);
  }
}

/** Per channel: sums[ch] = sum dY, sums[c + ch] = sum dY * xhat; then dX (if given) from them with count m. */
__global__ void bn_backward_kernel(int64_t n, int64_t c, int64_t d, const float *dy, const float *x,
                                   const float *scale, const float *saved_mean, const float *saved_invstd, double m,
                                   float *dx, float *dscale, float *dbias, float *sums) {
  __shared__ double shared[32];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double mean = saved_mean[ch], invstd = saved_invstd[ch], db = 0, ds = 0;
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
      int64_t e = at(k, c, d, ch);
      db += dy[e];
      ds += dy[e] * (x[e] - mean) * invstd;
    }
    db = detail::block_sum(db, shared);
    ds = detail::block_sum(ds, shared);
    if (dx)
      for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
        int64_t e = at(k, c, d, ch);
        double xhat = (x[e] - mean) * invstd;
        dx[e] = static_cast<float>(scale[ch] * invstd / m * (m * dy[e] - db - xhat * ds));
      }
    if (threadIdx.x != 0) continue;
    if (dscale) dscale[ch] = static_cast<float>(ds);
    if (dbias) dbias[ch] = static_cast<float>(db);
    if (sums) {
      sums[ch] = static_cast<float>(db);
      sums[c + ch] = static_cast<float>(ds);
    }
  }
}

__global__ void bn_partial_stats_kernel(int64_t n, int64_t c, int64_t d, const float *x, const float *shift,
                                        float *stats) {
  __shared__ double shared[32];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double s = shift ? shift[ch] : 0.0, sum = 0, sq = 0;
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
      double e = x[at(k, c, d, ch)] - s;
      sum += e;
      sq += e * e;
    }
    sum = detail::block_sum(sum, shared);
    sq = detail::block_sum(sq, shared);
    if (threadIdx.x == 0) {
      stats[ch] = static_cast<float>(sum);
      stats[c + ch] = static_cast<float>(sq);
    }
  }
}

__global__ void bn_from_stats_kernel(int64_t n, int64_t c, int64_t d, const float *x, const float *scale,
                                     const float *bias, const float *stats, const float *shift, double m, double eps,
                                     double mom, double var_scale, float *y, float *running_mean, float *running_var,
                                     float *saved_mean, float *saved_invstd) {
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double centred_mean = stats[ch] / m;
    double mean = centred_mean + (shift ? shift[ch] : 0.0);
    double var = fmax(0.0, stats[c + ch] / m - centred_mean * centred_mean);
    double invstd = 1.0 / sqrt(var + eps);
    for (int64_t k = threadIdx.x; k < n * d; k += blockDim.x) {
      int64_t e = at(k, c, d, ch);
      y[e] = static_cast<float>(scale[ch] * (x[e] - mean) * invstd + bias[ch]);
    }
    __syncthreads();  // every thread has read the running statistics' inputs before thread 0 writes
    if (threadIdx.x != 0) continue;
    if (running_mean) running_mean[ch] = static_cast<float>(mom * running_mean[ch] + (1 - mom) * mean);
    if (running_var) running_var[ch] = static_cast<float>(mom * running_var[ch] + (1 - mom) * var * var_scale);
    if (saved_mean) saved_mean[ch] = static_cast<float>(mean);
    if (saved_invstd) saved_invstd[ch] = static_cast<float>(invstd);
  }
}

/** mean[ch] = stats[ch] / count: the shift of the synced forward's second pass. */
__global__ void mean_from_sums_kernel(int64_t c, const float *stats, double count, float *mean) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(blockDim.x) * gridDim.x)
    mean[ch] = static_cast<float>(stats[ch] / count);
}

__global__ void bn_data_from_sums_kernel(int64_t n, int64_t c, int64_t d, const float *dy, const float *x,
                                         const float *scale, const float *saved_mean, const float *saved_invstd,
                                         const float *sums, double m, float *dx) {
  int64_t total = n * c * d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t ch = e / d % c;
    double mean = saved_mean[ch], invstd = saved_invstd[ch], db = sums[ch], ds = sums[c + ch];
    double xhat = (x[e] - mean) * invstd;
    dx[e] = static_cast<float>(scale[ch] * invstd / m * (m * dy[e] - db - xhat * ds));
  }
}

__global__ void ln_forward_kernel(int64_t outer, int64_t inner, const float *x, const float *scale,
                                  const float *bias, double eps, float *y, float *mean, float *invstd) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {
    const float *row = x + r * inner;
    double sum = 0, sq = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) sum += row[i];
    double m = detail::block_sum(sum, shared) / static_cast<double>(inner);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) sq += (row[i] - m) * (row[i] - m);
    double is = 1.0 / sqrt(detail::block_sum(sq, shared) / static_cast<double>(inner) + eps);
    float mf = static_cast<float>(m), isf = static_cast<float>(is);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      y[r * inner + i] = (row[i] - mf) * isf * scale[i] + (bias ? bias[i] : 0.0f);
    if (threadIdx.x == 0) {
      if (mean) mean[r] = mf;
      if (invstd) invstd[r] = isf;
    }
  }
}

__global__ void ln_backward_dx_kernel(int64_t outer, int64_t inner, const float *dy, const float *x,
                                      const float *scale, const float *mean, const float *invstd, float *dx) {
  __shared__ double shared[32];
  const double n = static_cast<double>(inner);
  for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {
    const float *xr = x + r * inner, *dyr = dy + r * inner;
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      double xhat = (static_cast<double>(xr[i]) - mean[r]) * invstd[r];
      double g = static_cast<double>(dyr[i]) * scale[i];
      sg += g;
      sgx += g * xhat;
    }
    sg = detail::block_sum(sg, shared);
    sgx = detail::block_sum(sgx, shared);
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      double xhat = (static_cast<double>(xr[i]) - mean[r]) * invstd[r];
      double g = static_cast<double>(dyr[i]) * scale[i];
      dx[r * inner + i] = static_cast<float>(invstd[r] * (g - sg / n - xhat * sgx / n));
    }
  }
}

// Rows up to kWarpRow long take a warp each (warp-wide sums, no block barriers); longer ones a block each.
constexpr int64_t kWarpRow = 1024;

/** ln_forward_kernel with a warp per row. */
__global__ void ln_forward_warp_kernel(int64_t outer, int64_t inner, const float *x, const float *scale,
                                       const float *bias, double eps, float *y, float *mean, float *invstd) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; r < outer; r += warps) {
    const float *row = x + r * inner;
    double sum = 0, sq = 0;
    for (int64_t i = lane; i < inner; i += 32) sum += row[i];
    const double m = detail::warp_sum(sum) / static_cast<double>(inner);
    for (int64_t i = lane; i < inner; i += 32) sq += (row[i] - m) * (row[i] - m);
    const double is = 1.0 / sqrt(detail::warp_sum(sq) / static_cast<double>(inner) + eps);
    const float mf = static_cast<float>(m), isf = static_cast<float>(is);
    for (int64_t i = lane; i < inner; i += 32)
      y[r * inner + i] = (row[i] - mf) * isf * scale[i] + (bias ? bias[i] : 0.0f);
    if (lane == 0) {
      if (mean) mean[r] = mf;
      if (invstd) invstd[r] = isf;
    }
  }
}

/** ln_backward_dx_kernel with a warp per row. */
__global__ void ln_backward_dx_warp_kernel(int64_t outer, int64_t inner, const float *dy, const float *x,
                                           const float *scale, const float *mean, const float *invstd, float *dx) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const double n = static_cast<double>(inner);
  for (int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5; r < outer; r += warps) {
    const float *xr = x + r * inner, *dyr = dy + r * inner;
    double sg = 0, sgx = 0;
    for (int64_t i = lane; i < inner; i += 32) {
      double xhat = (static_cast<double>(xr[i]) - mean[r]) * invstd[r];
      double g = static_cast<double>(dyr[i]) * scale[i];
      sg += g;
      sgx += g * xhat;
    }
    sg = detail::warp_sum(sg);
    sgx = detail::warp_sum(sgx);
    for (int64_t i = lane; i < inner; i += 32) {
      double xhat = (static_cast<double>(xr[i]) - mean[r]) * invstd[r];
      double g = static_cast<double>(dyr[i]) * scale[i];
      dx[r * inner + i] = static_cast<float>(invstd[r] * (g - sg / n - xhat * sgx / n));
    }
  }
}

/** Blocks for a warp per row. */
unsigned warp_rows_grid(int64_t rows) {
  const int64_t per_block = detail::kThreads / 32;
  return static_cast<unsigned>(std::clamp<int64_t>((rows + per_block - 1) / per_block, 1, 65535));
}

/** The first pass of the column sums (internal.cuh) for dscale[i] = sum over rows of dY * xhat and dbias[i] = sum
 *  of dY: partial holds the chunks' dscale sums, then their dbias sums. */
__global__ void ln_params_partial_kernel(int64_t outer, int64_t inner, int64_t rows, const float *dy, const float *x,
                                         const float *mean, const float *invstd, double *partial) {
  __shared__ double lanes[2][detail::kRowLanes][detail::kColTile + 1];
  const int64_t i = blockIdx.x * static_cast<int64_t>(detail::kColTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows, r1 = r0 + rows < outer ? r0 + rows : outer;
  double ds = 0, db = 0;
  if (i < inner)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += detail::kRowLanes) {
      const double g = dy[r * inner + i];
      ds += g * ((static_cast<double>(x[r * inner + i]) - mean[r]) * invstd[r]);
      db += g;
    }
  lanes[0][threadIdx.y][threadIdx.x] = ds;
  lanes[1][threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y != 0 || i >= inner) return;
  for (int j = 1; j < detail::kRowLanes; ++j) {
    ds += lanes[0][j][threadIdx.x];
    db += lanes[1][j][threadIdx.x];
  }
  partial[blockIdx.y * inner + i] = ds;
  partial[(gridDim.y + blockIdx.y) * inner + i] = db;
}

/** ONNX's running statistics update from cuDNN's saved mean and inverse std: the biased batch variance is
 *  1 / invstd^2 - eps (times var_scale: torch's unbiased variance). */
__global__ void bn_running_stats_kernel(int64_t c, const float *mean, const float *invstd, double eps, double mom,
                                        double var_scale, float *running_mean, float *running_var) {
  for (int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; ch < c;
       ch += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    double is = invstd[ch], var = fmax(0.0, 1.0 / (is * is) - eps);
    if (running_mean) running_mean[ch] = static_cast<float>(mom * running_mean[ch] + (1 - mom) * mean[ch]);
    if (running_var) running_var[ch] = static_cast<float>(mom * running_var[ch] + (1 - mom) * var * var_scale);
  }
}

/** cuDNN's descriptors for spatial batch norm over X [n, c, d]: X as NCHW [n, c, d, 1], and the derived [1, c, 1, 1]
 *  of scale, bias and the per-channel statistics. */
struct CudnnBatchNorm {
  cudnnTensorDescriptor_t x = nullptr, param = nullptr;

  CudnnBatchNorm(int64_t n, int64_t c, int64_t d) {
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &x);
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &param);
    CLEAVE_CUDNN(cudnnSetTensor4dDescriptor, x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                 static_cast<int>(c), static_cast<int>(d), 1);
    CLEAVE_CUDNN(cudnnDeriveBNTensorDescriptor, param, x, CUDNN_BATCHNORM_SPATIAL);
  }
  ~CudnnBatchNorm() {
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, param);
    CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, x);
  }
  CudnnBatchNorm(const CudnnBatchNorm &) = delete;
  CudnnBatchNorm &operator=(const CudnnBatchNorm &) = delete;
};

void cudnn_train_forward(int64_t n, int64_t c, int64_t d, const float *x, const float *scale, const float *bias,
                         float eps, float momentum, double var_scale, float *y, float *running_mean,
                         float *running_var, float *saved_mean, float *saved_invstd) {
  CudnnBatchNorm desc(n, c, d);
  auto *stats = static_cast<float *>(detail::scratch2(static_cast<size_t>(2 * c) * sizeof(float)));
  float *mean = saved_mean ? saved_mean : stats, *invstd = saved_invstd ? saved_invstd : stats + c;
  float one = 1.0f, zero = 0.0f;
  // exponentialAverageFactor is unused: the running statistics are NULL (updated below with the biased variance).
  CLEAVE_CUDNN(cudnnBatchNormalizationForwardTraining, detail::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, desc.x,
               x, desc.x, y, desc.param, scale, bias, 1.0, nullptr, nullptr, static_cast<double>(eps), mean, invstd);
  if (running_mean || running_var)
    CLEAVE_LAUNCH(bn_running_stats_kernel, detail::grid_for(c), detail::kThreads, c, mean, invstd,
                  static_cast<double>(eps), static_cast<double>(momentum), var_scale, running_mean, running_var);
}

/** dX, dscale, dbias from cuDNN given the forward's saved mean and inverse std; dscale/dbias may be null. */
void cudnn_backward(int64_t n, int64_t c, int64_t d, const float *dy, const float *x, const float *scale,
                    const float *saved_mean, const float *saved_invstd, float *dx, float *dscale, float *dbias) {
  CudnnBatchNorm desc(n, c, d);
  auto *sums = static_cast<float *>(detail::scratch2(static_cast<size_t>(2 * c) * sizeof(float)));
  float one = 1.0f, zero = 0.0f;
  // The saved statistics hold epsilon already (invstd = 1 / sqrt(var + eps)); the argument only has to be valid.
  CLEAVE_CUDNN(cudnnBatchNormalizationBackward, detail::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
               desc.x, x, desc.x, dy, desc.x, dx, desc.param, scale, dscale ? dscale : sums, dbias ? dbias : sums + c,
               CUDNN_BN_MIN_EPSILON, saved_mean, saved_invstd);
}

}  // namespace

bool detail::cudnn_takes_batch_norm_forward(int64_t n, int64_t c, int64_t d, double eps) {
  if (!detail::cudnn_pool_norm_enabled() || !(eps >= CUDNN_BN_MIN_EPSILON)) return false;
  if (n < 1 || c < 1 || d < 1 || n > INT_MAX || c > INT_MAX || d > INT_MAX) return false;
  return n * c <= INT_MAX && n * c * d <= INT_MAX;
}

bool detail::cudnn_takes_batch_norm_backward(int64_t n, int64_t c, int64_t d, bool dx, bool saved) {
  return dx && saved && cudnn_takes_batch_norm_forward(n, c, d, CUDNN_BN_MIN_EPSILON);
}

void batch_norm_train_forward(int64_t n, int64_t c, int64_t d, const float *x, const float *scale, const float *bias,
                              float eps, float momentum, float *y, float *running_mean, float *running_var,
                              float *saved_mean, float *saved_invstd, bool unbiased) {
  if (c == 0) return;
  double count = static_cast<double>(n * d), var_scale = unbiased && count > 1 ? count / (count - 1) : 1.0;
  if (detail::cudnn_takes_batch_norm_forward(n, c, d, eps))
    return cudnn_train_forward(n, c, d, x, scale, bias, eps, momentum, var_scale, y, running_mean, running_var,
                               saved_mean, saved_invstd);
  CLEAVE_LAUNCH(bn_train_kernel, detail::rows_grid(c), detail::kThreads, n, c, d, x, scale, bias,
                static_cast<double>(eps), static_cast<double>(momentum), var_scale, y, running_mean, running_var,
                saved_mean, saved_invstd);
}

void batch_norm_infer_forward(int64_t n, int64_t c, int64_t d, const float *x, const float *scale, const float *bias,
                              const float *mean, const float *var, float eps, float *y) {
  int64_t total = n * c * d;
  if (total == 0) return;
  CLEAVE_LAUNCH(bn_infer_kernel, detail::grid_for(total), detail::kThreads, n, c, d, x, scale, bias, mean, var,
                static_cast<double>(eps), y);
}

void batch_norm_backward(int64_t n, int64_t c, int64_t d, const float *dy, const float *x, const float *scale,
                         const float *saved_mean, const float *saved_invstd, float *dx, float *dscale, float *dbias) {
  if (c == 0) return;
  if (detail::cudnn_takes_batch_norm_backward(n, c, d, dx, saved_mean && saved_invstd))
    return cudnn_backward(n, c, d, dy, x, scale, saved_mean, saved_invstd, dx, dscale, dbias);
  CLEAVE_LAUNCH(bn_backward_kernel, detail::rows_grid(c), detail::kThreads, n, c, d, dy, x, scale, saved_mean,
                saved_invstd, static_cast<double>(n * d), dx, dscale, dbias, static_cast<float *>(nullptr));
}

void batch_norm_partial_stats(int64_t n, int64_t c, int64_t d, const float *x, const float *shift, float *stats) {
  if (c == 0) return;
  CLEAVE_LAUNCH(bn_partial_stats_kernel, detail::rows_grid(c), detail::kThreads, n, c, d, x, shift, stats);
}

void batch_norm_train_forward_from_stats(int64_t n, int64_t c, int64_t d, const float *x, const float *scale,
                                         const float *bias, const float *stats, const float *shift, int64_t count,
                                         float eps, float momentum, float *y, float *running_mean, float *running_var,
                                         float *saved_mean, float *saved_invstd, bool unbiased) {
  if (count <= 0) fail("batch_norm_train_forward_from_stats: count must be positive");
  if (c == 0) return;
  double m = static_cast<double>(count), var_scale = unbiased && m > 1 ? m / (m - 1) : 1.0;
  CLEAVE_LAUNCH(bn_from_stats_kernel, detail::rows_grid(c), detail::kThreads, n, c, d, x, scale, bias, stats, shift, m,
                static_cast<double>(eps), static_cast<double>(momentum), var_scale, y, running_mean, running_var,
                saved_mean, saved_invstd);
}

void batch_norm_backward_partial_sums(int64_t n, int64_t c, int64_t d, const float *dy, const float *x,
                                      const float *saved_mean, const float *saved_invstd, float *sums) {
  if (c == 0) return;
  CLEAVE_LAUNCH(bn_backward_kernel, detail::rows_grid(c), detail::kThreads, n, c, d, dy, x,
                static_cast<const float *>(nullptr), saved_mean, saved_invstd, 1.0, static_cast<float *>(nullptr),
                static_cast<float *>(nullptr), static_cast<float *>(nullptr), sums);
}

void batch_norm_backward_data_from_sums(int64_t n, int64_t c, int64_t d, const float *dy, const float *x,
                                        const float *scale, const float *saved_mean, const float *saved_invstd,
                                        const float *sums, int64_t count, float *dx) {
  int64_t total = n * c * d;
  if (total == 0) return;
  CLEAVE_LAUNCH(bn_data_from_sums_kernel, detail::grid_for(total), detail::kThreads, n, c, d, dy, x, scale,
                saved_mean, saved_invstd, sums, static_cast<double>(count), dx);
}

void batch_norm_train_forward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const float *x,
                                     const float *scale, const float *bias, float eps, float momentum, float *y,
                                     float *running_mean, float *running_var, float *saved_mean, float *saved_invstd,
                                     bool unbiased) {
  if (count <= 0) fail("batch_norm_train_forward_synced: count must be positive");
  auto *stats = static_cast<float *>(detail::scratch2(static_cast<size_t>(3 * c) * sizeof(float)));
  float *mean = stats + 2 * c;
  batch_norm_partial_stats(n, c, d, x, nullptr, stats);
  all_reduce_sum(g, stats, stats, c);
  if (c > 0)
    CLEAVE_LAUNCH(mean_from_sums_kernel, detail::grid_for(c), detail::kThreads, c, stats, static_cast<double>(count),
                  mean);
  batch_norm_partial_stats(n, c, d, x, mean, stats);
  all_reduce_sum(g, stats, stats, 2 * c);
  batch_norm_train_forward_from_stats(n, c, d, x, scale, bias, stats, mean, count, eps, momentum, y, running_mean,
                                      running_var, saved_mean, saved_invstd, unbiased);
}

void batch_norm_backward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const float *dy,
                                const float *x, const float *scale, const float *saved_mean, const float *saved_invstd,
                                float *dx, float *dscale, float *dbias) {
  auto *sums = static_cast<float *>(detail::scratch2(static_cast<size_t>(2 * c) * sizeof(float)));
  batch_norm_backward_partial_sums(n, c, d, dy, x, saved_mean, saved_invstd, sums);
  all_reduce_sum(g, sums, sums, 2 * c);
  if (dx) batch_norm_backward_data_from_sums(n, c, d, dy, x, scale, saved_mean, saved_invstd, sums, count, dx);
  if (dbias) copy(dbias, sums, c * 4);
  if (dscale) copy(dscale, sums + c, c * 4);
}

void layer_norm_forward(int64_t outer, int64_t inner, const float *x, const float *scale, const float *bias, float eps,
                        float *y, float *mean, float *invstd) {
  if (inner <= 0) fail("layer_norm_forward: empty normalised dims");
  if (outer == 0) return;
  if (inner <= kWarpRow)
    CLEAVE_LAUNCH(ln_forward_warp_kernel, warp_rows_grid(outer), detail::kThreads, outer, inner, x, scale, bias,
                  static_cast<double>(eps), y, mean, invstd);
  else
    CLEAVE_LAUNCH(ln_forward_kernel, detail::rows_grid(outer), detail::kThreads, outer, inner, x, scale, bias,
                  static_cast<double>(eps), y, mean, invstd);
}

void layer_norm_backward(int64_t outer, int64_t inner, const float *dy, const float *x, const float *scale,
                         const float *mean, const float *invstd, float *dx, float *dscale, float *dbias) {
  if (dx && outer > 0 && inner <= kWarpRow)
    CLEAVE_LAUNCH(ln_backward_dx_warp_kernel, warp_rows_grid(outer), detail::kThreads, outer, inner, dy, x, scale,
                  mean, invstd, dx);
  else if (dx && outer > 0)
    CLEAVE_LAUNCH(ln_backward_dx_kernel, detail::rows_grid(outer), detail::kThreads, outer, inner, dy, x, scale, mean,
                  invstd, dx);
  if ((dscale || dbias) && inner > 0) {
    const detail::ColumnChunks c = detail::column_chunks(inner, outer);
    auto *partial = static_cast<double *>(detail::scratch(static_cast<size_t>(2 * c.chunks * inner) * sizeof(double)));
    dim3 grid(static_cast<unsigned>(c.col_blocks), static_cast<unsigned>(c.chunks));
    dim3 block(detail::kColTile, detail::kRowLanes);
    CLEAVE_LAUNCH(ln_params_partial_kernel, grid, block, outer, inner, c.rows, dy, x, mean, invstd, partial);
    if (dscale) detail::sum_column_partials(inner, c.chunks, partial, dscale, 1.0);
    if (dbias) detail::sum_column_partials(inner, c.chunks, partial + c.chunks * inner, dbias, 1.0);
  }
}

}  // namespace cleave::rt
