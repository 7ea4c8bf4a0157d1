// The kernel of every supported op kind on local (shard) shapes, as runtime calls. Elementwise ops become rt::map
// with a CLEAVE_HD lambda, so the CPU and CUDA backends run the same body.
#include <cmath>
#include <numeric>

#include "codegen/fuse.h"
#include "codegen/kernels.h"
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
    // A plain-mean or sum loss split on its positions: each rank's share of the global mean or sum.
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::NegativeLogLikelihoodLoss:
    case OpKind::LayerNormalizationGrad:  // dscale/dB are sums over the rows; dX is never partial (rows are outputs)
      return true;
    default:
      return false;
  }
}

namespace kernel_util {

std::string num(int64_t v) { return std::to_string(v); }

int64_t prod(const Shape &s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

Shape tail(const Shape &s, size_t from) { return Shape(s.begin() + static_cast<long>(std::min(from, s.size())), s.end()); }

std::string or_null(const std::string &p) { return p.empty() ? "nullptr" : p; }

std::string copy_bytes(const std::string &dst, const std::string &src, int64_t bytes) {
  return "std::memcpy(" + dst + ", " + src + ", " + num(bytes) + ");";
}

void unsupported_split(const KernelCall &call) {
  std::string var;
  for (const auto &v : call.config->vars)
    if (!v.empty()) {
      var = v;
      break;
    }
  CLEAVE_USER_ERROR("op \"", call.node().name, "\" (", op_kind_name(call.node().kind), "): splitting var ", var,
                    " is not supported by codegen yet");
}

}  // namespace kernel_util

std::vector<int> KernelCall::axis_group(size_t axis) const {
  std::vector<int64_t> mine = plan::mesh_coords(config->mesh, index);
  std::vector<int> ranks;
  for (size_t i = 0; i < config->devices.size(); ++i) {
    std::vector<int64_t> c = plan::mesh_coords(config->mesh, static_cast<int64_t>(i));
    c[axis] = mine[axis];
    if (c == mine) ranks.push_back(config->devices[i]);
  }
  return ranks;
}

std::vector<size_t> KernelCall::axes_splitting(const std::string &var) const {
  std::vector<size_t> axes;
  for (size_t a = 0; a < config->vars.size(); ++a)
    if (config->vars[a] == var) axes.push_back(a);
  return axes;
}

namespace {

using namespace kernel_util;

/** Broadcasts operand `i` to the output shape if its shape differs (into a local vector named t<i>). */
/** Broadcasts an operand to the output shape into a scratch buffer if its shape differs. */
std::string bcast(const KernelCall &call, const std::string &ptr, const Shape &in, const Shape &out,
                  std::string &code) {
  if (in == out) return ptr;
  std::string tmp = call.scratch(prod(out));
  code += "rt::broadcast(" + dims_literal(in) + ", " + dims_literal(out) + ", " + ptr + ", " + tmp + ");\n";
  return tmp;
}

/** A one-input map; recorded in `call.map` so lowering can fuse it with its neighbours. */
std::string unary(const KernelCall &call, const std::string &expr) {
  MapSpec spec = elementwise(prod(call.out_shapes[0]), expr, {call.ins[0]}, call.outs[0]);
  call.map = spec;
  return map_code(spec);
}

/** A two-input map; operands of another shape than the output are broadcast first (then it is not fusable). */
std::string binary(const KernelCall &call, const std::string &expr) {
  const Shape &y = call.out_shapes[0];
  if (call.in_shapes[0] == y && call.in_shapes[1] == y) {
    MapSpec spec = elementwise(prod(y), expr, {call.ins[0], call.ins[1]}, call.outs[0]);
    call.map = spec;
    return map_code(spec);
  }
  std::string code;
  std::string a = bcast(call, call.ins[0], call.in_shapes[0], y, code);
  std::string b = bcast(call, call.ins[1], call.in_shapes[1], y, code);
  return code + map_code(elementwise(prod(y), expr, {a, b}, call.outs[0]));
}

const char *c_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i64: return "int64_t";
    case DType::i32: return "int32_t";
    case DType::boolean: return "uint8_t";
  }
  return "float";
}

/** An elementwise op over operands of any dtype: each input is broadcast to the output's local shape (into a typed
 *  temporary if needed) and bound to a pointer p<i>, the output to y, then `body` (a statement on index i) runs in
 *  an rt::map_index functor. */
