// The kernel of every supported op kind on local (shard) shapes, as runtime calls. Elementwise ops become rt::map
// with a CLEAVE_HD lambda, so the CPU and CUDA backends run the same body.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "codegen/fuse.h"
#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave::codegen {

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
  return "rt::copy(" + dst + ", " + src + ", " + num(bytes) + ");";
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

std::string operands_arg(const KernelCall &call, size_t a, size_t b) {
  if (!call.exact_low) return "";
  TensorId ta = call.node().input(a), tb = call.node().input(b);
  if (ta == kNoTensor || tb == kNoTensor) return "";
  DType t = (*call.exact_low)[static_cast<size_t>(ta)];
  if (t == DType::f32 || (*call.exact_low)[static_cast<size_t>(tb)] != t) return "";
  return t == DType::bf16 ? ", rt::Operands::bf16" : ", rt::Operands::fp16";
}

}  // namespace kernel_util

std::vector<int> KernelCall::axis_group(size_t axis) const {
  int me = config->devices[static_cast<size_t>(index)];
  for (std::vector<int> &members : plan::axis_groups(config->devices, config->mesh, axis))
    if (std::find(members.begin(), members.end(), me) != members.end()) return members;
  CLEAVE_CHECK(false, "rank ", me, " is in no group of mesh axis ", axis);
  return {};
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

/** Input `i` as a float_literal when it is a one-element, finite real_dtype() constant of the model (an exponent, an
 *  epsilon, a scale); "" otherwise. */
std::string constant_literal(const KernelCall &call, size_t i) {
  const Tensor &t = call.graph().tensor(call.node().inputs.at(i));
  if (t.role != Role::constant || t.dtype != real_dtype() || prod(t.shape) != 1 ||
      t.data.size() != static_cast<size_t>(dtype_size(t.dtype)))
    return "";
  double v = data_as_doubles(t)[0];
  return std::isfinite(v) ? float_literal(v) : "";
}

/** `expr` over operands a, b with operand `k` replaced by `literal` and the other renamed to a. */
std::string bind_operand(const std::string &expr, size_t k, const std::string &literal) {
  return rename_words(expr, [&](const std::string &w) -> std::string {
    if (w != "a" && w != "b") return w;
    return static_cast<size_t>(w[0] - 'a') == k ? "(" + literal + ")" : "a";
  });
}

/** How an operand of shape `in` broadcasts to `out` when it does so as one block: right-aligned, its dims other than
 *  1 are out's and lie in one run of out's dims (inside the run out's dims may be 1 too), so output element i reads
 *  its element i / inner % mid. nullopt when it broadcasts another way. */
std::optional<std::pair<int64_t, int64_t>> block_broadcast(const Shape &in, const Shape &out) {
  if (in.size() > out.size()) return std::nullopt;
  Shape padded(out.size() - in.size(), 1);
  padded.insert(padded.end(), in.begin(), in.end());
  size_t first = out.size(), last = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    if (padded[d] == 1) continue;
    if (padded[d] != out[d]) return std::nullopt;
    first = std::min(first, d);
    last = d;
  }
  if (first == out.size()) return std::pair{prod(out), int64_t{1}};  // one element
  for (size_t d = first; d <= last; ++d)
    if (padded[d] != out[d]) return std::nullopt;
  return std::pair{prod(out, last + 1), prod(out, first, last + 1)};
}

/** A two-input map; an operand of another shape than the output is read in place by rt::map_block when it broadcasts
 *  as one block (the map then fuses with the maps after it), else broadcast into scratch first (and the map is not
 *  fusable). A one-element constant operand is written into the functor instead, so the map reads one array. */
std::string binary(const KernelCall &call, const std::string &expr) {
  const Shape &y = call.out_shapes[0];
  for (size_t k = 0; k < 2; ++k) {
    std::string literal = constant_literal(call, k);
    if (!literal.empty() && call.in_shapes[1 - k] == y) {
      MapSpec spec = elementwise(prod(y), bind_operand(expr, k, literal), {call.ins[1 - k]}, call.outs[0]);
      call.map = spec;
      return map_code(spec);
    }
  }
  if (call.in_shapes[0] == y && call.in_shapes[1] == y) {
    MapSpec spec = elementwise(prod(y), expr, {call.ins[0], call.ins[1]}, call.outs[0]);
    call.map = spec;
    return map_code(spec);
  }
  // One operand the output's shape and the other broadcasting as one block of its dims (a bias row, a per-channel
  // scale): the block is read in place, not broadcast into an output-sized scratch buffer first.
  for (size_t k = 0; k < 2; ++k) {
    std::optional<std::pair<int64_t, int64_t>> block = block_broadcast(call.in_shapes[k], y);
    if (call.in_shapes[1 - k] != y || !block) continue;
    // The block operand comes first (x0): operand k's letter becomes a.
    std::string swapped = k == 0 ? expr : rename_words(expr, [](const std::string &w) -> std::string {
      return w == "a" ? "b" : w == "b" ? "a" : w;
    });
    MapSpec spec = elementwise(prod(y), swapped, {call.ins[k], call.ins[1 - k]}, call.outs[0]);
    spec.block_inner = block->first;
    spec.block_mid = block->second;
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
    default: break;  // lower() refuses graphs with other dtypes (codegen_supports)
  }
  CLEAVE_CHECK(false, "no C type for dtype ", dtype_name(t));
  return "float";
}

/** An elementwise op over operands of any dtype: each input is broadcast to the output's local shape (into a typed
 *  temporary if needed) and bound to a pointer p<i>, the output to y, then `body` (a statement on index i) runs in
 *  an rt::map_index functor. */
