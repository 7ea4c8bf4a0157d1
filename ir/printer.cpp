#include "ir/printer.h"

#include <charconv>
#include <cmath>

#include "ir/tensor_data.h"

namespace cleave {
namespace {

bool is_bare_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == ':' || c == '/' || c == '+' || c == '-';
}

template <typename F>
std::string float_text(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <typename T, typename Fn>
std::string list_text(const std::vector<T> &values, Fn fn) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ",";
    s += fn(values[i]);
  }
  return s + "]";
}

std::string data_text(const Tensor &t) {
  switch (t.dtype) {
    // f16 and bf16 values are floats exactly, so float's shortest round-trip text reads back to the same bits.
    case DType::f16:
    case DType::bf16:
    case DType::f32: {
      std::vector<double> v = data_as_doubles(t);
      return list_text(v, [](double x) { return float_text(static_cast<float>(x)); });
    }
    case DType::f64: return list_text(data_as_doubles(t), [](double x) { return float_text(x); });
    // u64 above 2^63 would print negative through int64: its bits reinterpreted give the right text.
    case DType::u64: return list_text(data_as_ints(t), [](int64_t x) { return std::to_string(static_cast<uint64_t>(x)); });
    default: return list_text(data_as_ints(t), [](int64_t x) { return std::to_string(x); });
  }
}

std::string operand_list(const Graph &g, const std::vector<TensorId> &ids) {
  std::string s = "(";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += ids[i] == kNoTensor ? "_" : print_name(g.tensor(ids[i]).name);
  }
  return s + ")";
}

}  // namespace

std::string print_name(const std::string &name) {
  bool bare = !name.empty() && name != "_";
  for (char c : name) bare = bare && is_bare_char(c);
  if (bare) return name;
  std::string s = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s + "\"";
}

std::string print_attr(const Attr &a) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return float_text(v); }
    std::string operator()(const std::string &v) const {
      std::string s = "\"";
      for (char c : v) {
        if (c == '"' || c == '\\') s += '\\';
        s += c;
      }
      return s + "\"";
    }
    std::string operator()(const std::vector<int64_t> &v) const {
      return list_text(v, [](int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const std::vector<double> &v) const {
      return list_text(v, [](double x) { return float_text(x); });
    }
  };
  return std::visit(Visitor{}, a);
}

std::string print_op(const Graph &g, const Op &op) {
  std::string s = "op " + print_name(op.name) + " " + std::string(op_kind_name(op.kind)) + " " +
                  std::string(phase_name(op.phase));
  OpId self = g.find_op(op.name).value_or(kNoOp);
  if (op.group != self && op.group != kNoOp) s += " group=" + print_name(g.op(op.group).name);
  if (!op.unroll_scope.empty()) s += " unroll=" + print_name(op.unroll_scope) + " t=" + std::to_string(op.unroll_step);
  s += " " + operand_list(g, op.inputs) + " -> " + operand_list(g, op.outputs);
  if (!op.attrs.empty()) {
    s += " {";
    bool first = true;
    for (const auto &[key, value] : op.attrs) {
      if (!first) s += ", ";
      first = false;
      s += key + "=" + print_attr(value);
    }
    s += "}";
  }
  return s;
}

std::string print_graph(const Graph &g) {
  std::string s = "graph " + print_name(g.name) + "\n";
  for (const Tensor &t : g.tensors()) {
    s += "tensor " + print_name(t.name) + " " + std::string(dtype_name(t.dtype)) + shape_str(t.shape) + " " +
         std::string(role_name(t.role));
    if (t.role == Role::constant && !t.data.empty()) s += " = " + data_text(t);
    if (t.external)
      s += " external(" + print_attr(t.external->file) + ", " + std::to_string(t.external->offset) + ", " +
           std::to_string(t.external->length) + ")";
    if (t.zero_init) s += " zeros";
    if (t.sample_axis != 0) s += " samples=" + std::to_string(t.sample_axis);
    s += "\n";
  }
  for (const Op &op : g.ops()) s += print_op(g, op) + "\n";
  for (TensorId out : g.outputs) s += "output " + print_name(g.tensor(out).name) + "\n";
  if (g.loss != kNoTensor) s += "loss " + print_name(g.tensor(g.loss).name) + "\n";
  if (g.loss_scaling.scale != kNoTensor)
    s += "loss_scale " + print_name(g.tensor(g.loss_scaling.scale).name) + " init=" +
         float_text(static_cast<float>(data_as_doubles(g.tensor(g.loss_scaling.scale)).at(0))) +
         " growth_interval=" + std::to_string(g.loss_scaling.growth_interval) + "\n";
  for (const Assign &a : g.assigns)
    s += "assign " + print_name(g.tensor(a.dst).name) + " <- " + print_name(g.tensor(a.src).name) + "\n";
  return s;
}

}  // namespace cleave