std::string indexed(const KernelCall &call, const std::string &body) {
  const Graph &g = call.graph();
  const Op &op = call.node();
  const Shape &ys = call.out_shapes[0];
  std::string code = "{\n";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const char *t = c_type(g.tensor(op.inputs[i]).dtype);
    std::string p = "p" + num(static_cast<int64_t>(i));
    if (call.in_shapes[i] == ys) {
      code += "const " + std::string(t) + " *" + p + " = " + call.ins[i] + ";\n";
    } else {
      int64_t size = dtype_size(g.tensor(op.inputs[i]).dtype);
      std::string tmp = "reinterpret_cast<" + std::string(t) + " *>(" + call.scratch((prod(ys) * size + 3) / 4) + ")";
      code += "rt::broadcast_bytes(" + dims_literal(call.in_shapes[i]) + ", " + dims_literal(ys) + ", " +
              call.ins[i] + ", " + tmp + ", sizeof(" + t + "));\nconst " + t + " *" + p + " = " + tmp + ";\n";
    }
  }
  code += c_type(g.tensor(op.outputs[0]).dtype) + std::string(" *y = ") + call.outs[0] + ";\n";
  code += "rt::map_index(" + num(prod(ys)) + ", [=] CLEAVE_HD (int64_t i) { " + body + " });\n}";
  return code;
}

/** Max/Min over every input; NaN wins, as in the interpreter. */
std::string select_body(size_t n, const char *cmp) {
  std::string b = "auto m = p0[i]; ";
  for (size_t i = 1; i < n; ++i) {
    std::string p = "p" + num(static_cast<int64_t>(i)) + "[i]";
    b += "if (" + p + " != " + p + " || " + p + " " + cmp + " m) m = " + p + "; ";
  }
  return b + "y[i] = m;";
}

/** Pad on a shard: output index o reads X[o - pad_begin], so the local pads follow from the two boxes (negative
 *  values crop). */
std::string pad_code(const KernelCall &call) {
  const Op &op = call.node();
  std::vector<int64_t> pads = op.attr_ints("pads");
  size_t r = call.in_shapes[0].size();
  std::vector<int64_t> local(2 * r);
  for (size_t d = 0; d < r; ++d) {
    const plan::Interval &ib = call.in_boxes[0][d], &ob = call.out_boxes[0][d];
    local[d] = pads[d] + ib.begin - ob.begin;
    local[d + r] = ob.size() - call.in_shapes[0][d] - local[d];
  }
  return "rt::pad_constant(" + dims_literal(call.in_shapes[0]) + ", " + dims_literal(local) + ", " +
         float_literal(op.attr_float("value", 0.0)) + ", " + call.ins[0] + ", " + call.outs[0] + ");";
}

/** LayerNormalization(Grad): rows = the local leading dims, each row one whole set of normalised dims. */
std::string layer_norm_code(const KernelCall &call) {
  const Op &op = call.node();
  bool grad = op.kind == OpKind::LayerNormalizationGrad;
  const Shape &xs = call.in_shapes[grad ? 1 : 0];
  auto axis = static_cast<size_t>(op.attr_int("axis"));
  std::string rows = num(prod(xs, 0, axis)), inner = num(prod(xs, axis));
  auto opt_out = [&](size_t i) { return i < call.outs.size() ? or_null(call.outs[i]) : std::string("nullptr"); };
  if (!grad)
    return "rt::layer_norm_forward(" + rows + ", " + inner + ", " + call.ins[0] + ", " + call.ins[1] + ", " +
           (call.ins.size() > 2 ? or_null(call.ins[2]) : std::string("nullptr")) + ", " +
           float_literal(op.attr_float("epsilon", 1e-5)) + ", " + call.outs[0] + ", " + opt_out(1) + ", " +
           opt_out(2) + ");";
  return "rt::layer_norm_backward(" + rows + ", " + inner + ", " + call.ins[0] + ", " + call.ins[1] + ", " +
         call.ins[2] + ", " + call.ins[3] + ", " + call.ins[4] + ", " + opt_out(0) + ", " + opt_out(1) + ", " +
         opt_out(2) + ");";
}

}  // namespace