std::string indexed(const KernelCall &call, const std::string &body) {
  const Graph &g = call.graph();
  const Op &op = call.node();
  const Shape &ys = call.out_shapes[call.outs[0].empty() && call.outs.size() > 1 ? 1 : 0];
  std::string code = "{\n";
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const char *t = c_type(g.tensor(op.inputs[i]).dtype);
    std::string p = "p" + num(static_cast<int64_t>(i));
    if (call.in_shapes[i] == ys) {
      code += "const " + std::string(t) + " *" + p + " = " + call.ins[i] + ";\n";
    } else {
      int64_t size = dtype_size(g.tensor(op.inputs[i]).dtype);
      std::string tmp = "reinterpret_cast<" + std::string(t) + " *>(" + call.scratch((prod(ys) * size + dtype_size(real_dtype()) - 1) / dtype_size(real_dtype())) + ")";
      code += "rt::broadcast_bytes(" + dims_literal(call.in_shapes[i]) + ", " + dims_literal(ys) + ", " +
              call.ins[i] + ", " + tmp + ", sizeof(" + t + "));\nconst " + t + " *" + p + " = " + tmp + ";\n";
    }
  }
  // Outputs: y (the first; may be absent when others exist), y1, y2, ... for the rest that are present.
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    if (call.outs[o].empty()) continue;
    CLEAVE_CHECK(call.out_shapes[o] == ys, "op ", op.name, ": output ", o, " is not in the broadcast shape");
    code += c_type(g.tensor(op.outputs[o]).dtype) + std::string(o == 0 ? " *y = " : " *y" + num(int64_t(o)) + " = ") +
            call.outs[o] + ";\n";
  }
  code += "rt::map_index(" + num(prod(ys)) + ", [=] CLEAVE_HD (int64_t i) { " + body + " });\n}";
  return code;
}

constexpr double kSeluAlpha = 1.67326319217681884765625, kSeluGamma = 1.05070102214813232421875;

/** ONNX's default alpha of an activation kind or its gradient (the importer always sets it; kept for hand-written IR). */
double default_alpha(OpKind k) {
  switch (k) {
    case OpKind::LeakyRelu: case OpKind::LeakyReluGrad: return 0.01;
    case OpKind::HardSigmoid: case OpKind::HardSigmoidGrad: return 0.2;
    case OpKind::Selu: case OpKind::SeluGrad: return kSeluAlpha;
    default: return 1.0;
  }
}

/** The float expression over `a` (X) of an activation or rounding kind: the interpreter's kernel
 *  (ir/interp/activations.cpp) with its comparisons in the same order, so NaN propagates the same way. */
std::string activation_expr(const Op &op) {
  auto f = [](double v) { return float_literal(v); };
  double alpha = op.attr_float("alpha", default_alpha(op.kind));
  switch (op.kind) {
    case OpKind::Clip: {
      bool lo = op.has_attr("min"), hi = op.has_attr("max");
      double l = lo ? op.attr_float("min") : 0, h = hi ? op.attr_float("max") : 0;
      // min(max(x, l), h): below l the result is min(l, h); NaN falls through both tests.
      std::string upper = hi ? "(a > " + f(h) + " ? " + f(h) + " : a)" : "a";
      return lo ? "a < " + f(l) + " ? " + f(hi && l > h ? h : l) + " : " + upper : upper;
    }
    case OpKind::HardSigmoid: {
      std::string t = "(" + f(alpha) + " * a + " + f(op.attr_float("beta", 0.5)) + ")";
      return t + " <= 0.0f ? 0.0f : (" + t + " >= 1.0f ? 1.0f : " + t + ")";
    }
    case OpKind::HardSwish: return "a * ((a + 3.0f) <= 0.0f ? 0.0f : ((a + 3.0f) >= 6.0f ? 6.0f : (a + 3.0f))) / 6.0f";
    case OpKind::Gelu: return "0.5f * a * (1.0f + std::erf(a * " + f(M_SQRT1_2) + "))";
    case OpKind::LeakyRelu: return "a > 0.0f ? a : a * " + f(alpha);
    case OpKind::Elu: return "a <= 0.0f ? " + f(alpha) + " * std::expm1(a) : a";
    case OpKind::Selu: {
      double g = op.attr_float("gamma", kSeluGamma);
      return "a <= 0.0f ? " + f(g * alpha) + " * std::expm1(a) : " + f(g) + " * a";
    }
    case OpKind::Celu: return "a <= 0.0f ? " + f(alpha) + " * std::expm1(a / " + f(alpha) + ") : a";
    case OpKind::Softplus: return "a > 0.0f ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a))";
    case OpKind::Softsign: return "a / (1.0f + std::fabs(a))";
    case OpKind::ThresholdedRelu: return "a <= " + f(alpha) + " ? 0.0f : a";
    case OpKind::Abs: return "std::fabs(a)";
    case OpKind::Sign: return "a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : 0.0f)";
    case OpKind::Floor: return "std::floor(a)";
    case OpKind::Ceil: return "std::ceil(a)";
    case OpKind::Round: return "std::nearbyint(a)";  // halves to even in the default rounding mode
    case OpKind::RoundToBf16: return "cleave::round_bf16(a)";
    case OpKind::RoundToFp16: return "cleave::round_fp16(a)";
    default: break;
  }
  CLEAVE_CHECK(false, "not an activation kind: ", op_kind_name(op.kind));
  return "";
}

