// Host-side argument checks and index geometry shared by the cpu and cuda backends.
#include "common/shapes.h"

#include <string>

namespace cleave::rt::host {

void check_conv_shape(const ConvShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.w.size() != sp || s.y.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    fail("conv: spatial ranks of x, w, y, strides, dilations and pads (2 per dim) disagree");
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0)
    fail("conv: group " + std::to_string(s.group) + " does not divide channels " + std::to_string(s.c) + " -> " +
         std::to_string(s.m));
  for (size_t d = 0; d < sp; ++d) {
    // Floor division: the local pads of a block may be negative (rt.h).
    int64_t span = s.x[d] + s.pads[d] + s.pads[d + sp] - s.dilations[d] * (s.w[d] - 1) - 1;
    int64_t expect = (span >= 0 ? span / s.strides[d] : -((-span + s.strides[d] - 1) / s.strides[d])) + 1;
    if (s.y[d] != expect)
      fail("conv: output dim " + std::to_string(d) + " is " + std::to_string(s.y[d]) + ", expected " +
           std::to_string(expect));
  }
}

void check_pool_ranks(const PoolShape &s) {
  size_t sp = s.x.size();
  if (sp == 0 || s.y.size() != sp || s.kernel.size() != sp || s.strides.size() != sp || s.dilations.size() != sp ||
      s.pads.size() != 2 * sp)
    fail("pool: spatial ranks of x, y, kernel, strides, dilations and pads (2 per dim) disagree");
  for (const Dims *v : {&s.x_begin, &s.y_begin, &s.x_full, &s.dx_begin, &s.dx})
    if (!v->empty() && v->size() != sp) fail("pool: a spatial block field has the wrong rank");
}

int64_t slice_len(int64_t start, int64_t end, int64_t step) {
  if (step == 0) fail("slice: step 0");
  int64_t len = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
  return len > 0 ? len : 0;
}

void slice_geometry(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, Dims &out, Dims &st,
                    int64_t &base) {
  size_t r = shape.size();
  if (starts.size() != r || ends.size() != r || steps.size() != r) fail("slice: one start/end/step per dim expected");
  out.assign(r, 0);
  st.assign(r, 0);
  base = 0;
  int64_t s = 1;
  for (size_t d = r; d-- > 0;) {
    out[d] = slice_len(starts[d], ends[d], steps[d]);
    st[d] = s * steps[d];
    if (out[d] > 0) base += starts[d] * s;
    s *= shape[d];
  }
}

}  // namespace cleave::rt::host
