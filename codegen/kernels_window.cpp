// Conv, pools and their gradients.
#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

std::string conv_shape(const Op &op, const Shape &x, const Shape &w, const Shape &y) {
  size_t sp = x.size() - 2;
  std::vector<int64_t> strides = op.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = op.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> dil = op.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  return "rt::ConvShape cs{" + num(x[0]) + ", " + num(x[1]) + ", " + num(w[0]) + ", " + num(op.attr_int("group", 1)) +
         ", " + dims_literal(tail(x, 2)) + ", " + dims_literal(tail(w, 2)) + ", " + dims_literal(tail(y, 2)) + ", " +
         dims_literal(strides) + ", " + dims_literal(pads) + ", " + dims_literal(dil) + "};\n";
}

std::string pool_shape(const Op &op, const Shape &x, const Shape &y, bool has_kernel) {
  size_t sp = x.size() - 2;
  std::vector<int64_t> kernel = has_kernel ? op.attr_ints("kernel_shape") : std::vector<int64_t>{};
  std::vector<int64_t> strides = op.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = op.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> dil = op.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  return "rt::PoolShape ps{" + num(x[0] * x[1]) + ", " + dims_literal(tail(x, 2)) + ", " + dims_literal(tail(y, 2)) +
         ", " + dims_literal(kernel) + ", " + dims_literal(strides) + ", " + dims_literal(pads) + ", " +
         dims_literal(dil) + ", " + (op.attr_int("count_include_pad", 0) ? "true" : "false") + "};\n";
}

}  // namespace

bool is_window_kind(OpKind kind) {
  switch (kind) {
    case OpKind::Conv:
    case OpKind::ConvGradData:
    case OpKind::ConvGradFilter:
    case OpKind::MaxPool:
    case OpKind::MaxPoolGrad:
    case OpKind::AveragePool:
    case OpKind::AveragePoolGrad:
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalAveragePoolGrad:
      return true;
    default:
      return false;
  }
}

void check_window_split(const KernelCall &call) {
  // The spatial dims (>= 2) of every operand must be whole: no halo/pad adjustment yet.
  const Graph &g = call.graph();
  const Op &op = call.node();
  auto whole_spatial = [&](const plan::Box &b, const Shape &shape) {
    for (size_t d = 2; d < b.size(); ++d)
      if (b[d].begin != 0 || b[d].end != shape[d]) return false;
    return true;
  };
  for (size_t s = 0; s < op.inputs.size(); ++s)
    if (op.inputs[s] != kNoTensor && !call.in_boxes[s].empty() &&
        !whole_spatial(call.in_boxes[s], g.tensor(op.inputs[s]).shape))
      unsupported_split(call);
  for (size_t s = 0; s < op.outputs.size(); ++s)
    if (op.outputs[s] != kNoTensor && !whole_spatial(call.out_boxes[s], g.tensor(op.outputs[s]).shape))
      unsupported_split(call);
  if (op.kind == OpKind::Conv || op.kind == OpKind::ConvGradData || op.kind == OpKind::ConvGradFilter)
    if (op.attr_int("group", 1) != 1) unsupported_split(call);
  if (op.kind == OpKind::MaxPool && op.output(1) != kNoTensor) unsupported_split(call);
}

std::string window_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  auto has_out = [&](size_t i) { return i < outs.size() && !outs[i].empty(); };
  (void)has_out;
  switch (op.kind) {
    case OpKind::Conv:
      return "{\n" + conv_shape(op, in_shapes[0], in_shapes[1], out_shapes[0]) + "rt::conv_forward(cs, " + in(0) +
             ", " + in(1) + ", " + or_null(ins.size() > 2 ? ins[2] : "") + ", " + out(0) + ");\n}";
    case OpKind::ConvGradData:
      return "{\n" + conv_shape(op, out_shapes[0], in_shapes[1], in_shapes[0]) + "rt::conv_backward_data(cs, " +
             in(0) + ", " + in(1) + ", " + out(0) + ");\n}";
    case OpKind::ConvGradFilter:
      return "{\n" + conv_shape(op, in_shapes[1], out_shapes[0], in_shapes[0]) + "rt::conv_backward_filter(cs, " +
             in(0) + ", " + in(1) + ", " + out(0) + ");\n}";
    case OpKind::MaxPool:
      return "{\n" + pool_shape(op, in_shapes[0], out_shapes[0], true) + "rt::max_pool_forward(ps, " + in(0) + ", " +
             out(0) + ", " + (has_out(1) ? out(1) : "nullptr") + ");\n}";
    case OpKind::MaxPoolGrad:
      return "{\n" + pool_shape(op, in_shapes[1], in_shapes[0], true) + "rt::max_pool_backward(ps, " + in(0) + ", " +
             in(1) + ", " + out(0) + ");\n}";
    case OpKind::AveragePool:
      return "{\n" + pool_shape(op, in_shapes[0], out_shapes[0], true) + "rt::avg_pool_forward(ps, " + in(0) + ", " +
             out(0) + ");\n}";
    case OpKind::AveragePoolGrad:
      return "{\n" + pool_shape(op, out_shapes[0], in_shapes[0], true) + "rt::avg_pool_backward(ps, " + in(0) + ", " +
             out(0) + ");\n}";
    case OpKind::GlobalAveragePool:
      return "rt::global_avg_pool_forward(" + num(in_shapes[0][0] * in_shapes[0][1]) + ", " +
             num(prod(in_shapes[0], 2)) + ", " + in(0) + ", " + out(0) + ");";
    case OpKind::GlobalAveragePoolGrad:
      return "rt::global_avg_pool_backward(" + num(out_shapes[0][0] * out_shapes[0][1]) + ", " +
             num(prod(out_shapes[0], 2)) + ", " + in(0) + ", " + out(0) + ");";
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace cleave::codegen