/** dX over `a` (dY) and `b` (X) of an activation gradient kind, as its interpreter kernel computes it. */
std::string activation_grad_expr(const Op &op) {
  auto f = [](double v) { return float_literal(v); };
  double alpha = op.attr_float("alpha", default_alpha(op.kind));
  switch (op.kind) {
    case OpKind::ClipGrad: {
      std::string cut;
      if (op.has_attr("min")) cut += "b <= " + f(op.attr_float("min"));
      if (op.has_attr("max")) cut += (cut.empty() ? "" : " || ") + std::string("b >= ") + f(op.attr_float("max"));
      return cut.empty() ? "a" : "(" + cut + ") ? 0.0f : a";
    }
    case OpKind::HardSigmoidGrad: {
      std::string t = "(" + f(alpha) + " * b + " + f(op.attr_float("beta", 0.5)) + ")";
      return t + " > 0.0f && " + t + " < 1.0f ? a * " + f(alpha) + " : 0.0f";
    }
    case OpKind::HardSwishGrad: return "b < -3.0f ? 0.0f : (b <= 3.0f ? a * (b / 3.0f + 0.5f) : a)";
    // Phi(x) + x phi(x), with 1/sqrt(2) and 1/sqrt(2 pi) as literals.
    case OpKind::GeluGrad:
      return "a * (0.5f * (1.0f + std::erf(b * " + f(M_SQRT1_2) + ")) + b * std::exp(-0.5f * b * b) * " +
             f(0.5 * M_2_SQRTPI * M_SQRT1_2) + ")";
    case OpKind::LeakyReluGrad: return "b > 0.0f ? a : a * " + f(alpha);
    case OpKind::EluGrad: return "b <= 0.0f ? a * " + f(alpha) + " * std::exp(b) : a";
    case OpKind::SeluGrad: {
      double g = op.attr_float("gamma", kSeluGamma);
      return "b <= 0.0f ? a * " + f(g * alpha) + " * std::exp(b) : a * " + f(g);
    }
    case OpKind::CeluGrad: return "b <= 0.0f ? a * std::exp(b / " + f(alpha) + ") : a";
    case OpKind::SoftplusGrad: return "a / (1.0f + std::exp(-b))";
    case OpKind::SoftsignGrad: return "a / ((1.0f + std::fabs(b)) * (1.0f + std::fabs(b)))";
    case OpKind::ThresholdedReluGrad: return "b <= " + f(alpha) + " ? 0.0f : a";
    default: break;
  }
  CLEAVE_CHECK(false, "not an activation gradient kind: ", op_kind_name(op.kind));
  return "";
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
  if (op.has_attr("mode"))
    CLEAVE_USER_ERROR("op \"", op.name, "\" (Pad): ", op.attr_string("mode"),
                      "-mode padding has no CPU kernel yet (only constant)");
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
  // The scale is read for dX only: without dX (a norm of a graph input) no shard holds it.
  return "rt::layer_norm_backward(" + rows + ", " + inner + ", " + call.ins[0] + ", " + call.ins[1] + ", " +
         or_null(call.ins[2]) + ", " + call.ins[3] + ", " + call.ins[4] + ", " + opt_out(0) + ", " + opt_out(1) + ", " +
         opt_out(2) + ");";
}

