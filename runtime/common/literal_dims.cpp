// The rt.h kernels' overloads for literal dims (DimsLiteral): each builds the Dims and calls the backend's kernel.
#include "cleave/rt.h"

namespace cleave::rt {

void slice(DimsLiteral shape, DimsLiteral starts, DimsLiteral ends, DimsLiteral steps, const real *x, real *y) {
  slice(Dims(shape), Dims(starts), Dims(ends), Dims(steps), x, y);
}

void slice_backward(DimsLiteral shape, DimsLiteral starts, DimsLiteral ends, DimsLiteral steps, const real *dy,
                    real *dx) {
  slice_backward(Dims(shape), Dims(starts), Dims(ends), Dims(steps), dy, dx);
}

void region_copy(const void *src, DimsLiteral src_shape, DimsLiteral src_start, DimsLiteral extent,
                 DimsLiteral dst_start, void *dst, DimsLiteral dst_shape, size_t elem_size) {
  region_copy({Box{src, Dims(src_shape), Dims(src_start), Dims(extent), Dims(dst_start)}}, dst, Dims(dst_shape),
              elem_size);
}

void view_copy(const void *x, DimsLiteral shape, DimsLiteral strides, int64_t offset, void *y, size_t elem_size) {
  view_copy(x, Dims(shape), Dims(strides), offset, y, elem_size);
}

void view_copy(const void *x, DimsLiteral shape, DimsLiteral strides, int64_t offset, void *y, DimsLiteral y_strides,
               int64_t y_offset, size_t elem_size) {
  view_copy(x, Dims(shape), Dims(strides), offset, y, Dims(y_strides), y_offset, elem_size);
}

}  // namespace cleave::rt
