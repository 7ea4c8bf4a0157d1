// Optimizer steps and Dropout as elementwise kernels with cpu/optim.cpp's formulas (double per element, rounded
// once). Dropout draws from cleave/rng.h (CLEAVE_HD), so the masks are bit-identical to the CPU backend's.
#include <cmath>

#include "common/strided_index.h"
#include "cuda/internal.cuh"

#define CLEAVE_FOR_EACH(i, n)                                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

namespace cleave::rt {
namespace {

/** Per block, the sum of squares of its grid-stride elements, added to *out (one double atomic per block). */
__global__ void sum_squares_kernel(int64_t n, const float *x, double *out) {
  __shared__ double part[256];
  double s = 0;
  CLEAVE_FOR_EACH(i, n) s += static_cast<double>(x[i]) * x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

__global__ void scale_kernel(int64_t n, float *x, float s) { CLEAVE_FOR_EACH(i, n) x[i] *= s; }

__global__ void add_kernel(int64_t n, float *y, const float *x) { CLEAVE_FOR_EACH(i, n) y[i] += x[i]; }

__global__ void sgd_kernel(int64_t n, const float *p, const float *g, double l, double wd, float *p_out) {
  CLEAVE_FOR_EACH(i, n) p_out[i] = static_cast<float>(p[i] - l * (wd != 0 ? g[i] + wd * p[i] : g[i]));
}

__global__ void momentum_kernel(int64_t n, const float *p, const float *g, const float *b, double l, double mu,
                                double wd, bool nesterov, float *p_out, float *b_out) {
  CLEAVE_FOR_EACH(i, n) {
    double gi = wd != 0 ? g[i] + wd * p[i] : g[i];  // as torch: 0 * an infinite mask would be NaN
    double bi = mu * b[i] + gi;
    double step = nesterov ? gi + mu * bi : bi;
    float pn = static_cast<float>(p[i] - l * step);
    b_out[i] = static_cast<float>(bi);
    p_out[i] = pn;
  }
}

__global__ void adam_kernel(int64_t n, const float *p, const float *g, const float *m, const float *v, double l,
                            double b1, double b2, double e, double wd, bool decoupled, double bc1, double bc2,
                            float *p_out, float *m_out, float *v_out) {
  CLEAVE_FOR_EACH(i, n) {
    double pi = p[i], gi = g[i];
    if (decoupled) pi *= 1 - l * wd;
    else if (wd != 0) gi += wd * pi;
    double mi = b1 * m[i] + (1 - b1) * gi;
    double vi = b2 * v[i] + (1 - b2) * gi * gi;
    float pn = static_cast<float>(pi - (l / bc1) * mi / (sqrt(vi) / sqrt(bc2) + e));
    m_out[i] = static_cast<float>(mi);
    v_out[i] = static_cast<float>(vi);
    p_out[i] = pn;
  }
}

__global__ void onnx_momentum_kernel(int64_t n, const float *x, const float *g, const float *v, double r, double a,
                                     double b, double norm, bool nesterov, float *x_out, float *v_out) {
  CLEAVE_FOR_EACH(i, n) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + b * gr;
    float xn = static_cast<float>(nesterov ? x[i] - r * (gr + a * vn) : x[i] - r * vn);
    v_out[i] = static_cast<float>(vn);
    x_out[i] = xn;
  }
}

__global__ void onnx_adam_kernel(int64_t n, const float *x, const float *g, const float *v, const float *h, double r,
                                 double a, double b, double e, double norm, double post, float *x_out, float *v_out,
                                 float *h_out) {
  CLEAVE_FOR_EACH(i, n) {
    double gr = norm * x[i] + g[i];
    double vn = a * v[i] + (1 - a) * gr;
    double hn = b * h[i] + (1 - b) * gr * gr;
    float xn = static_cast<float>((1 - post) * (x[i] - r * (vn / (sqrt(hn) + e))));
    v_out[i] = static_cast<float>(vn);
    h_out[i] = static_cast<float>(hn);
    x_out[i] = xn;
  }
}

__global__ void onnx_adagrad_kernel(int64_t n, const float *x, const float *g, const float *h, double r, double e,
                                    double norm, float *x_out, float *h_out) {
  CLEAVE_FOR_EACH(i, n) {
    double gr = norm * x[i] + g[i];
    double hn = h[i] + gr * gr;
    float xn = static_cast<float>(x[i] - r * gr / (sqrt(hn) + e));
    h_out[i] = static_cast<float>(hn);
    x_out[i] = xn;
  }
}

/** The global index of element i of a shard: sum((offset[d] + i[d]) * gstrides[d]). */
__device__ int64_t global_index(int64_t i, const detail::Small &shape, const detail::Small &offset,
                                const detail::Small &gstrides) {
  int64_t g = 0;
  for (int d = shape.n - 1; d >= 0; --d) {
    g += (offset[d] + i % shape[d]) * gstrides[d];
    i /= shape[d];
  }
  return g;
}

__global__ void dropout_kernel(int64_t n, detail::Small shape, detail::Small offset, detail::Small gstrides,
                               uint64_t seed, int64_t step, float ratio, double scale, const float *x, float *y,
                               uint8_t *mask) {
  CLEAVE_FOR_EACH(i, n) {
    int64_t g = global_index(i, shape, offset, gstrides);
    bool keep = ratio == 0 || dropout_keep(seed, step, g, ratio);
    y[i] = keep ? static_cast<float>(x[i] * scale) : 0.0f;
    if (mask) mask[i] = keep ? 1 : 0;
  }
}

__global__ void dropout_kernel_fast(int64_t n, hd::StridedIndex global, int64_t base, uint64_t seed, int64_t step,
                                    float ratio, double scale, const float *x, float *y, uint8_t *mask) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    bool keep = dropout_keep(seed, step, base + global.offset(i), ratio);
    y[i] = keep ? static_cast<float>(x[i] * scale) : 0.0f;
    if (mask) mask[i] = keep ? 1 : 0;
  }
}

