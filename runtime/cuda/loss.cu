// Softmax / log-softmax on cuDNN (accurate algorithm, channel mode over [outer, dim, inner, 1]), rows as long as a
// vocabulary by a kernel of their own; the losses as kernels with cpu/loss.cpp's semantics (weights, ignore_index,
// reductions; sums in double).
#include <algorithm>
#include <climits>
#include <cmath>

#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

/** Weight of position i (0 for ignore_index); a label outside [0, c) sets the error flag. */
__device__ double position_weight(LossShape s, const int64_t *labels, const float *weights, int64_t i, int *error) {
  int64_t l = labels[i];
  if (s.has_ignore_index && l == s.ignore_index) return 0.0;
  if (l < 0 || l >= s.c) {
    *error = 1;
    return 0.0;
  }
  return weights ? weights[l] : 1.0;
}

/** What a mean divides by: the group's total on the device (sync_loss_divisor), the given divisor, or the local
 *  weight total. */
__device__ double divisor(const LossShape &s, double local_total) {
  if (s.mean_divisor_at) return static_cast<double>(*s.mean_divisor_at);
  return s.mean_divisor > 0 ? s.mean_divisor : local_total;
}

/** One block: totals[0] = sum of the weighted terms -w * logp[label], totals[1] = sum of the weights; `loss` as the
 *  reduction asks (per position for none). */
__global__ void loss_kernel(LossShape s, const float *logp, const int64_t *labels, const float *weights, float *loss,
                            int *error) {
  __shared__ double shared[32];
  double sum = 0, wsum = 0;
  for (int64_t i = threadIdx.x; i < s.n * s.d; i += blockDim.x) {
    double w = position_weight(s, labels, weights, i, error);
    int64_t n = i / s.d, d = i % s.d;
    double term = w != 0 ? -w * logp[(n * s.c + labels[i]) * s.d + d] : 0.0;
    if (s.reduction == Reduction::none) loss[i] = static_cast<float>(term);
    sum += term;
    wsum += w;
  }
  sum = detail::block_sum(sum, shared);
  wsum = detail::block_sum(wsum, shared);
  if (threadIdx.x != 0) return;
  if (s.reduction == Reduction::sum) loss[0] = static_cast<float>(sum);
  if (s.reduction == Reduction::mean) loss[0] = static_cast<float>(sum / divisor(s, wsum));
}

/** One block: *total = the sum of the position weights. */
__global__ void weight_total_kernel(LossShape s, const int64_t *labels, const float *weights, double *total,
                                    int *error) {
  __shared__ double shared[32];
  double wsum = 0;
  for (int64_t i = threadIdx.x; i < s.n * s.d; i += blockDim.x) wsum += position_weight(s, labels, weights, i, error);
  wsum = detail::block_sum(wsum, shared);
  if (threadIdx.x == 0) *total = wsum;
}

/** d(loss)/d(term i) times the weight, as cpu/loss.cpp's upstream(). */
__device__ double upstream(LossShape s, const float *dloss, const int64_t *labels, const float *weights,
                           const double *wsum, int64_t i, int *error) {
  double w = position_weight(s, labels, weights, i, error);
  double up = s.reduction == Reduction::none ? dloss[i]
              : s.reduction == Reduction::sum ? dloss[0]
                                              : dloss[0] / divisor(s, *wsum);
  return w * up;
}

__global__ void sce_backward_kernel(LossShape s, const float *dloss, const float *log_prob, const int64_t *labels,
                                    const float *weights, const double *wsum, float *dscores, int *error) {
  int64_t total = s.n * s.c * s.d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t d = e % s.d, c = e / s.d % s.c, n = e / s.d / s.c;
    double gi = upstream(s, dloss, labels, weights, wsum, n * s.d + d, error);
    dscores[e] = gi == 0 ? 0.0f
                         : static_cast<float>(gi * (exp(static_cast<double>(log_prob[e])) -
                                                    (c == labels[n * s.d + d] ? 1.0 : 0.0)));
  }
}

/** sce_backward_kernel for scores [n, c] (d = 1): grid row y walks rows n, whose upstream is found once per thread;
 *  the columns with 32-bit indices, without the general walk's three 64-bit divisions per element. */