/** Row-major strides of `s`. */
Shape strides_of(const Shape &s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

/** ReduceSum, ReduceMax or ReduceMin of an integer tensor (the runtime's reductions take rt::real): per output element
 *  i, a loop over the reduced dims with the input's strides written in. */
std::string integer_reduce(const KernelCall &call) {
  const Op &op = call.node();
  DType t = call.graph().tensor(op.inputs[0]).dtype;
  const char *ct = c_type(t);
  const Shape &x = call.in_shapes[0];
  Shape strides = strides_of(x);
  std::vector<int64_t> axes = op.attr_ints("axes");
  auto reduced = [&](size_t d) { return std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end(); };
  std::string base = "0", loops, offset = "base";
  int64_t div = 1;
  for (size_t d = x.size(); d-- > 0;) {
    if (reduced(d)) {
      std::string r = "r" + num(static_cast<int64_t>(d));
      loops += "for (int64_t " + r + " = 0; " + r + " < " + num(x[d]) + "; ++" + r + ") ";
      offset += " + " + r + " * " + num(strides[d]);
    } else {
      base += " + (i / " + num(div) + " % " + num(x[d]) + ") * " + num(strides[d]);
      div *= x[d];
    }
  }
  bool i64 = t == DType::i64;
  std::string init = op.kind == OpKind::ReduceSum ? "0"
                     : op.kind == OpKind::ReduceMax ? (i64 ? "(-9223372036854775807LL - 1)" : "(-2147483647 - 1)")
                                                    : (i64 ? "9223372036854775807LL" : "2147483647");
  std::string step = op.kind == OpKind::ReduceSum ? "acc += v;"
                     : op.kind == OpKind::ReduceMax ? "acc = v > acc ? v : acc;"
                                                    : "acc = v < acc ? v : acc;";
  return "{\nconst " + std::string(ct) + " *p0 = " + call.ins[0] + ";\n" + ct + " *y = " + call.outs[0] +
         ";\nrt::map_index(" + num(prod(call.out_shapes[0])) + ", [=] CLEAVE_HD (int64_t i) { int64_t base = " + base +
         "; " + ct + " acc = " + init + "; " + loops + "{ " + ct + " v = p0[" + offset + "]; " + step +
         " } y[i] = acc; });\n}";
}

/** Per-dim start and step of a Slice/SliceGrad over the dense tensor `full` (dims not in `axes`: 0 and 1). */
struct SliceAttrs {
  Shape starts, steps;
};
SliceAttrs slice_attrs(const Op &op, const Shape &full) {
  SliceAttrs a{Shape(full.size(), 0), Shape(full.size(), 1)};
  const std::vector<int64_t> &axes = op.attr_ints("axes"), &starts = op.attr_ints("starts");
  std::vector<int64_t> steps = op.attr_ints("steps", std::vector<int64_t>(axes.size(), 1));
  for (size_t i = 0; i < axes.size(); ++i) {
    a.starts[static_cast<size_t>(axes[i])] = starts[i];
    a.steps[static_cast<size_t>(axes[i])] = steps[i];
  }
  return a;
}

/** The local form of a slice: the elements i in `strided_box` of the sliced side sit at start + step * i of the
 *  dense side, whose buffer holds `dense_box`. Gives local starts/ends per dim; false if an element lies outside the
 *  buffer. */
bool local_slice(const SliceAttrs &a, const plan::Box &strided_box, const plan::Box &dense_box, Shape &starts,
                 Shape &ends) {
  starts.clear();
  ends.clear();
  for (size_t d = 0; d < a.starts.size(); ++d) {
    int64_t count = strided_box[d].size(), step = a.steps[d];
    int64_t s = a.starts[d] + step * strided_box[d].begin - dense_box[d].begin;
    int64_t last = s + step * (count - 1);
    if (count > 0 && (std::min(s, last) < 0 || std::max(s, last) >= dense_box[d].size())) return false;
    starts.push_back(s);
    ends.push_back(s + step * count);
  }
  return true;
}

/** The number of elements of the strided sequence (start, step, len) that fall in [lo, hi), and the position of the
 *  first one (len if none). */
std::pair<int64_t, int64_t> hits_in(int64_t start, int64_t step, int64_t len, int64_t lo, int64_t hi) {
  int64_t n = 0, first = len;
  for (int64_t i = 0; i < len; ++i) {
    int64_t p = start + step * i;
    if (p < lo || p >= hi) continue;
    if (n++ == 0) first = i;
  }
  return {n, first};
}

/** An int64 view of an indices operand: the pointer itself, or a converted copy named `tmp` (i32 indices). */
std::string int64_indices(const std::string &ptr, DType dtype, int64_t n, const std::string &tmp, std::string &code) {
  if (dtype == DType::i64) return ptr;
  code += "std::vector<int64_t> " + tmp + "(" + ptr + ", " + ptr + " + " + num(n) + ");\n";
  return tmp + ".data()";
}

std::string parts_shapes(const std::vector<Shape> &shapes, size_t from, size_t to) {
  std::string s = "{";
  for (size_t i = from; i < to; ++i) s += (i > from ? ", " : "") + std::string("rt::Dims") + dims_literal(shapes[i]);
  return s + "}";
}

/** numpy matmul on local shapes: 1-D operands promoted, batch dims broadcast, transA / transB as GEMM flags (the
 *  leading dimension is the stored row length either way). One GEMM when the batch folds into the rows (B without
 *  batch dims, A not transposed), one strided-batched GEMM when each operand's batch is whole or absent, else a loop
 *  over the broadcast batch index. */
std::string matmul_code(const KernelCall &call) {
  const Shape &sa = call.in_shapes[0], &sb = call.in_shapes[1];
  const std::string &a = call.ins[0], &b = call.ins[1], &y = call.outs[0];
  const Op &op = call.node();
  const bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
  Shape pa = sa.size() == 1 ? Shape{1, sa[0]} : sa, pb = sb.size() == 1 ? Shape{sb[0], 1} : sb;
  const int64_t lda = pa.back(), ldb = pb.back();
  const int64_t m = ta ? pa.back() : pa[pa.size() - 2], k = ta ? pa[pa.size() - 2] : pa.back();
  const int64_t n = tb ? pb[pb.size() - 2] : pb.back();
  Shape ba(pa.begin(), pa.end() - 2), bb(pb.begin(), pb.end() - 2);
  size_t rank = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), rank - ba.size(), 1);
  bb.insert(bb.begin(), rank - bb.size(), 1);
  Shape by(rank);
  for (size_t d = 0; d < rank; ++d) by[d] = std::max(ba[d], bb[d]);
  int64_t batch = prod(by), batch_a = prod(ba), batch_b = prod(bb);
  std::string operands = operands_arg(call, 0, 1);
  std::string flags = std::string(ta ? "true" : "false") + ", " + (tb ? "true" : "false") + ", ";
  auto gemm = [&](int64_t rows, const std::string &pa_, const std::string &pb_, const std::string &py_) {
    return "rt::gemm(" + flags + num(rows) + ", " + num(n) + ", " + num(k) + ", 1.0f, " + pa_ + ", " + num(lda) +
           ", " + pb_ + ", " + num(ldb) + ", 0.0f, " + py_ + ", " + num(n) + operands + ");";
  };
  if (batch_b == 1 && !ta) return gemm(batch * m, a, b, y);  // A's batch and rows are one [batch * m, k] matrix
  if ((batch_a == 1 || ba == by) && (batch_b == 1 || bb == by))
    return "rt::gemm_strided_batched(" + flags + num(m) + ", " + num(n) + ", " + num(k) + ", 1.0f, " + a + ", " +
           num(lda) + ", " + num(batch_a == 1 ? 0 : m * k) + ", " + b + ", " + num(ldb) + ", " +
           num(batch_b == 1 ? 0 : k * n) + ", 0.0f, " + y + ", " + num(n) + ", " + num(m * n) + ", " + num(batch) +
           operands + ");";
  // General broadcast: walk the output batch index, mapping it to each operand's (size-1 dims read index 0).
  Shape sta = strides_of(ba), stb = strides_of(bb);
  for (size_t d = 0; d < rank; ++d) {
    if (ba[d] == 1) sta[d] = 0;
    if (bb[d] == 1) stb[d] = 0;
  }
  return "{\nconst int64_t dims[] = " + dims_literal(by) + ", sa[] = " + dims_literal(sta) + ", sb[] = " +
         dims_literal(stb) + ";\nfor (int64_t i = 0; i < " + num(batch) +
         "; ++i) {\n  int64_t r = i, oa = 0, ob = 0;\n  for (int d = " + num(static_cast<int64_t>(rank)) +
         "; d-- > 0;) {\n    oa += (r % dims[d]) * sa[d];\n    ob += (r % dims[d]) * sb[d];\n    r /= dims[d];\n  }\n  " +
         gemm(m, a + " + oa * " + num(m * k), b + " + ob * " + num(k * n), y + " + i * " + num(m * n)) + "\n}\n}";
}

/** An optimizer's learning rate at the current step: its base rate under the run's schedule (rt::TrainingRun::lr). */
std::string scheduled_lr(const Op &op) { return "run.lr(" + float_literal(op.attr_float("lr")) + ", step)"; }

}  // namespace