__global__ void random_like_kernel(int64_t n, detail::Small shape, detail::Small offset, detail::Small gstrides,
                                   uint64_t seed, int64_t step, bool normal, float a, float b, float *y) {
  CLEAVE_FOR_EACH(i, n) y[i] = rng_draw(normal, a, b, seed, step, global_index(i, shape, offset, gstrides));
}

__global__ void dropout_backward_kernel(int64_t n, double scale, const float *dy, const uint8_t *mask, float *dx) {
  CLEAVE_FOR_EACH(i, n) dx[i] = mask[i] ? static_cast<float>(dy[i] * scale) : 0.0f;
}

}  // namespace

#define CLEAVE_ELEMENTWISE(kernel, n, ...) \
  if ((n) > 0) CLEAVE_LAUNCH(kernel, detail::grid_for(n), detail::kThreads, n, __VA_ARGS__)

double sum_of_squares(const float *x, int64_t n) { return sum_of_squares({{x, n}}); }

double sum_of_squares(const std::vector<std::pair<const float *, int64_t>> &parts) {
  detail::graph_unsafe("a gradient norm read on the host");
  double *sum = nullptr, host = 0;
  CLEAVE_CUDA(cudaMallocAsync, reinterpret_cast<void **>(&sum), sizeof(double), compute_stream());
  CLEAVE_CUDA(cudaMemsetAsync, sum, 0, sizeof(double), compute_stream());
  for (const auto &[x, n] : parts)  // every part adds into the one sum: a single copy back and synchronize
    if (n > 0) CLEAVE_LAUNCH(sum_squares_kernel, detail::grid_for(n), 256, n, x, sum);
  CLEAVE_CUDA(cudaMemcpyAsync, &host, sum, sizeof(double), cudaMemcpyDeviceToHost, compute_stream());
  CLEAVE_CUDA(cudaFreeAsync, sum, compute_stream());
  CLEAVE_CUDA(cudaStreamSynchronize, compute_stream());
  return host;
}

void scale_in_place(float *x, int64_t n, float s) {
  if (n > 0) CLEAVE_LAUNCH(scale_kernel, detail::grid_for(n), 256, n, x, s);
}

void add_in_place(float *y, const float *x, int64_t n) {
  if (n > 0) CLEAVE_LAUNCH(add_kernel, detail::grid_for(n), 256, n, y, x);
}

void sgd_step(int64_t n, const float *p, const float *g, float lr, float weight_decay, float *p_out) {
  if (detail::skipped_update(n, {{p, p_out}})) return;
  CLEAVE_ELEMENTWISE(sgd_kernel, n, p, g, static_cast<double>(lr), static_cast<double>(weight_decay), p_out);
}

void momentum_step(int64_t n, const float *p, const float *g, const float *b, float lr, float momentum,
                   float weight_decay, bool nesterov, float *p_out, float *b_out) {
  if (detail::skipped_update(n, {{p, p_out}, {b, b_out}})) return;
  CLEAVE_ELEMENTWISE(momentum_kernel, n, p, g, b, static_cast<double>(lr), static_cast<double>(momentum),
                     static_cast<double>(weight_decay), nesterov, p_out, b_out);
}

void adam_step(int64_t n, const float *p, const float *g, const float *m, const float *v, float lr, float beta1,
               float beta2, float eps, float weight_decay, bool decoupled, int64_t step, float *p_out, float *m_out,
               float *v_out) {
  if (detail::skipped_update(n, {{p, p_out}, {m, m_out}, {v, v_out}})) return;
  step -= detail::g_skipped_updates;
  if (step < 1) fail("adam_step: step " + std::to_string(step) + " must be >= 1");
  detail::graph_unsafe("Adam's bias correction takes the step number by value");
  double b1 = beta1, b2 = beta2, t = static_cast<double>(step);
  CLEAVE_ELEMENTWISE(adam_kernel, n, p, g, m, v, static_cast<double>(lr), b1, b2, static_cast<double>(eps),
                     static_cast<double>(weight_decay), decoupled, 1 - std::pow(b1, t), 1 - std::pow(b2, t), p_out,
                     m_out, v_out);
}

