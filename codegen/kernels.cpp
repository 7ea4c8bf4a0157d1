// The kernel of every supported op kind on local (shard) shapes, as runtime calls. Elementwise ops become rt::map
// with a CLEAVE_HD lambda, so the CPU and CUDA backends run the same body.
#include <cmath>
#include <numeric>

#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

bool partial_ok(OpKind kind) {
  switch (kind) {
    case OpKind::Gemm:
    case OpKind::MatMul:
    case OpKind::ReduceSum:
    case OpKind::Conv:
    case OpKind::ConvGradData:
    case OpKind::ConvGradFilter:
      return true;
    default:
      return false;
  }
}

bool needs_whole(OpKind kind) {
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

bool is_window(OpKind kind) {
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

namespace {

std::string num(int64_t v) { return std::to_string(v); }

int64_t prod(const Shape &s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

Shape tail(const Shape &s, size_t from) { return Shape(s.begin() + static_cast<long>(std::min(from, s.size())), s.end()); }

std::string or_null(const std::string &p) { return p.empty() ? "nullptr" : p; }

/** Broadcasts operand `i` to the output shape if its shape differs (into a local vector named t<i>). */
std::string bcast(const std::string &ptr, const Shape &in, const Shape &out, const std::string &tmp, std::string &code) {
  if (in == out) return ptr;
  code += "std::vector<float> " + tmp + "(" + num(prod(out)) + ");\nrt::broadcast(" + dims_literal(in) + ", " +
          dims_literal(out) + ", " + ptr + ", " + tmp + ".data());\n";
  return tmp + ".data()";
}

std::string unary(const std::string &expr, const std::vector<std::string> &ins, const std::vector<std::string> &outs,
                  const std::vector<Shape> &out_shapes) {
  return "rt::map(" + num(prod(out_shapes[0])) + ", [] CLEAVE_HD (float a) { return " + expr + "; }, " + outs[0] +
         ", " + ins[0] + ");";
}

std::string binary(const std::string &expr, const std::vector<std::string> &ins, const std::vector<Shape> &in_shapes,
                   const std::vector<std::string> &outs, const std::vector<Shape> &out_shapes) {
  std::string code = "{\n";
  std::string a = bcast(ins[0], in_shapes[0], out_shapes[0], "ta", code);
  std::string b = bcast(ins[1], in_shapes[1], out_shapes[0], "tb", code);
  code += "rt::map(" + num(prod(out_shapes[0])) + ", [] CLEAVE_HD (float a, float b) { return " + expr + "; }, " +
          outs[0] + ", static_cast<const float *>(" + a + "), static_cast<const float *>(" + b + "));\n}";
  return code;
}

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

std::string loss_shape(const Op &op, const Shape &scores) {
  std::string red = op.attr_string("reduction");
  std::string r = red == "none" ? "rt::Reduction::none" : red == "sum" ? "rt::Reduction::sum" : "rt::Reduction::mean";
  bool has_ignore = op.has_attr("ignore_index");
  return "rt::LossShape ls{" + num(scores[0]) + ", " + num(scores.size() > 1 ? scores[1] : 1) + ", " +
         num(prod(scores, 2)) + ", " + r + ", " + (has_ignore ? "true" : "false") + ", " +
         num(has_ignore ? op.attr_int("ignore_index") : -100) + ", 0};\n";
}

std::string copy_bytes(const std::string &dst, const std::string &src, int64_t bytes) {
  return "std::memcpy(" + dst + ", " + src + ", " + num(bytes) + ");";
}

}  // namespace

std::string kernel_code(const Graph &g, const Op &op, const std::vector<std::string> &ins,
                        const std::vector<Shape> &in_shapes, const std::vector<std::string> &outs,
                        const std::vector<Shape> &out_shapes) {
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  auto has_out = [&](size_t i) { return i < outs.size() && !outs[i].empty(); };
  switch (op.kind) {
    case OpKind::Relu: return unary("a > 0.0f ? a : 0.0f", ins, outs, out_shapes);
    case OpKind::Neg: return unary("-a", ins, outs, out_shapes);
    case OpKind::Exp: return unary("std::exp(a)", ins, outs, out_shapes);
    case OpKind::Log: return unary("std::log(a)", ins, outs, out_shapes);
    case OpKind::Sqrt: return unary("std::sqrt(a)", ins, outs, out_shapes);
    case OpKind::Erf: return unary("std::erf(a)", ins, outs, out_shapes);
    case OpKind::Sigmoid: return unary("1.0f / (1.0f + std::exp(-a))", ins, outs, out_shapes);
    case OpKind::Tanh: return unary("std::tanh(a)", ins, outs, out_shapes);
    case OpKind::Identity:
      return copy_bytes(out(0), in(0), prod(out_shapes[0]) * dtype_size(g.tensor(op.outputs[0]).dtype));
    case OpKind::Add: return binary("a + b", ins, in_shapes, outs, out_shapes);
    case OpKind::Sub: return binary("a - b", ins, in_shapes, outs, out_shapes);
    case OpKind::Mul: return binary("a * b", ins, in_shapes, outs, out_shapes);
    case OpKind::Div: return binary("a / b", ins, in_shapes, outs, out_shapes);
    case OpKind::Pow: return binary("std::pow(a, b)", ins, in_shapes, outs, out_shapes);
    case OpKind::ReluGrad: return binary("b > 0.0f ? a : 0.0f", ins, in_shapes, outs, out_shapes);
    case OpKind::SigmoidGrad: return binary("a * b * (1.0f - b)", ins, in_shapes, outs, out_shapes);
    case OpKind::TanhGrad: return binary("a * (1.0f - b * b)", ins, in_shapes, outs, out_shapes);
    case OpKind::SqrtGrad: return binary("a * 0.5f / b", ins, in_shapes, outs, out_shapes);
    case OpKind::ErfGrad:
      return binary("a * 1.12837916709551257f * std::exp(-b * b)", ins, in_shapes, outs, out_shapes);
    case OpKind::Reshape:
      return copy_bytes(out(0), in(0), prod(out_shapes[0]) * dtype_size(g.tensor(op.outputs[0]).dtype));
    case OpKind::Expand:
      return "rt::broadcast(" + dims_literal(in_shapes[0]) + ", " + dims_literal(out_shapes[0]) + ", " + in(0) +
             ", " + out(0) + ");";
    case OpKind::Transpose:
      return "rt::transpose(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("perm")) + ", " + in(0) +
             ", " + out(0) + ");";
    case OpKind::Gemm: {
      const Shape &a = in_shapes[0], &b = in_shapes[1], &y = out_shapes[0];
      bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
      int64_t k = ta ? a[0] : a[1];
      double alpha = op.attr_float("alpha", 1.0), beta = op.attr_float("beta", 1.0);
      std::string code;
      bool bias = op.input(2) != kNoTensor && !ins[2].empty();
      if (bias)
        code += "rt::broadcast(" + dims_literal(in_shapes[2]) + ", " + dims_literal(y) + ", " + in(2) + ", " + out(0) +
                ");\n";
      code += "rt::gemm(" + std::string(ta ? "true" : "false") + ", " + (tb ? "true" : "false") + ", " + num(y[0]) +
              ", " + num(y[1]) + ", " + num(k) + ", " + float_literal(alpha) + ", " + in(0) + ", " + num(a[1]) + ", " +
              in(1) + ", " + num(b[1]) + ", " + (bias ? float_literal(beta) : "0.0f") + ", " + out(0) + ", " +
              num(y[1]) + ");";
      return code;
    }
    case OpKind::MatMul: {
      const Shape &a = in_shapes[0], &b = in_shapes[1], &y = out_shapes[0];
      if (a.size() != 2 || b.size() != 2)
        CLEAVE_USER_ERROR("op \"", op.name, "\" (MatMul): only 2-D MatMul is supported by codegen yet");
      return "rt::gemm(false, false, " + num(y[0]) + ", " + num(y[1]) + ", " + num(a[1]) + ", 1.0f, " + in(0) + ", " +
             num(a[1]) + ", " + in(1) + ", " + num(b[1]) + ", 0.0f, " + out(0) + ", " + num(y[1]) + ");";
    }
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
      return "rt::reduce(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("axes")) + ", " + in(0) +
             ", " + out(0) + ", " + (op.kind == OpKind::ReduceMean ? "true" : "false") + ");";
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
    case OpKind::SGDUpdate:
      return "rt::sgd_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " +
             float_literal(op.attr_float("lr")) + ", " + float_literal(op.attr_float("weight_decay", 0.0)) + ", " +
             out(0) + ");";
    case OpKind::MomentumUpdate:
      return "rt::momentum_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " + in(2) + ", " +
             float_literal(op.attr_float("lr")) + ", " + float_literal(op.attr_float("momentum", 0.9)) + ", " +
             float_literal(op.attr_float("weight_decay", 0.0)) + ", " +
             (op.attr_int("nesterov", 0) ? "true" : "false") + ", " + out(0) + ", " + out(1) + ");";
    case OpKind::AdamUpdate:
      return "rt::adam_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " + in(2) + ", " + in(3) +
             ", " + float_literal(op.attr_float("lr")) + ", " + float_literal(op.attr_float("beta1", 0.9)) + ", " +
             float_literal(op.attr_float("beta2", 0.999)) + ", " + float_literal(op.attr_float("eps", 1e-8)) + ", " +
             float_literal(op.attr_float("weight_decay", 0.0)) + ", " + (op.attr_int("decoupled", 0) ? "true" : "false") +
             ", step, " + out(0) + ", " + out(1) + ", " + out(2) + ");";
    default:
      CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): op kind not supported by codegen yet");
  }
}

}  // namespace cleave::codegen