void check_kernel_split(const KernelCall &call) {
  const Graph &g = call.graph();
  const Op &op = call.node();
  if (is_window_kind(op.kind)) check_window_split(call);
  if (is_norm_kind(op.kind)) check_norm_split(call);
  // Slice, SliceGrad, Split and Concat derive their local geometry from the boxes (kernel_code); a box the local
  // kernel cannot express (an element outside the local buffer, a part missing) is refused here.
  if (op.kind == OpKind::Slice || op.kind == OpKind::SliceGrad) {
    bool fwd = op.kind == OpKind::Slice;
    const plan::Box &strided = fwd ? call.out_boxes[0] : call.in_boxes[0];
    const plan::Box &dense = fwd ? call.in_boxes[0] : call.out_boxes[0];
    const Shape &full = g.tensor(fwd ? op.inputs[0] : op.outputs[0]).shape;
    const Shape &sliced = g.tensor(fwd ? op.outputs[0] : op.inputs[0]).shape;
    SliceAttrs a = slice_attrs(op, full);
    Shape starts, ends;
    CLEAVE_CHECK(strided.size() == full.size() && dense.size() == full.size(), "op ", op.name,
                 ": a shard of a slice without a region");
    if (!local_slice(a, strided, dense, starts, ends)) unsupported_split(call);
    // SliceGrad writes zeros wherever no local dY lands: every slice element inside the dX box must be local.
    if (!fwd)
      for (size_t d = 0; d < full.size(); ++d) {
        auto [hits, first] = hits_in(a.starts[d], a.steps[d], sliced[d], dense[d].begin, dense[d].end);
        if (hits != strided[d].size() || (hits > 0 && first != strided[d].begin)) unsupported_split(call);
      }
  }
  if (op.kind == OpKind::Concat) {
    size_t axis = static_cast<size_t>(op.attr_int("axis"));
    const plan::Box &out = call.out_boxes[0];
    int64_t offset = 0, total = 0;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Shape &s = g.tensor(op.inputs[i]).shape;
      // Input i covers [offset, offset + s[axis]) of the output; locally it must hold exactly its overlap.
      int64_t lo = std::max(out[axis].begin, offset), hi = std::min(out[axis].end, offset + s[axis]);
      const plan::Box &b = call.in_boxes[i];
      if (hi > lo ? b[axis].begin != lo - offset || b[axis].end != hi - offset : b[axis].size() != 0)
        unsupported_split(call);
      total += std::max<int64_t>(0, hi - lo);
      for (size_t d = 0; d < out.size(); ++d)
        if (d != axis && b[d] != out[d]) unsupported_split(call);
      offset += s[axis];
    }
    if (total != out[axis].size()) unsupported_split(call);
  }
  if (op.kind == OpKind::Reshape &&
      !plan::reshape_boxes_ok(call.in_boxes[0], g.tensor(op.inputs[0]).shape, call.out_boxes[0],
                              g.tensor(op.outputs[0]).shape))
    unsupported_split(call);
}

namespace {

/** "{shape}, {global offset}, {global strides}" of this rank's part of output 0: by them the counter-based draws
 *  (Dropout, RandomLike) find each element's global index, so a split draws what the whole tensor would. */
std::string global_position(const KernelCall &call) {
  Shape offset;
  for (const auto &iv : call.out_boxes[0]) offset.push_back(iv.begin);
  return dims_literal(call.out_shapes[0]) + ", " + dims_literal(offset) + ", " +
         dims_literal(strides_of(call.graph().tensor(call.node().outputs[0]).shape));
}

/** RandomLike keyed by `key` (the pass; 0 in a validation pass, as the interpreter's inference mode). */
std::string random_like_code(const KernelCall &call, const std::string &key) {
  const Op &op = call.node();
  return "rt::random_like(" + global_position(call) + ", " + num(op.attr_int("seed", 0)) + "ull, " + key + ", " +
         (op.attr_int("normal", 0) ? "true" : "false") + ", " + float_literal(op.attr_float("a", 0.0)) + ", " +
         float_literal(op.attr_float("b", 1.0)) + ", " + call.outs.at(0) + ");";
}

}  // namespace

std::string validation_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  if (op.kind == OpKind::RandomLike) return random_like_code(call, "0");
  if (is_norm_kind(op.kind)) return norm_validation_code(call);
  if (op.kind == OpKind::Dropout && op.attr_int("training_mode", 0) != 0) {
    std::string code = copy_bytes(call.outs.at(0), call.ins.at(0), prod(call.in_shapes[0]) * dtype_size(real_dtype()));
    if (call.outs.size() > 1 && !call.outs[1].empty())
      code += "\nrt::fill_bytes(" + call.outs[1] + ", 1, " + num(prod(call.in_shapes[0])) + ");";
    return code;
  }
  return {};
}

