#include "frontend/node_attrs.h"

#include <onnx/onnx_pb.h>

#include "ir/error.h"

namespace cleave {

bool is_onnx_op(const onnx::NodeProto &n, const std::string &op_type) {
  return n.op_type() == op_type && is_onnx_domain(n.domain());
}

void subgraph_reads(const onnx::GraphProto &g, bool own, std::set<std::string> &reads) {
  if (own)
    for (const auto &o : g.output()) reads.insert(o.name());
  for (const auto &n : g.node()) {
    if (own) reads.insert(n.input().begin(), n.input().end());
    for (const auto &a : n.attribute()) {
      if (a.has_g()) subgraph_reads(a.g(), true, reads);
      for (const auto &sub : a.graphs()) subgraph_reads(sub, true, reads);
    }
  }
}

namespace {

std::string type_name(int type) {
  if (onnx::AttributeProto::AttributeType_IsValid(type)) {
    std::string n = onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type));
    for (char &c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  }
  return "type " + std::to_string(type);
}

}  // namespace

NodeAttrs::NodeAttrs(const onnx::NodeProto &node, std::string label) : node_(node), label_(std::move(label)) {}

void NodeAttrs::fail(const std::string &msg) const { throw UserError(label_ + ": " + msg); }

const onnx::AttributeProto *NodeAttrs::find(const std::string &name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const onnx::AttributeProto *NodeAttrs::typed(const std::string &name, int type) const {
  const onnx::AttributeProto *a = find(name);
  if (a == nullptr) return nullptr;
  if (!a->ref_attr_name().empty()) fail("attribute \"" + name + "\" refers to a function attribute");
  if (a->type() != type)
    fail("attribute \"" + name + "\" must be " + type_name(type) + ", got " + type_name(a->type()));
  return a;
}

std::optional<int64_t> NodeAttrs::opt_int(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::INT)) return a->i();
  return std::nullopt;
}
int64_t NodeAttrs::req_int(const std::string &name) const {
  if (auto v = opt_int(name)) return *v;
  fail("missing required attribute \"" + name + "\"");
}
std::optional<double> NodeAttrs::opt_float(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::FLOAT)) return static_cast<double>(a->f());
  return std::nullopt;
}
double NodeAttrs::req_float(const std::string &name) const {
  if (auto v = opt_float(name)) return *v;
  fail("missing required attribute \"" + name + "\"");
}
std::optional<std::string> NodeAttrs::opt_string(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::STRING)) return a->s();
  return std::nullopt;
}
std::string NodeAttrs::req_string(const std::string &name) const {
  if (auto v = opt_string(name)) return *v;
  fail("missing required attribute \"" + name + "\"");
}
std::optional<std::vector<int64_t>> NodeAttrs::opt_ints(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::INTS)) return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  return std::nullopt;
}
std::vector<int64_t> NodeAttrs::req_ints(const std::string &name) const {
  if (auto v = opt_ints(name)) return *v;
  fail("missing required attribute \"" + name + "\"");
}
std::optional<std::vector<double>> NodeAttrs::opt_floats(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::FLOATS)) return std::vector<double>(a->floats().begin(), a->floats().end());
  return std::nullopt;
}
std::optional<std::vector<std::string>> NodeAttrs::opt_strings(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::STRINGS))
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  return std::nullopt;
}
const onnx::TensorProto *NodeAttrs::opt_tensor(const std::string &name) const {
  if (auto *a = typed(name, onnx::AttributeProto::TENSOR)) return &a->t();
  return nullptr;
}

}  // namespace cleave
