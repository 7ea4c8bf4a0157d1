#pragma once
// Typed access to an ONNX node's attributes: wrong types and missing required attributes are user errors naming
// the node, its op and the attribute.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <set>

namespace onnx {
class GraphProto;
class NodeProto;
class AttributeProto;
class TensorProto;
}  // namespace onnx

namespace cleave {

/** Whether an operator-set domain is ONNX's default one: "" or "ai.onnx". */
inline bool is_onnx_domain(const std::string &domain) { return domain.empty() || domain == "ai.onnx"; }
/** Whether `n` is the default domain's operator `op_type`. */
bool is_onnx_op(const onnx::NodeProto &n, const std::string &op_type);
/** Adds to `reads` every name the subgraphs of g's nodes (If branches, Loop and Scan bodies, at any depth) read:
 *  their nodes' inputs and their outputs (a branch may output an outer name as it is); with `own`, g's own nodes'
 *  inputs and g's outputs too. */
void subgraph_reads(const onnx::GraphProto &g, bool own, std::set<std::string> &reads);

class NodeAttrs {
 public:
  /** `label` prefixes every message, e.g. `node "c1" (Conv, opset 13)`. */
  NodeAttrs(const onnx::NodeProto &node, std::string label);

  bool has(const std::string &name) const { return find(name) != nullptr; }
  std::optional<int64_t> opt_int(const std::string &name) const;
  int64_t get_int(const std::string &name, int64_t def) const { return opt_int(name).value_or(def); }
  int64_t req_int(const std::string &name) const;
  std::optional<double> opt_float(const std::string &name) const;
  double get_float(const std::string &name, double def) const { return opt_float(name).value_or(def); }
  double req_float(const std::string &name) const;
  std::optional<std::string> opt_string(const std::string &name) const;
  std::string get_string(const std::string &name, const std::string &def) const {
    return opt_string(name).value_or(def);
  }
  std::string req_string(const std::string &name) const;
  std::optional<std::vector<int64_t>> opt_ints(const std::string &name) const;
  std::vector<int64_t> req_ints(const std::string &name) const;
  std::optional<std::vector<double>> opt_floats(const std::string &name) const;
  std::optional<std::vector<std::string>> opt_strings(const std::string &name) const;
  const onnx::TensorProto *opt_tensor(const std::string &name) const;

  const std::string &label() const { return label_; }
  /** Throws UserError `<label>: <msg...>`. */
  [[noreturn]] void fail(const std::string &msg) const;

 private:
  const onnx::AttributeProto *find(const std::string &name) const;
  /** The attribute if present, after checking its type (an AttributeProto::AttributeType). */
  const onnx::AttributeProto *typed(const std::string &name, int type) const;

  const onnx::NodeProto &node_;
  std::string label_;
};

}  // namespace cleave
