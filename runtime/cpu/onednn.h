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

/** Where a convolution's kernel lies in W's memory: each kernel row (one output and input channel) holds `full`
 *  taps (spatial dims), of which the ConvShape's kernel is the box starting at `lo`. Empty: the whole row. A box
 *  lets a convolution whose dead taps were cut (conv.cpp) read and write W in place. */
struct KernelBox {
  Dims full, lo;
};

bool conv_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y,
                  const KernelBox &box = {});
bool conv_backward_data(const ConvShape &s, const real *dy, const real *w, real *dx, const KernelBox &box = {});
/** Writes the box of each kernel row only. */
bool conv_backward_filter(const ConvShape &s, const real *dy, const real *x, real *dw, const KernelBox &box = {});

bool max_pool_forward(const PoolShape &s, const real *x, real *y);
bool max_pool_backward(const PoolShape &s, const real *dy, const real *x, real *dx);
bool avg_pool_forward(const PoolShape &s, const real *x, real *y);
bool avg_pool_backward(const PoolShape &s, const real *dy, real *dx);

/** mean and var [c] receive the batch mean and biased variance. */
bool batch_norm_train_forward(int64_t n, int64_t c, int64_t d, const real *x, const real *scale, const real *bias,
                              real eps, real *y, real *mean, real *var);
bool batch_norm_backward(int64_t n, int64_t c, int64_t d, const real *dy, const real *x, const real *scale,
                         const real *saved_mean, const real *saved_invstd, real *dx, real *dscale, real *dbias);

/** Rows of [outer, inner]; bias may be null; mean and invstd [outer] (either may be null) as rt::layer_norm_forward
 *  writes them. The backward writes dX only. */
bool layer_norm_forward(int64_t outer, int64_t inner, const real *x, const real *scale, const real *bias, real eps,
                        real *y, real *mean, real *invstd);
bool layer_norm_backward_data(int64_t outer, int64_t inner, const real *dy, const real *x, const real *scale,
                              const real *mean, const real *invstd, real *dx);

/** Softmax (not log-softmax) of X viewed as [outer, dim, inner] along the middle axis, and its gradient from Y. */
bool softmax_forward(int64_t outer, int64_t dim, int64_t inner, const real *x, real *y);
bool softmax_backward(int64_t outer, int64_t dim, int64_t inner, const real *dy, const real *y, real *dx);

}  // namespace cleave::rt::detail::onednn