void onnx_momentum_step(int64_t n, const float *x, const float *g, const float *v, float lr, int64_t t, float alpha,
                        float beta, float norm_coefficient, bool nesterov, float *x_out, float *v_out) {
  detail::graph_unsafe("the Momentum op takes its update count by value");
  CLEAVE_ELEMENTWISE(onnx_momentum_kernel, n, x, g, v, static_cast<double>(lr), static_cast<double>(alpha),
                     t > 0 ? static_cast<double>(beta) : 1.0, static_cast<double>(norm_coefficient), nesterov, x_out,
                     v_out);
}

void onnx_adam_step(int64_t n, const float *x, const float *g, const float *v, const float *h, float lr, int64_t t,
                    float alpha, float beta, float epsilon, float norm_coefficient, float norm_coefficient_post,
                    float *x_out, float *v_out, float *h_out) {
  detail::graph_unsafe("the Adam op takes its update count by value");
  double a = alpha, b = beta, td = static_cast<double>(t);
  double r = t > 0 ? lr * std::sqrt(1 - std::pow(b, td)) / (1 - std::pow(a, td)) : lr;
  CLEAVE_ELEMENTWISE(onnx_adam_kernel, n, x, g, v, h, r, a, b, static_cast<double>(epsilon),
                     static_cast<double>(norm_coefficient), static_cast<double>(norm_coefficient_post), x_out, v_out,
                     h_out);
}

void onnx_adagrad_step(int64_t n, const float *x, const float *g, const float *h, float lr, int64_t t,
                       float decay_factor, float epsilon, float norm_coefficient, float *x_out, float *h_out) {
  detail::graph_unsafe("the Adagrad op takes its update count by value");
  double r = lr / (1 + static_cast<double>(t) * decay_factor);
  CLEAVE_ELEMENTWISE(onnx_adagrad_kernel, n, x, g, h, r, static_cast<double>(epsilon),
                     static_cast<double>(norm_coefficient), x_out, h_out);
}

void dropout_forward(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed,
                     int64_t step, float ratio, const float *x, float *y, uint8_t *mask) {
  // Every element is kept at ratio 0, whatever the pass: only a positive ratio makes the step differ by pass.
  if (ratio > 0) detail::graph_unsafe("Dropout's mask takes the pass number by value");
  size_t r = shape.size();
  if (global_offset.size() != r || global_strides.size() != r) fail("dropout_forward: one offset/stride per dim");
  if (!(ratio >= 0 && ratio < 1)) fail("dropout_forward: ratio " + std::to_string(ratio) + " is not in [0, 1)");
  int64_t n = detail::product(shape);
  if (ratio == 0) {  // every element kept, y = x: copies, no index arithmetic
    if (y != x) copy(y, x, n * static_cast<int64_t>(sizeof(float)));
    if (mask) fill_bytes(mask, 1, n);
    return;
  }
  if (hd::fits_strided_index(shape, n)) {
    // The global index of element i: the shard's offset plus its position, both in the full tensor's strides.
    Dims st(global_strides);
    int64_t base = 0;
    for (size_t d = 0; d < r; ++d) base += global_offset[d] * global_strides[d];
    Dims sh(shape);
    hd::coalesce_dims(sh, st);
    CLEAVE_ELEMENTWISE(dropout_kernel_fast, n, hd::make_strided_index(sh, st), base, seed, step, ratio,
                       1.0 / (1.0 - static_cast<double>(ratio)), x, y, mask);
    return;
  }
  CLEAVE_ELEMENTWISE(dropout_kernel, n, detail::small(shape, "dropout_forward"),
                     detail::small(global_offset, "dropout_forward"), detail::small(global_strides, "dropout_forward"),
                     seed, step, ratio, 1.0 / (1.0 - static_cast<double>(ratio)), x, y, mask);
}

void random_like(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed, int64_t step,
                 bool normal, float a, float b, float *y) {
  detail::graph_unsafe("RandomLike's draws take the pass number by value");
  size_t r = shape.size();
  if (global_offset.size() != r || global_strides.size() != r) fail("random_like: one offset/stride per dim");
  CLEAVE_ELEMENTWISE(random_like_kernel, detail::product(shape), detail::small(shape, "random_like"),
                     detail::small(global_offset, "random_like"), detail::small(global_strides, "random_like"), seed,
                     step, normal, a, b, y);
}

void dropout_backward(int64_t n, float ratio, const float *dy, const uint8_t *mask, float *dx) {
  CLEAVE_ELEMENTWISE(dropout_backward_kernel, n, 1.0 / (1.0 - static_cast<double>(ratio)), dy, mask, dx);
}

}  // namespace cleave::rt
