#include <algorithm>

#include "ir/interp/kernels.h"
#include "ir/shape_rules.h"

namespace cleave::interp {

std::string KernelArgs::label() const {
  return detail::concat("op \"", op.name, "\" (", op_kind_name(op.kind), ")");
}

const Value &KernelArgs::in(size_t i) const {
  if (!has_in(i)) CLEAVE_USER_ERROR(label(), ": required input ", i, " is missing");
  return *ins[i];
}

Value &KernelArgs::out(size_t i) const {
  if (!has_out(i)) CLEAVE_USER_ERROR(label(), ": required output ", i, " is missing");
  return *outs[i];
}

void KernelArgs::expect_out_shape(size_t i, const Shape &shape) const {
  if (!has_out(i)) return;
  CLEAVE_CHECK(outs[i]->shape == shape, label(), ": output ", i, " has shape ", shape_str(outs[i]->shape),
               " but the kernel computes ", shape_str(shape));
}

std::vector<int64_t> strides_of(const Shape &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

Shape broadcast_shape(const KernelArgs &k, const Shape &a, const Shape &b) {
  return broadcast_shapes(a, b, k.label());
}

std::vector<int64_t> broadcast_index_map(const Shape &in_shape, const Shape &out_shape) {
  CLEAVE_CHECK(in_shape.size() <= out_shape.size(), shape_str(in_shape), " vs ", shape_str(out_shape));
  size_t off = out_shape.size() - in_shape.size();
  std::vector<int64_t> in_strides = strides_of(in_shape);
  int64_t n = num_elements(out_shape);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < n; ++f) {
    unravel(f, out_shape, idx);
    int64_t src = 0;
    for (size_t d = 0; d < in_shape.size(); ++d) {
      CLEAVE_CHECK(in_shape[d] == 1 || in_shape[d] == out_shape[d + off], shape_str(in_shape), " vs ",
                   shape_str(out_shape));
      if (in_shape[d] != 1) src += idx[d + off] * in_strides[d];
    }
    map[static_cast<size_t>(f)] = src;
  }
  return map;
}

void unravel(int64_t flat, const Shape &shape, std::vector<int64_t> &idx) {
  idx.assign(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
}

int64_t norm_axis(const KernelArgs &k, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) CLEAVE_USER_ERROR(k.label(), ": axis ", axis, " out of range for rank ", rank);
  return a;
}

std::vector<int64_t> ints_or(const Op &op, const std::string &key, size_t n, int64_t def) {
  if (op.has_attr(key)) return op.attr_ints(key);
  return std::vector<int64_t>(n, def);
}

}  // namespace cleave::interp
