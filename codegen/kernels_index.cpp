// ArgMax/ArgMin, TopKIndices, CumSum and OneHot: runtime calls over [outer, len, inner] of the local buffers. Their
// descriptions keep the axis whole (an internal or opaque var), so a rank's part is a set of whole lines: batch and other splits
// need nothing but local shapes. GatherElements, ScatterElements, GatherND and GatherNDGrad likewise: the dims their
// indices address are read (or written) whole, every other dim of their operands comes from the same var, so the local
// buffers line up element for element (checked), and a split of GatherNDGrad's index tuples leaves partial sums.
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

/** The local buffers of slots `a` and `b` start at the same point on every dim but `skip` (SIZE_MAX: none). */
void need_aligned(const KernelCall &call, const plan::Box &a, const plan::Box &b, size_t skip) {
  for (size_t d = 0; d < a.size(); ++d)
    if (d != skip && a[d].begin != b[d].begin) unsupported_split(call);
}

std::string gather_scatter_code(const KernelCall &call) {
  const Op &op = call.node();
  need_dtype(call, op.input(0), real_dtype(), op.kind == OpKind::GatherNDGrad ? "dY" : "data");
  need_dtype(call, op.input(1), DType::i64, "indices");
  const std::string &ind = call.ins[1];
  switch (op.kind) {
    case OpKind::GatherElements: {
      auto axis = static_cast<size_t>(op.attr_int("axis"));
      need_aligned(call, call.in_boxes[0], call.in_boxes[1], axis);
      return "rt::gather_elements(" + dims_literal(call.in_shapes[0]) + ", " + dims_literal(call.in_shapes[1]) + ", " +
             num(static_cast<int64_t>(axis)) + ", " + ind + ", " + call.ins[0] + ", " + call.outs[0] + ");";
    }
    case OpKind::ScatterElements: {
      auto axis = static_cast<size_t>(op.attr_int("axis"));
      need_aligned(call, call.out_boxes[0], call.in_boxes[0], SIZE_MAX);
      need_aligned(call, call.out_boxes[0], call.in_boxes[1], axis);
      bool add = op.attr_string("reduction") == "add";
      return "rt::scatter_elements(" + dims_literal(call.out_shapes[0]) + ", " + dims_literal(call.in_shapes[1]) +
             ", " + num(static_cast<int64_t>(axis)) + ", " + ind + ", " + call.ins[0] + ", " + call.ins[2] + ", " +
             call.outs[0] + ", " + (add ? "true" : "false") + ");";
    }
    case OpKind::GatherND:
    case OpKind::GatherNDGrad: {
      bool fwd = op.kind == OpKind::GatherND;
      const Shape &data = fwd ? call.in_shapes[0] : call.out_shapes[0];
      return std::string(fwd ? "rt::gather_nd(" : "rt::gather_nd_backward(") + dims_literal(data) + ", " +
             dims_literal(call.in_shapes[1]) + ", " + num(op.attr_int("batch_dims", 0)) + ", " + ind + ", " +
             call.ins[0] + ", " + call.outs[0] + ");";
    }
    default:
      CLEAVE_CHECK(false, "not a gather or scatter kind: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace

bool is_index_kind(OpKind kind) {
  return kind == OpKind::ArgMax || kind == OpKind::ArgMin || kind == OpKind::TopKIndices || kind == OpKind::CumSum ||
         kind == OpKind::OneHot || kind == OpKind::GatherElements || kind == OpKind::ScatterElements ||
         kind == OpKind::GatherND || kind == OpKind::GatherNDGrad;
}

std::string index_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  auto axis = static_cast<size_t>(op.attr_int("axis", 0));
  auto flag = [&](const char *key) { return op.attr_int(key, 0) != 0 ? "true" : "false"; };
  switch (op.kind) {
    case OpKind::ArgMax:
    case OpKind::ArgMin:
      need_dtype(call, op.input(0), real_dtype(), "X");
      return "rt::arg_extreme(" + axis_view(call.in_shapes[0], axis) + ", " + call.ins[0] + ", " + call.outs[0] +
             ", " + (op.kind == OpKind::ArgMin ? "true" : "false") + ", " + flag("select_last_index") + ");";
    case OpKind::TopKIndices:
      need_dtype(call, op.input(0), real_dtype(), "X");
      return "rt::top_k(" + axis_view(call.in_shapes[0], axis) + ", " + call.ins[0] + ", " + call.outs[0] + ", " +
             num(op.attr_int("k")) + ", " + (op.attr_int("largest", 1) != 0 ? "true" : "false") + ");";
    case OpKind::CumSum:
      need_dtype(call, op.input(0), real_dtype(), "X");
      return "rt::cumsum(" + axis_view(call.in_shapes[0], axis) + ", " + call.ins[0] + ", " + call.outs[0] + ", " +
             flag("exclusive") + ", " + flag("reverse") + ");";
    case OpKind::OneHot:
      need_dtype(call, op.input(0), DType::i64, "indices");
      return "rt::one_hot(" + axis_view(call.out_shapes[0], axis) + ", " + call.ins[0] + ", " + call.ins[1] + ", " +
             call.outs[0] + ", " + num(dtype_size(call.graph().tensor(op.input(1)).dtype)) + ");";
    case OpKind::GatherElements:
    case OpKind::ScatterElements:
    case OpKind::GatherND:
    case OpKind::GatherNDGrad:
      return gather_scatter_code(call);
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace cleave::codegen
