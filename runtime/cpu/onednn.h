#pragma once
// Internal to the CPU backend: the kernels oneDNN runs for us (onednn.cpp) when the runtime is built with it
// (CLEAVE_HAVE_DNNL; without it every function returns false). Each function returns false, having written nothing,
// where oneDNN cannot compute exactly what the rt.h kernel of the same name computes; the caller then runs its own
// loops. Primitives are built once per shape and kept for the life of the process.
#include "cleave/rt.h"

namespace cleave::rt::detail::onednn {

/** Whether the kernels below may run: on when the runtime has oneDNN, unless CLEAVE_ONEDNN=0 is in the environment;
 *  tests switch it off to compare the two paths (set_enabled(true) without oneDNN changes nothing). */
bool enabled();
void set_enabled(bool on);

bool conv_forward(const ConvShape &s, const float *x, const float *w, const float *b, float *y);
bool conv_backward_data(const ConvShape &s, const float *dy, const float *w, float *dx);
bool conv_backward_filter(const ConvShape &s, const float *dy, const float *x, float *dw);

bool max_pool_forward(const PoolShape &s, const float *x, float *y);
bool max_pool_backward(const PoolShape &s, const float *dy, const float *x, float *dx);
bool avg_pool_forward(const PoolShape &s, const float *x, float *y);
bool avg_pool_backward(const PoolShape &s, const float *dy, float *dx);

/** mean and var [c] receive the batch mean and biased variance. */
bool batch_norm_train_forward(int64_t n, int64_t c, int64_t d, const float *x, const float *scale, const float *bias,
                              float eps, float *y, float *mean, float *var);
bool batch_norm_backward(int64_t n, int64_t c, int64_t d, const float *dy, const float *x, const float *scale,
                         const float *saved_mean, const float *saved_invstd, float *dx, float *dscale, float *dbias);

/** Rows of [outer, inner]; bias may be null; mean and invstd [outer] (either may be null) as rt::layer_norm_forward
 *  writes them. The backward writes dX only. */
bool layer_norm_forward(int64_t outer, int64_t inner, const float *x, const float *scale, const float *bias, float eps,
                        float *y, float *mean, float *invstd);
bool layer_norm_backward_data(int64_t outer, int64_t inner, const float *dy, const float *x, const float *scale,
                              const float *mean, const float *invstd, float *dx);

/** Softmax (not log-softmax) of X viewed as [outer, dim, inner] along the middle axis, and its gradient from Y. */
bool softmax_forward(int64_t outer, int64_t dim, int64_t inner, const float *x, float *y);
bool softmax_backward(int64_t outer, int64_t dim, int64_t inner, const float *dy, const float *y, float *dx);

}  // namespace cleave::rt::detail::onednn