std::string kernel_code(const KernelCall &call) {
  if (is_window_kind(call.node().kind)) return window_kernel_code(call);
  if (is_norm_kind(call.node().kind)) return norm_kernel_code(call);
  if (is_image_kind(call.node().kind)) return image_kernel_code(call);
  if (is_index_kind(call.node().kind)) return index_kernel_code(call);
  const Graph &g = call.graph();
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  // The runtime's layout kernels move float32 (integer tensors of this kind fold at import), except a Slice of unit
  // steps, a box copy of any element size (EmbeddingBag's bags of run-time indices).
  bool box_slice = op.kind == OpKind::Slice && slice_attrs(op, g.tensor(op.inputs[0]).shape).steps ==
                                                   Shape(g.tensor(op.inputs[0]).shape.size(), 1);
  if (op.kind == OpKind::Concat || op.kind == OpKind::Split || (op.kind == OpKind::Slice && !box_slice) ||
      op.kind == OpKind::SliceGrad || op.kind == OpKind::Gather || op.kind == OpKind::GatherGrad ||
      op.kind == OpKind::MatMul) {
    DType dt = g.tensor(op.outputs[0]).dtype;
    if (dt != real_dtype())
      CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): ", dtype_name(dt),
                        " data is not supported by codegen yet");
  }
  // Integer arithmetic (counts and masks from comparisons or labels): typed loops, not the float maps. An integer
  // division by zero gives 0, as Mod's does.
  if (op.outputs[0] != kNoTensor && is_integer(g.tensor(op.outputs[0]).dtype)) {
    switch (op.kind) {
      case OpKind::Add: return indexed(call, "y[i] = p0[i] + p1[i];");
      case OpKind::Sub: return indexed(call, "y[i] = p0[i] - p1[i];");
      case OpKind::Mul: return indexed(call, "y[i] = p0[i] * p1[i];");
      case OpKind::Div: return indexed(call, "y[i] = p1[i] == 0 ? 0 : p0[i] / p1[i];");
      case OpKind::Neg: return indexed(call, "y[i] = -p0[i];");
      case OpKind::Abs: return indexed(call, "y[i] = p0[i] < 0 ? -p0[i] : p0[i];");
      default: break;
    }
  }
  switch (op.kind) {
    case OpKind::Relu: return unary(call, "a <= 0.0f ? 0.0f : a");  // NaN stays NaN
    case OpKind::Neg: return unary(call, "-a");
    case OpKind::Exp: return unary(call, "std::exp(a)");
    case OpKind::Log: return unary(call, "std::log(a)");
    case OpKind::Sqrt: return unary(call, "std::sqrt(a)");
    case OpKind::Erf: return unary(call, "std::erf(a)");
    case OpKind::Sigmoid: return unary(call, "1.0f / (1.0f + std::exp(-a))");
    case OpKind::Tanh: return unary(call, "std::tanh(a)");
    // std:: overloads: sinf etc. for float (also in CUDA device code), sin etc. for double.
    case OpKind::Sin: return unary(call, "std::sin(a)");
    case OpKind::Cos: return unary(call, "std::cos(a)");
    case OpKind::Tan: return unary(call, "std::tan(a)");
    case OpKind::Asin: return unary(call, "std::asin(a)");
    case OpKind::Acos: return unary(call, "std::acos(a)");
    case OpKind::Atan: return unary(call, "std::atan(a)");
    case OpKind::Sinh: return unary(call, "std::sinh(a)");
    case OpKind::Cosh: return unary(call, "std::cosh(a)");
    case OpKind::Asinh: return unary(call, "std::asinh(a)");
    case OpKind::Acosh: return unary(call, "std::acosh(a)");
    case OpKind::Atanh: return unary(call, "std::atanh(a)");
    case OpKind::Identity:
      return copy_bytes(out(0), in(0), prod(out_shapes[0]) * dtype_size(g.tensor(op.outputs[0]).dtype));
    case OpKind::Add: return binary(call, "a + b");
    case OpKind::Sub: return binary(call, "a - b");
    case OpKind::Mul: return binary(call, "a * b");
    case OpKind::Div: return binary(call, "a / b");
    case OpKind::Pow:
      // x^2 (a variance, torch's LayerNorm export) as x * x: the same correctly rounded value without a libm call.
      return binary(call, constant_literal(call, 1) == float_literal(2.0) ? "a * a" : "std::pow(a, b)");
    case OpKind::PowGrad: {
      // (dY, A, B) -> (dA?, dB?), both in the broadcast shape (autodiff sums them down to A's and B's shapes).
      bool da = !outs[0].empty(), db = outs.size() > 1 && !outs[1].empty();
      std::string exponent = constant_literal(call, 2);
      if (da && !db && !exponent.empty() && in_shapes[0] == out_shapes[0] && in_shapes[1] == out_shapes[0]) {
        // A constant exponent c: dA = dY * (c * A^(c-1)), torch's order; A^1 is A.
        std::string power = exponent == float_literal(2.0) ? "b" : "std::pow(b, " + exponent + " - 1.0f)";
        MapSpec spec =
            elementwise(prod(out_shapes[0]), "a * (" + exponent + " * " + power + ")", {in(0), in(1)}, out(0));
        call.map = spec;
        return map_code(spec);
      }
      std::string body;
      if (da) body += "y[i] = p0[i] * p2[i] * std::pow(p1[i], p2[i] - 1.0f); ";
      if (db) body += "y1[i] = p0[i] * std::pow(p1[i], p2[i]) * std::log(p1[i]); ";
      return indexed(call, body);
    }
    case OpKind::ReluGrad: return binary(call, "b <= 0.0f ? 0.0f : a");
    case OpKind::SigmoidGrad: return binary(call, "a * b * (1.0f - b)");
    case OpKind::TanhGrad: return binary(call, "a * (1.0f - b * b)");
    case OpKind::SqrtGrad: return binary(call, "a * 0.5f / b");
    case OpKind::ErfGrad:
      return binary(call, std::string("a * 1.12837916709551257") + (real_dtype() == DType::f64 ? "" : "f") +
                              " * std::exp(-b * b)");  // 2 / sqrt(pi)
    case OpKind::SinGrad: return binary(call, "a * std::cos(b)");
    case OpKind::CosGrad: return binary(call, "-a * std::sin(b)");
    case OpKind::TanGrad: return binary(call, "a * (1.0f + b * b)");
    case OpKind::AsinGrad: return binary(call, "a / std::sqrt(1.0f - b * b)");
    case OpKind::AcosGrad: return binary(call, "-a / std::sqrt(1.0f - b * b)");
    case OpKind::AtanGrad: return binary(call, "a / (1.0f + b * b)");
    case OpKind::SinhGrad: return binary(call, "a * std::cosh(b)");
    case OpKind::CoshGrad: return binary(call, "a * std::sinh(b)");
    case OpKind::AsinhGrad: return binary(call, "a / std::sqrt(b * b + 1.0f)");
    case OpKind::AcoshGrad: return binary(call, "a / std::sqrt(b * b - 1.0f)");
    case OpKind::AtanhGrad: return binary(call, "a / (1.0f - b * b)");
    case OpKind::Clip: case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Gelu: case OpKind::LeakyRelu:
    case OpKind::Elu: case OpKind::Selu: case OpKind::Celu: case OpKind::Softplus: case OpKind::Softsign:
    case OpKind::ThresholdedRelu:
    case OpKind::Abs: case OpKind::Sign: case OpKind::Floor: case OpKind::Ceil: case OpKind::Round:
    case OpKind::RoundToBf16: case OpKind::RoundToFp16:
      return unary(call, activation_expr(op));
    case OpKind::ClipGrad: case OpKind::HardSigmoidGrad: case OpKind::HardSwishGrad: case OpKind::GeluGrad:
    case OpKind::LeakyReluGrad: case OpKind::EluGrad: case OpKind::SeluGrad: case OpKind::CeluGrad:
    case OpKind::SoftplusGrad: case OpKind::SoftsignGrad: case OpKind::ThresholdedReluGrad:
      return binary(call, activation_grad_expr(op));
    case OpKind::PRelu: return binary(call, "a > 0.0f ? a : b * a");
    case OpKind::PReluGrad: {
      // (dY, X, slope) -> (dX?, dslope?), both in X's shape (autodiff sums dslope down to slope's shape).
      std::string body;
      if (!outs[0].empty()) body += "y[i] = p1[i] > 0.0f ? p0[i] : p2[i] * p0[i]; ";
      if (outs.size() > 1 && !outs[1].empty()) body += "y1[i] = p1[i] > 0.0f ? 0.0f : p1[i] * p0[i]; ";
      return indexed(call, body);
    }
    case OpKind::Reshape:
      return copy_bytes(out(0), in(0), prod(out_shapes[0]) * dtype_size(g.tensor(op.outputs[0]).dtype));
    case OpKind::Expand: {
      DType t = g.tensor(op.outputs[0]).dtype;
      if (t == real_dtype())
        return "rt::broadcast(" + dims_literal(in_shapes[0]) + ", " + dims_literal(out_shapes[0]) + ", " + in(0) +
               ", " + out(0) + ");";
      // Masks (bool) and indices (int64) expand by their bytes.
      return "rt::broadcast_bytes(" + dims_literal(in_shapes[0]) + ", " + dims_literal(out_shapes[0]) + ", " + in(0) +
             ", " + out(0) + ", " + num(dtype_size(t)) + ");";
    }
    case OpKind::Transpose:
      return "rt::transpose(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("perm")) + ", " + in(0) +
             ", " + out(0) + ");";
    case OpKind::Gemm: {
      const Shape &a = in_shapes[0], &b = in_shapes[1], &y = out_shapes[0];
      bool ta = op.attr_int("transA", 0) != 0, tb = op.attr_int("transB", 0) != 0;
      // Under transA, A [r..., m] (and B [r..., n]) sums every leading dim r: the rows of a contiguous shard.
      int64_t k = ta ? prod(a, 0, a.size() - 1) : a[1];
      double alpha = op.attr_float("alpha", 1.0), beta = op.attr_float("beta", 1.0);
      std::string code;
      bool bias = op.input(2) != kNoTensor && !ins[2].empty();
      if (bias)
        code += "rt::broadcast(" + dims_literal(in_shapes[2]) + ", " + dims_literal(y) + ", " + in(2) + ", " + out(0) +
                ");\n";
      code += "rt::gemm(" + std::string(ta ? "true" : "false") + ", " + (tb ? "true" : "false") + ", " + num(y[0]) +
              ", " + num(y[1]) + ", " + num(k) + ", " + float_literal(alpha) + ", " + in(0) + ", " + num(a.back()) +
              ", " + in(1) + ", " + num(b.back()) + ", " + (bias ? float_literal(beta) : "0.0f") + ", " + out(0) +
              ", " + num(y[1]) + operands_arg(call, 0, 1) + ");";
      return code;
    }
    case OpKind::MatMul: return matmul_code(call);
    case OpKind::Concat: {
      std::string parts = "{";
      for (size_t i = 0; i < ins.size(); ++i)
        parts += std::string(i ? ", " : "") + "static_cast<const " + real_type() + " *>(" + in(i) + ")";
      return "rt::concat(" + parts + "}, " + parts_shapes(in_shapes, 0, in_shapes.size()) + ", " +
             num(op.attr_int("axis")) + ", " + out(0) + ");";
    }
    case OpKind::Split: {
      size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
      const plan::Box &ib = call.in_boxes[0];
      // Each output is the local slice [offset of its part + its box] of the local input (plain rt::split when the
      // parts tile the local input along the axis).
      bool tiles = true;
      int64_t offset = 0, at = ib[axis].begin;
      std::string slices;
      for (size_t o = 0; o < outs.size(); ++o) {
        const plan::Box &ob = call.out_boxes[o];
        Shape starts, ends;
        for (size_t d = 0; d < ob.size(); ++d) {
          int64_t s = ob[d].begin + (d == axis ? offset : 0) - ib[d].begin;
          if (s < 0 || s + ob[d].size() > ib[d].size()) unsupported_split(call);
          starts.push_back(s);
          ends.push_back(s + ob[d].size());
          if (d != axis && ob[d] != ib[d]) tiles = false;
        }
        if (ob[axis].begin + offset != at) tiles = false;
        at = ob[axis].end + offset;
        offset += g.tensor(op.outputs[o]).shape[axis];
        slices += "rt::slice(" + dims_literal(in_shapes[0]) + ", " + dims_literal(starts) + ", " + dims_literal(ends) +
                  ", " + dims_literal(Shape(starts.size(), 1)) + ", " + in(0) + ", " + out(o) + ");\n";
      }
      if (!tiles || at != ib[axis].end) return "{\n" + slices + "}";
      Shape sizes;
      std::string parts = "{";
      for (size_t o = 0; o < outs.size(); ++o) {
        sizes.push_back(out_shapes[o][axis]);
        parts += (o ? ", " : "") + out(o);
      }
      return "rt::split(" + dims_literal(in_shapes[0]) + ", " + num(static_cast<int64_t>(axis)) + ", " +
             dims_literal(sizes) + ", " + in(0) + ", " + parts + "});";
    }
    case OpKind::Slice:
    case OpKind::SliceGrad: {
      bool fwd = op.kind == OpKind::Slice;
      const Shape &full = g.tensor(fwd ? op.inputs[0] : op.outputs[0]).shape;
      SliceAttrs a = slice_attrs(op, full);
      Shape starts, ends;
      if (!local_slice(a, fwd ? call.out_boxes[0] : call.in_boxes[0], fwd ? call.in_boxes[0] : call.out_boxes[0],
                       starts, ends))
        unsupported_split(call);
      const Shape &dense = fwd ? in_shapes[0] : out_shapes[0];
      DType dt = g.tensor(op.outputs[0]).dtype;
      if (fwd && dt != real_dtype()) {  // box_slice above: unit steps
        Shape extent(starts.size()), zeros(starts.size(), 0);
        for (size_t d = 0; d < starts.size(); ++d) extent[d] = ends[d] - starts[d];
        return "rt::region_copy(" + in(0) + ", " + dims_literal(dense) + ", " + dims_literal(starts) + ", " +
               dims_literal(extent) + ", " + dims_literal(zeros) + ", " + out(0) + ", " + dims_literal(out_shapes[0]) +
               ", " + num(static_cast<int64_t>(dtype_size(dt))) + ");";
      }
      return std::string(fwd ? "rt::slice(" : "rt::slice_backward(") + dims_literal(dense) + ", " +
             dims_literal(starts) + ", " + dims_literal(ends) + ", " + dims_literal(a.steps) + ", " + in(0) + ", " +
             out(0) + ");";
    }
    case OpKind::Gather:
    case OpKind::GatherGrad: {
      bool fwd = op.kind == OpKind::Gather;
      const Tensor &data = g.tensor(fwd ? op.inputs[0] : op.outputs[0]);
      size_t axis = static_cast<size_t>(op.attr_int("axis", 0));
      const Shape &local = fwd ? in_shapes[0] : out_shapes[0];
      int64_t base = (fwd ? call.in_boxes[0] : call.out_boxes[0])[axis].begin;
      std::string code = "{\n";
      int64_t n = prod(in_shapes[1]);
      std::string idx = int64_indices(in(1), g.tensor(op.inputs[1]).dtype, n, "idx", code);
      code += std::string(fwd ? "rt::gather(" : "rt::gather_backward(") + dims_literal(local) + ", " +
              num(static_cast<int64_t>(axis)) + ", " + idx + ", " + num(n) + ", " + in(0) + ", " + out(0) + ", " +
              num(data.shape[axis]) + ", " + num(base) + ");\n}";
      return code;
    }
    case OpKind::Dropout: {
      const Shape &x = in_shapes[0];
      bool mask = outs.size() > 1 && !outs[1].empty();
      if (op.attr_int("training_mode", 0) == 0) {
        std::string code = copy_bytes(out(0), in(0), prod(x) * dtype_size(real_dtype()));
        if (mask) code += "\nrt::fill_bytes(" + out(1) + ", 1, " + num(prod(x)) + ");";
        return code;
      }
      // The mask of element i is drawn from its global index, so every split draws the whole tensor's mask.
      return "rt::dropout_forward(" + global_position(call) + ", " + num(op.attr_int("seed", 0)) + "ull, pass, " +
             float_literal(op.attr_float("ratio", 0.5)) + ", " + in(0) + ", " + out(0) + ", " +
             (mask ? out(1) : "nullptr") + ");";
    }
    case OpKind::RandomLike: return random_like_code(call, "pass");
    case OpKind::DropoutGrad:
      return "rt::dropout_backward(" + num(prod(out_shapes[0])) + ", " + float_literal(op.attr_float("ratio", 0.5)) +
             ", " + in(0) + ", " + in(1) + ", " + out(0) + ");";
    case OpKind::ReduceSum:
      if (!is_float(g.tensor(op.inputs[0]).dtype)) return integer_reduce(call);
      return "rt::reduce(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("axes")) + ", " + in(0) +
             ", " + out(0) + ", false);";
    case OpKind::ReduceMean: {
      // Divided by the whole tensor's reduced count, not the shard's: split along a reduced dim, each rank's output
      // is its share of the global mean (a partial output, plan::partial_ok), and the all-reduce sums the shares.
      const Shape &xs = g.tensor(op.inputs[0]).shape;
      int64_t count = 1;
      for (int64_t a : op.attr_ints("axes")) count *= xs[static_cast<size_t>(a)];
      return "rt::reduce_mean(" + dims_literal(in_shapes[0]) + ", " + dims_literal(op.attr_ints("axes")) + ", " +
             num(count) + ", " + in(0) + ", " + out(0) + ");";
    }
    case OpKind::SGDUpdate:
      return "rt::sgd_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " +
             scheduled_lr(op) + ", " + float_literal(op.attr_float("weight_decay", 0.0)) + ", " + out(0) + ");";
    case OpKind::MomentumUpdate:
      return "rt::momentum_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " + in(2) + ", " +
             scheduled_lr(op) + ", " + float_literal(op.attr_float("momentum", 0.9)) + ", " +
             float_literal(op.attr_float("weight_decay", 0.0)) + ", " +
             (op.attr_int("nesterov", 0) ? "true" : "false") + ", " + out(0) + ", " + out(1) + ");";
    case OpKind::AdamUpdate:
      return "rt::adam_step(" + num(prod(out_shapes[0])) + ", " + in(0) + ", " + in(1) + ", " + in(2) + ", " + in(3) +
             ", " + scheduled_lr(op) + ", " + float_literal(op.attr_float("beta1", 0.9)) + ", " +
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
    case OpKind::Mod: {
      // fmod 1: C's remainder (sign of A); fmod 0: the sign of B (Python's %). Integer x mod 0 gives 0, as numpy does
      // and the interpreter, where C would trap.
      bool f = is_float(g.tensor(op.outputs[0]).dtype), c_rem = op.attr_int("fmod", 0) != 0;
      std::string r = f ? "auto r = std::fmod(p0[i], p1[i]); " : "auto r = p1[i] == 0 ? 0 : p0[i] % p1[i]; ";
      return indexed(call, r + (c_rem ? "y[i] = r;" : "y[i] = r != 0 && ((r < 0) != (p1[i] < 0)) ? r + p1[i] : r;"));
    }
    case OpKind::ReduceMax:
    case OpKind::ReduceMin:
      if (!is_float(g.tensor(op.inputs[0]).dtype)) return integer_reduce(call);
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
