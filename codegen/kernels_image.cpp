// InstanceNormalization and Resize (and their gradients): both work on whole (n, c) planes, so a rank's part is
// its local planes (batch and channel splits); the descriptions keep the spatial dims opaque.
#include <cstdio>

#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

std::string double_literal(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

std::string opt(const std::vector<std::string> &v, size_t i) { return i < v.size() ? or_null(v[i]) : "nullptr"; }

std::string instance_norm_code(const KernelCall &call) {
  const Op &op = call.node();
  bool grad = op.kind == OpKind::InstanceNormalizationGrad;
  const Shape &xs = call.in_shapes[grad ? 1 : 0];
  std::string planes = num(xs[0]) + ", " + num(xs[1]) + ", " + num(prod(xs, 2));
  const std::vector<std::string> &in = call.ins, &out = call.outs;
  if (!grad)
    return "rt::instance_norm_forward(" + planes + ", " + in[0] + ", " + in[1] + ", " + in[2] + ", " +
           float_literal(op.attr_float("epsilon", 1e-5)) + ", " + out[0] + ", " + opt(out, 1) + ", " + opt(out, 2) +
           ");";
  return "rt::instance_norm_backward(" + planes + ", " + in[0] + ", " + in[1] + ", " + or_null(in[2]) + ", " + in[3] + ", " +
         in[4] + ", " + opt(out, 0) + ", " + opt(out, 1) + ", " + opt(out, 2) + ");";
}

std::string resize_code(const KernelCall &call) {
  const Op &op = call.node();
  bool grad = op.kind == OpKind::ResizeGrad;
  const Shape &xs = grad ? call.out_shapes[0] : call.in_shapes[0];
  const Shape &ys = grad ? call.in_shapes[0] : call.out_shapes[0];
  std::vector<double> scales = op.attr_floats("scales");
  std::string sc = "{";
  for (size_t d = 2; d < scales.size(); ++d) sc += (d > 2 ? ", " : "") + double_literal(scales[d]);
  sc += "}";
  const std::string &ctm = op.attr_string("coordinate_transformation_mode");
  std::string code = "{\nrt::ResizeShape rs{" + num(xs[0] * xs[1]) + ", " + dims_literal(tail(xs, 2)) + ", " +
                     dims_literal(tail(ys, 2)) + ", " + sc + ", rt::ResizeMode::" + op.attr_string("mode") +
                     ", rt::ResizeCoord::" + ctm + ", rt::ResizeNearest::" + op.attr_string("nearest_mode");
  if (op.attr_string("mode") == "cubic")
    code += ", " + double_literal(op.attr_float("cubic_coeff_a")) + ", " +
            (op.attr_int("exclude_outside") != 0 ? "true" : "false");
  code += "};\n";
  return code + (grad ? "rt::resize_backward(rs, " : "rt::resize_forward(rs, ") + call.ins[0] + ", " + call.outs[0] +
         ");\n}";
}

}  // namespace

bool is_image_kind(OpKind kind) {
  return kind == OpKind::InstanceNormalization || kind == OpKind::InstanceNormalizationGrad ||
         kind == OpKind::Resize || kind == OpKind::ResizeGrad;
}

std::string image_kernel_code(const KernelCall &call) {
  switch (call.node().kind) {
    case OpKind::InstanceNormalization:
    case OpKind::InstanceNormalizationGrad:
      return instance_norm_code(call);
    case OpKind::Resize:
    case OpKind::ResizeGrad:
      return resize_code(call);
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(call.node().kind));
  }
  return {};
}

}  // namespace cleave::codegen
