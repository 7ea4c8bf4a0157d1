// ConvTranspose: the convolution's data gradient (conv.cpp) plus a per-channel bias.
#include "cleave/rt.h"

namespace cleave::rt {

void conv_transpose_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y) {
  conv_backward_data(s, x, w, y);
  if (!b) return;
  int64_t plane = 1;
  for (int64_t d : s.x) plane *= d;
  for (int64_t p = 0; p < s.n * s.c; ++p) {
    real bias = b[p % s.c];
    for (int64_t i = 0; i < plane; ++i) y[p * plane + i] += bias;
  }
}

}  // namespace cleave::rt
