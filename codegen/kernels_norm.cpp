// BatchNormalization, softmax and the losses.
#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

std::string loss_shape(const Op &op, const Shape &scores) {
  std::string red = op.attr_string("reduction");
  std::string r = red == "none" ? "rt::Reduction::none" : red == "sum" ? "rt::Reduction::sum" : "rt::Reduction::mean";
  bool has_ignore = op.has_attr("ignore_index");
  return "rt::LossShape ls{" + num(scores[0]) + ", " + num(scores.size() > 1 ? scores[1] : 1) + ", " +
         num(prod(scores, 2)) + ", " + r + ", " + (has_ignore ? "true" : "false") + ", " +
         num(has_ignore ? op.attr_int("ignore_index") : -100) + ", 0};\n";
}

}  // namespace

bool is_norm_kind(OpKind kind) {
  switch (kind) {
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::SoftmaxCrossEntropyLossGrad:
    case OpKind::NegativeLogLikelihoodLoss:
    case OpKind::NegativeLogLikelihoodLossGrad:
    case OpKind::BatchNormalization:
    case OpKind::BatchNormalizationGrad:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::SoftmaxGrad:
    case OpKind::LogSoftmaxGrad:
      return true;
    default:
      return false;
  }
}

void check_norm_split(const KernelCall &call) {
  // These kernels only run on whole tensors yet.
  unsupported_split(call);
}

std::string norm_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  auto has_out = [&](size_t i) { return i < outs.size() && !outs[i].empty(); };
  (void)has_out;
  switch (op.kind) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::SoftmaxGrad:
    case OpKind::LogSoftmaxGrad: {
      const Shape &x = in_shapes[0];
      size_t axis = static_cast<size_t>(op.attr_int("axis", -1) < 0 ? static_cast<int64_t>(x.size()) - 1
                                                                     : op.attr_int("axis", -1));
      bool log = op.kind == OpKind::LogSoftmax || op.kind == OpKind::LogSoftmaxGrad;
      std::string dims = num(prod(x, 0, axis)) + ", " + num(x[axis]) + ", " + num(prod(x, axis + 1));
      if (op.kind == OpKind::Softmax || op.kind == OpKind::LogSoftmax)
        return "rt::softmax_forward(" + dims + ", " + in(0) + ", " + out(0) + ", " + (log ? "true" : "false") + ");";
      return "rt::softmax_backward(" + dims + ", " + in(0) + ", " + in(1) + ", " + out(0) + ", " +
             (log ? "true" : "false") + ");";
    }
    case OpKind::SoftmaxCrossEntropyLoss:
      return "{\n" + loss_shape(op, in_shapes[0]) + "rt::softmax_cross_entropy_forward(ls, " + in(0) + ", " + in(1) +
             ", " + or_null(ins.size() > 2 ? ins[2] : "") + ", " + out(0) + ", " +
             or_null(has_out(1) ? out(1) : "") + ");\n}";
    case OpKind::SoftmaxCrossEntropyLossGrad:
      return "{\n" + loss_shape(op, out_shapes[0]) + "rt::softmax_cross_entropy_backward(ls, " + in(0) + ", " + in(1) +
             ", " + in(2) + ", " + or_null(ins.size() > 3 ? ins[3] : "") + ", " + out(0) + ");\n}";
    case OpKind::NegativeLogLikelihoodLoss:
      return "{\n" + loss_shape(op, in_shapes[0]) + "rt::nll_forward(ls, " + in(0) + ", " + in(1) + ", " +
             or_null(ins.size() > 2 ? ins[2] : "") + ", " + out(0) + ");\n}";
    case OpKind::NegativeLogLikelihoodLossGrad:
      return "{\n" + loss_shape(op, out_shapes[0]) + "rt::nll_backward(ls, " + in(0) + ", " + in(2) + ", " +
             or_null(ins.size() > 3 ? ins[3] : "") + ", " + out(0) + ");\n}";
    case OpKind::BatchNormalization: {
      const Shape &x = in_shapes[0];
      std::string n = num(x[0]), c = num(x[1]), d = num(prod(x, 2));
      double eps = op.attr_float("epsilon", 1e-5), momentum = op.attr_float("momentum", 0.9);
      std::string code = "{\n";
      for (size_t o = 1; o <= 2; ++o)
        if (has_out(o)) code += copy_bytes(out(o), in(2 + o), x[1] * 4) + "\n";
      if (op.attr_int("training_mode", 0) != 0) {
        code += "rt::batch_norm_train_forward(" + n + ", " + c + ", " + d + ", " + in(0) + ", " + in(1) + ", " + in(2) +
                ", " + float_literal(eps) + ", " + float_literal(momentum) + ", " + out(0) + ", " +
                (has_out(1) ? out(1) : "nullptr") + ", " + (has_out(2) ? out(2) : "nullptr") + ", " +
                (has_out(3) ? out(3) : "nullptr") + ", " + (has_out(4) ? out(4) : "nullptr") + ");\n}";
      } else {
        if (has_out(3) || has_out(4))
          CLEAVE_USER_ERROR("op \"", op.name, "\" (BatchNormalization): saved statistics in inference mode are not "
                            "supported by codegen yet");
        code += "rt::batch_norm_infer_forward(" + n + ", " + c + ", " + d + ", " + in(0) + ", " + in(1) + ", " +
                in(2) + ", " + in(3) + ", " + in(4) + ", " + float_literal(eps) + ", " + out(0) + ");\n}";
      }
      return code;
    }
    case OpKind::BatchNormalizationGrad: {
      const Shape &x = in_shapes[1];
      return "rt::batch_norm_backward(" + num(x[0]) + ", " + num(x[1]) + ", " + num(prod(x, 2)) + ", " + in(0) + ", " +
             in(1) + ", " + in(2) + ", " + in(3) + ", " + in(4) + ", " + (has_out(0) ? out(0) : "nullptr") + ", " +
             (has_out(1) ? out(1) : "nullptr") + ", " + (has_out(2) ? out(2) : "nullptr") + ");";
    }
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace cleave::codegen
