// ArgMax/ArgMin, CumSum and OneHot: runtime calls over [outer, len, inner] of the local buffers. Their descriptions
// keep the axis whole (an internal or opaque var), so a rank's part is a set of whole lines: batch and other splits
// need nothing but local shapes.
#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

/** "outer, len, inner" of `s` around `axis`. */
std::string axis_view(const Shape &s, size_t axis) {
  return num(prod(s, 0, axis)) + ", " + num(s[axis]) + ", " + num(prod(s, axis + 1));
}

void need_dtype(const KernelCall &call, TensorId t, DType want, const char *what) {
  DType dt = call.graph().tensor(t).dtype;
  if (dt != want)
    CLEAVE_USER_ERROR("op \"", call.node().name, "\" (", op_kind_name(call.node().kind), "): ", what, " of dtype ",
                      dtype_name(dt), " is not supported by codegen yet (only ", dtype_name(want), ")");
}

}  // namespace

bool is_index_kind(OpKind kind) {
  return kind == OpKind::ArgMax || kind == OpKind::ArgMin || kind == OpKind::CumSum || kind == OpKind::OneHot;
}

std::string index_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  auto flag = [&](const char *key) { return op.attr_int(key, 0) != 0 ? "true" : "false"; };
  switch (op.kind) {
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      need_dtype(call, op.input(0), DType::f32, "X");
      return "rt::arg_extreme(" + axis_view(call.in_shapes[0], axis) + ", " + call.ins[0] + ", " + call.outs[0] +
             ", " + (op.kind == OpKind::ArgMin ? "true" : "false") + ", " + flag("select_last_index") + ");";
    case OpKind::CumSum:
      need_dtype(call, op.input(0), DType::f32, "X");
      return "rt::cumsum(" + axis_view(call.in_shapes[0], axis) + ", " + call.ins[0] + ", " + call.outs[0] + ", " +
             flag("exclusive") + ", " + flag("reverse") + ");";
    case OpKind::OneHot:
      need_dtype(call, op.input(0), DType::i64, "indices");
      return "rt::one_hot(" + axis_view(call.out_shapes[0], axis) + ", " + call.ins[0] + ", " + call.ins[1] + ", " +
             call.outs[0] + ", " + num(dtype_size(call.graph().tensor(op.input(1)).dtype)) + ");";
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace cleave::codegen