__global__ void sce_backward_rows_kernel(LossShape s, const float *dloss, const float *log_prob,
                                         const int64_t *labels, const float *weights, const double *wsum,
                                         float *dscores, int *error) {
  const uint32_t classes = static_cast<uint32_t>(s.c);
  for (int64_t n = blockIdx.y; n < s.n; n += gridDim.y) {
    const double gi = upstream(s, dloss, labels, weights, wsum, n, error);
    const int64_t label = labels[n];
    const float *lp = log_prob + n * s.c;
    float *ds = dscores + n * s.c;
    for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < classes; c += blockDim.x * gridDim.x)
      ds[c] = gi == 0 ? 0.0f
                      : static_cast<float>(gi * (exp(static_cast<double>(lp[c])) -
                                                 (static_cast<int64_t>(c) == label ? 1.0 : 0.0)));
  }
}

__global__ void nll_backward_kernel(LossShape s, const float *dloss, const int64_t *labels, const float *weights,
                                    const double *wsum, float *dinput, int *error) {
  int64_t total = s.n * s.c * s.d;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t d = e % s.d, c = e / s.d % s.c, n = e / s.d / s.c;
    double gi = upstream(s, dloss, labels, weights, wsum, n * s.d + d, error);
    dinput[e] = gi != 0 && c == labels[n * s.d + d] ? static_cast<float>(-gi) : 0.0f;
  }
}

/** The divisor's device copy for the backward kernels (the weight total when the mean has no given divisor). */
double *weight_total_on_device(const LossShape &s, const int64_t *labels, const float *weights) {
  auto *total = static_cast<double *>(detail::scratch2(sizeof(double)));
  CLEAVE_LAUNCH(weight_total_kernel, 1, detail::kThreads, s, labels, weights, total, detail::error_flag());
  return total;
}

__global__ void to_float_kernel(const double *x, float *y) { *y = static_cast<float>(*x); }

std::string label_message(const LossShape &s) {
  return "loss: a label is out of range [0, " + std::to_string(s.c) + ")";
}

// Rows at least kLongRow long (a language model's vocabulary) take softmax_rows_kernel; shorter ones cuDNN.
constexpr int64_t kLongRow = 4096;

/** The largest of v over the block (blockDim.x == kThreads), in every thread; NaNs are skipped as fmaxf does. */
__device__ float block_max(float v, float *shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmaxf(m, shared[w]);
  return m;
}

/** Softmax (or log-softmax) over the rows of x [outer, dim], a block per row: the row's maximum, the sum of
 *  exp(x - max) in double, then each output; a row is read three times, the last two mostly from cache. */
__global__ void softmax_rows_kernel(int64_t outer, int64_t dim, const float *x, float *y, bool log) {
  __shared__ double sums[32];
  __shared__ float maxima[32];
  for (int64_t r = blockIdx.x; r < outer; r += gridDim.x) {
    const float *row = x + r * dim;
    float *out = y + r * dim;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_max(m, maxima);
    double sum = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += expf(row[i] - m);
    sum = detail::block_sum(sum, sums);
    const float log_sum = static_cast<float>(::log(sum)), inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
      out[i] = log ? row[i] - m - log_sum : expf(row[i] - m) * inv_sum;
  }
}

/** A cuDNN descriptor of [outer, dim, inner, 1]. */
struct SoftmaxDesc {
  cudnnTensorDescriptor_t desc = nullptr;
  SoftmaxDesc(int64_t outer, int64_t dim, int64_t inner) {
    if (outer > INT_MAX || dim > INT_MAX || inner > INT_MAX || outer * dim * inner > INT_MAX)
      fail("softmax: tensor of " + std::to_string(outer * dim * inner) + " elements exceeds cuDNN's int range");
    CLEAVE_CUDNN(cudnnCreateTensorDescriptor, &desc);
    CLEAVE_CUDNN(cudnnSetTensor4dDescriptor, desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(outer),
                 static_cast<int>(dim), static_cast<int>(inner), 1);
  }
  ~SoftmaxDesc() { CLEAVE_CUDNN(cudnnDestroyTensorDescriptor, desc); }
};

}  // namespace

