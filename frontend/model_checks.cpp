#include "frontend/model_checks.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "frontend/model_loader.h"
#include "frontend/node_attrs.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"

namespace cleave {
namespace {


bool has_control_char(const std::string &s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

std::string ints_text(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os << v;
  return os.str();
}

/** The node's name for messages: its own, or `<OpType>_<index>` as the importer names unnamed nodes. */
std::string node_name(const onnx::NodeProto &n, int index) {
  return n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
}

/** Calls f on each graph-valued attribute's graph of g's nodes (If's branches, Loop's body), recursively. */
template <typename F>
void for_each_subgraph(const onnx::GraphProto &g, const F &f) {
  for (const auto &n : g.node())
    for (const auto &a : n.attribute()) {
      if (a.has_g()) f(a.g());
      for (const auto &sub : a.graphs()) f(sub);
    }
}

/** Attributes that are flags: 0 or 1. */
const std::map<std::string, std::set<std::string>> &flag_attributes() {
  static const std::map<std::string, std::set<std::string>> kFlags = {
      {"Gemm", {"transA", "transB"}},
      {"MaxPool", {"ceil_mode", "storage_order"}},
      {"AveragePool", {"ceil_mode", "count_include_pad"}},
      {"BatchNormalization", {"training_mode"}},
      {"ReduceMean", {"keepdims", "noop_with_empty_axes"}},
      {"ReduceSum", {"keepdims", "noop_with_empty_axes"}},
      {"ReduceMax", {"keepdims", "noop_with_empty_axes"}},
      {"ReduceMin", {"keepdims", "noop_with_empty_axes"}},
      {"ReduceProd", {"keepdims", "noop_with_empty_axes"}},
      {"Trilu", {"upper"}},
      {"LSTM", {"input_forget", "layout"}},
      {"GRU", {"layout", "linear_before_reset"}},
      {"RNN", {"layout"}},
  };
  return kFlags;
}

/** Conv and pooling: window attributes that InferShapes divides by or indexes with. */
void check_window(const NodeAttrs &attrs) {
  auto positive = [&](const char *key) -> std::optional<std::vector<int64_t>> {
    std::optional<std::vector<int64_t>> v = attrs.opt_ints(key);
    if (v)
      for (int64_t x : *v)
        if (x <= 0) attrs.fail("attribute \"" + std::string(key) + "\" must be positive, got " + ints_text(*v));
    return v;
  };
  std::optional<std::vector<int64_t>> kernel = positive("kernel_shape");
  std::optional<std::vector<int64_t>> strides = positive("strides");
  std::optional<std::vector<int64_t>> dilations = positive("dilations");
  std::optional<std::vector<int64_t>> pads = attrs.opt_ints("pads");
  if (pads)
    for (int64_t x : *pads)
      if (x < 0) attrs.fail("attribute \"pads\" must not be negative, got " + ints_text(*pads));
  if (kernel) {
    size_t k = kernel->size();
    if (strides && strides->size() != k)
      attrs.fail("attribute \"strides\" has " + std::to_string(strides->size()) + " entries, kernel_shape " +
                 std::to_string(k));
    if (dilations && dilations->size() != k)
      attrs.fail("attribute \"dilations\" has " + std::to_string(dilations->size()) + " entries, kernel_shape " +
                 std::to_string(k));
    if (pads && pads->size() != 2 * k)
      attrs.fail("attribute \"pads\" has " + std::to_string(pads->size()) + " entries, kernel_shape " +
                 std::to_string(k) + " needs " + std::to_string(2 * k));
  }
  std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    attrs.fail("attribute \"auto_pad\" must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got " +
               quote_excerpt(auto_pad));
  if (auto_pad != "NOTSET" && pads)
    for (int64_t x : *pads)
      if (x != 0)
        attrs.fail("attribute \"auto_pad\" is " + auto_pad + " and explicit \"pads\" " + ints_text(*pads) +
                   " are given too (use one or the other)");
}

}  // namespace

void check_opset_imports(const onnx::ModelProto &m) {
  std::map<std::string, int64_t> seen;
  for (const auto &o : m.opset_import()) {
    std::string domain = is_onnx_domain(o.domain()) ? "ai.onnx" : o.domain();
    auto [it, fresh] = seen.emplace(domain, o.version());
    if (!fresh)
      CLEAVE_USER_ERROR("the model imports the ", domain == "ai.onnx" ? "default (ai.onnx)" : quote_excerpt(domain),
                        " opset twice (versions ", it->second, " and ", o.version(), ")");
  }
}

void check_names(const onnx::ModelProto &m) {
  auto check_tensor = [](const std::string &name) {
    if (has_control_char(name)) CLEAVE_USER_ERROR("tensor name ", quote_excerpt(name), " contains a control character");
  };
  std::function<void(const onnx::GraphProto &)> scan = [&](const onnx::GraphProto &g) {
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto &n = g.node(i);
      if (has_control_char(n.name()) || has_control_char(n.op_type()) || has_control_char(n.domain()))
        CLEAVE_USER_ERROR("node ", quote_excerpt(node_name(n, i)), " (", escape_control(n.op_type()),
                          is_onnx_domain(n.domain()) ? "" : ", " + escape_control(n.domain()),
                          "): names and op types must not contain control characters");
      for (const auto &t : n.input()) check_tensor(t);
      for (const auto &t : n.output()) check_tensor(t);
    }
    for (const auto &t : g.initializer()) check_tensor(t.name());
    for (const auto &vi : g.input()) check_tensor(vi.name());
    for (const auto &vi : g.output()) check_tensor(vi.name());
    for (const auto &vi : g.value_info()) check_tensor(vi.name());
    for_each_subgraph(g, scan);
  };
  scan(m.graph());
  for (const auto &ti : m.training_info()) {
    scan(ti.algorithm());
    scan(ti.initialization());
  }
}

void check_initializer_data(const onnx::ModelProto &m) {
  std::function<void(const onnx::GraphProto &)> scan = [&](const onnx::GraphProto &g) {
    for (const auto &t : g.initializer()) check_inline_data(t, "initializer " + quote_excerpt(t.name(), 200));
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto &a : g.node(i).attribute())
        if (a.type() == onnx::AttributeProto::TENSOR && a.has_t())
          check_inline_data(a.t(), "node " + quote_excerpt(node_name(g.node(i), i), 200) + " (" + g.node(i).op_type() +
                                       "): attribute \"" + a.name() + "\"");
    for_each_subgraph(g, scan);
  };
  scan(m.graph());
  for (const auto &ti : m.training_info()) {
    scan(ti.algorithm());
    scan(ti.initialization());
  }
}