void check_kernel_split(const KernelCall &call) {
  const Graph &g = call.graph();
  const Op &op = call.node();
  if (is_window_kind(op.kind)) check_window_split(call);
  if (is_norm_kind(op.kind)) check_norm_split(call);
  if (op.kind == OpKind::Reshape) {
    // A block of rows stays a block of rows only when both boxes are the same contiguous element range.
    auto range = [](const plan::Box &b, const Shape &shape, int64_t &lo, int64_t &hi) {
      int64_t stride = 1;
      lo = 0;
      hi = 0;
      bool inner_full = true;
      for (size_t d = shape.size(); d-- > 0;) {
        if (!inner_full && b[d].size() != 1) return false;
        lo += b[d].begin * stride;
        hi += (b[d].end - 1) * stride;
        if (b[d].begin != 0 || b[d].end != shape[d]) inner_full = false;
        stride *= shape[d];
      }
      hi += 1;
      return true;
    };
    int64_t a0, a1, b0, b1;
    if (!range(call.in_boxes[0], g.tensor(op.inputs[0]).shape, a0, a1) ||
        !range(call.out_boxes[0], g.tensor(op.outputs[0]).shape, b0, b1) || a0 != b0 || a1 != b1)
      unsupported_split(call);
  }
}

std::string kernel_code(const KernelCall &call) {
  if (is_window_kind(call.node().kind)) return window_kernel_code(call);
  if (is_norm_kind(call.node().kind)) return norm_kernel_code(call);
  const Graph &g = call.graph();
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  switch (op.kind) {
    case OpKind::Relu: return unary(call, "a > 0.0f ? a : 0.0f");
    case OpKind::Neg: return unary(call, "-a");
    case OpKind::Exp: return unary(call, "std::exp(a)");
    case OpKind::Log: return unary(call, "std::log(a)");
    case OpKind::Sqrt: return unary(call, "std::sqrt(a)");
    case OpKind::Erf: return unary(call, "std::erf(a)");
    case OpKind::Sigmoid: return unary(call, "1.0f / (1.0f + std::exp(-a))");
    case OpKind::Tanh: return unary(call, "std::tanh(a)");
    case OpKind::Identity:
      return copy_bytes(out(0), in(0), prod(out_shapes[0]) * dtype_size(g.tensor(op.outputs[0]).dtype));
    case OpKind::Add: return binary(call, "a + b");
    case OpKind::Sub: return binary(call, "a - b");
    case OpKind::Mul: return binary(call, "a * b");
    case OpKind::Div: return binary(call, "a / b");
    case OpKind::Pow: return binary(call, "std::pow(a, b)");
    case OpKind::ReluGrad: return binary(call, "b > 0.0f ? a : 0.0f");
    case OpKind::SigmoidGrad: return binary(call, "a * b * (1.0f - b)");
    case OpKind::TanhGrad: return binary(call, "a * (1.0f - b * b)");
    case OpKind::SqrtGrad: return binary(call, "a * 0.5f / b");
    case OpKind::ErfGrad:
      return binary(call, "a * 1.12837916709551257f * std::exp(-b * b)");
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
    case OpKind::Reciprocal: return unary(call, "1.0f / a");
    case OpKind::Where: return indexed(call, "y[i] = p0[i] ? p1[i] : p2[i];");
    case OpKind::Cast: {
      DType to = g.tensor(op.outputs[0]).dtype;
      if (to == DType::boolean) return indexed(call, "y[i] = p0[i] != 0;");
      return indexed(call, "y[i] = static_cast<" + std::string(c_type(to)) + ">(p0[i]);");
    }
    case OpKind::Equal: return indexed(call, "y[i] = p0[i] == p1[i];");
    case OpKind::Less: return indexed(call, "y[i] = p0[i] < p1[i];");
    case OpKind::Greater: return indexed(call, "y[i] = p0[i] > p1[i];");
    case OpKind::LessOrEqual: return indexed(call, "y[i] = p0[i] <= p1[i];");
    case OpKind::GreaterOrEqual: return indexed(call, "y[i] = p0[i] >= p1[i];");
    case OpKind::Not: return indexed(call, "y[i] = !p0[i];");
    case OpKind::And: return indexed(call, "y[i] = p0[i] && p1[i];");
    case OpKind::Or: return indexed(call, "y[i] = p0[i] || p1[i];");
    case OpKind::Xor: return indexed(call, "y[i] = (p0[i] != 0) != (p1[i] != 0);");
    case OpKind::Max: return indexed(call, select_body(op.inputs.size(), ">"));
    case OpKind::Min: return indexed(call, select_body(op.inputs.size(), "<"));
    case OpKind::Pad: return pad_code(call);
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
      return "rt::reduce_max(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("axes")) + ", " + in(0) +
             ", " + out(0) + ", " + (op.kind == OpKind::ReduceMin ? "true" : "false") + ");";
    case OpKind::LayerNormalization:
    case OpKind::LayerNormalizationGrad:
      return layer_norm_code(call);
    default:
      CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): op kind not supported by codegen yet");
  }
}

}  // namespace cleave::codegen