void softmax_forward(int64_t outer, int64_t dim, int64_t inner, const float *x, float *y, bool log) {
  if (outer * dim * inner == 0) return;
  if (inner == 1 && dim >= kLongRow) {
    CLEAVE_LAUNCH(softmax_rows_kernel, detail::rows_grid(outer), detail::kThreads, outer, dim, x, y, log);
    return;
  }
  SoftmaxDesc t(outer, dim, inner);
  float one = 1.0f, zero = 0.0f;
  CLEAVE_CUDNN(cudnnSoftmaxForward, detail::cudnn(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
               CUDNN_SOFTMAX_MODE_CHANNEL, &one, t.desc, x, &zero, t.desc, y);
}

void softmax_backward(int64_t outer, int64_t dim, int64_t inner, const float *dy, const float *y, float *dx,
                      bool log) {
  if (outer * dim * inner == 0) return;
  SoftmaxDesc t(outer, dim, inner);
  float one = 1.0f, zero = 0.0f;
  CLEAVE_CUDNN(cudnnSoftmaxBackward, detail::cudnn(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
               CUDNN_SOFTMAX_MODE_CHANNEL, &one, t.desc, y, t.desc, dy, &zero, t.desc, dx);
}

double loss_weight_total(const LossShape &s, const int64_t *labels, const float *weights) {
  double *total = weight_total_on_device(s, labels, weights);
  double host = 0;
  CLEAVE_CUDA(cudaMemcpyAsync, &host, total, sizeof host, cudaMemcpyDeviceToHost, compute_stream());
  detail::check_error_flag(label_message(s));  // synchronises: host is valid after it
  return host;
}

void sync_loss_divisor(const Comm &g, LossShape &s, const int64_t *labels, const float *weights) {
  if (detail::comm_staged()) {
    s.mean_divisor = loss_weight_total_synced(g, s, labels, weights);
    return;
  }
  // As loss_weight_total_synced, a float sum over the group, but kept on the device: no host round trip in the step.
  static float *slot = nullptr;
  if (!slot) CLEAVE_CUDA(cudaMalloc, &slot, sizeof(float));
  CLEAVE_LAUNCH(to_float_kernel, 1, 1, weight_total_on_device(s, labels, weights), slot);
  detail::check_error_flag(label_message(s));
  all_reduce_sum(g, slot, slot, 1);
  s.mean_divisor_at = slot;
}

void softmax_cross_entropy_forward(const LossShape &s, const float *scores, const int64_t *labels,
                                   const float *weights, float *loss, float *log_prob) {
  if (!log_prob) log_prob = static_cast<float *>(detail::scratch(static_cast<size_t>(s.n * s.c * s.d) * 4));
  softmax_forward(s.n, s.c, s.d, scores, log_prob, true);
  nll_forward(s, log_prob, labels, weights, loss);
}

void softmax_cross_entropy_backward(const LossShape &s, const float *dloss, const float *log_prob,
                                    const int64_t *labels, const float *weights, float *dscores) {
  double *wsum = weight_total_on_device(s, labels, weights);
  int64_t total = s.n * s.c * s.d;
  // Rows of at least a warp's worth of classes (a few classes a row would leave most of a block idle).
  if (total > 0 && s.d == 1 && s.c >= 32 && s.c < (int64_t{1} << 31)) {
    const int64_t col_blocks = std::min<int64_t>((s.c + detail::kThreads - 1) / detail::kThreads, 32);
    dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(std::min<int64_t>(s.n, 65535)));
    CLEAVE_LAUNCH(sce_backward_rows_kernel, grid, detail::kThreads, s, dloss, log_prob, labels, weights, wsum,
                  dscores, detail::error_flag());
  } else if (total > 0) {
    CLEAVE_LAUNCH(sce_backward_kernel, detail::grid_for(total), detail::kThreads, s, dloss, log_prob, labels, weights,
                  wsum, dscores, detail::error_flag());
  }
  detail::check_error_flag(label_message(s));
}

void nll_forward(const LossShape &s, const float *input, const int64_t *labels, const float *weights, float *loss) {
  CLEAVE_LAUNCH(loss_kernel, 1, detail::kThreads, s, input, labels, weights, loss, detail::error_flag());
  detail::check_error_flag(label_message(s));
}

void nll_backward(const LossShape &s, const float *dloss, const int64_t *labels, const float *weights,
                  float *dinput) {
  double *wsum = weight_total_on_device(s, labels, weights);
  int64_t total = s.n * s.c * s.d;
  if (total > 0)
    CLEAVE_LAUNCH(nll_backward_kernel, detail::grid_for(total), detail::kThreads, s, dloss, labels, weights, wsum,
                  dinput, detail::error_flag());
  detail::check_error_flag(label_message(s));
}

}  // namespace cleave::rt