void check_attribute_values(const onnx::ModelProto &m) {
  std::function<void(const onnx::GraphProto &)> scan = [&](const onnx::GraphProto &g) {
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto &n = g.node(i);
      if (!is_onnx_domain(n.domain())) continue;
      NodeAttrs attrs(n, node_label(node_name(n, i), n.op_type(), n.domain(), model_opset(m, n.domain())));
      const std::string &op = n.op_type();
      for (const auto &a : n.attribute()) {
        // Float attributes: finite (Constant's value_float may hold any float).
        if (op != "Constant" && a.type() == onnx::AttributeProto::FLOAT && !std::isfinite(a.f()))
          attrs.fail("attribute \"" + a.name() + "\" must be finite, got " + number_text(a.f()));
        if (op != "Constant" && a.type() == onnx::AttributeProto::FLOATS)
          for (float f : a.floats())
            if (!std::isfinite(f)) attrs.fail("attribute \"" + a.name() + "\" must be finite, got " + number_text(f));
      }
      if (auto it = flag_attributes().find(op); it != flag_attributes().end())
        for (const std::string &key : it->second)
          if (std::optional<int64_t> v = attrs.opt_int(key); v && *v != 0 && *v != 1)
            attrs.fail("attribute \"" + key + "\" must be 0 or 1, got " + std::to_string(*v));
      if (op == "BatchNormalization" || op == "LayerNormalization" || op == "InstanceNormalization")
        if (std::optional<double> eps = attrs.opt_float("epsilon"); eps && *eps < 0)
          attrs.fail("attribute \"epsilon\" must be >= 0, got " + number_text(*eps));
      if (op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "ConvTranspose")
        check_window(attrs);
    }
    for_each_subgraph(g, scan);  // If's branches and Loop's body reach shape inference too
  };
  scan(m.graph());
}

}  // namespace cleave
