#include "frontend/fold_if.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>

#include "frontend/model_loader.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

/** Branch name -> the name it has in the importer. Names not listed are the outer scope's, unchanged. */
using Renames = std::map<std::string, std::string>;

std::string renamed(const Renames &r, const std::string &name) {
  auto it = r.find(name);
  return it == r.end() ? name : it->second;
}

/** In subgraph `g` of a branch node (a nested If's branch), renames the references to the enclosing branch's
 *  tensors as `r` does. `local` holds the names that graphs between the branch and `g` define: they shadow. */
void rename_outer_refs(onnx::GraphProto &g, const Renames &r, std::set<std::string> local) {
  for (const auto &t : g.initializer()) local.insert(t.name());
  for (const auto &v : g.input()) local.insert(v.name());
  for (const auto &node : g.node())
    for (const auto &o : node.output()) local.insert(o);
  auto fix = [&](std::string *name) {
    if (!local.count(*name)) *name = renamed(r, *name);
  };
  for (auto &node : *g.mutable_node()) {
    for (auto &in : *node.mutable_input()) fix(&in);
    for (auto &a : *node.mutable_attribute()) {
      if (a.has_g()) rename_outer_refs(*a.mutable_g(), r, local);
      for (auto &sub : *a.mutable_graphs()) rename_outer_refs(sub, r, local);
    }
  }
  for (auto &o : *g.mutable_output()) fix(o.mutable_name());
}

/** The importer's unsupported-node line for one node; `why` says what keeps it from being translated. */
[[noreturn]] void unsupported(const std::string &name, const std::string &op_type, const std::string &domain,
                              int64_t opset, const std::string &why) {
  throw UserError(std::string(kUnsupportedNodeLine) + quote_excerpt(name, 200) + " (" + escape_control(op_type) +
                      ", " + escape_control(domain.empty() ? "ai.onnx" : domain) + ", opset " +
                      std::to_string(opset) + "; " + why + ")",
                  2);
}

const onnx::GraphProto &branch(const NodeCtx &n, const std::string &key) {
  for (const auto &a : n.node.attribute())
    if (a.name() == key && a.type() == onnx::AttributeProto::GRAPH) return a.g();
  n.fail("missing required attribute \"" + key + "\"");
}

}  // namespace

void translate_if(Importer &im, const NodeCtx &n) {
  std::string cond = n.in(0);
  if (cond.empty()) n.fail("input cond is missing");
  if (!im.defined(cond)) n.fail("input \"" + cond + "\" is not defined");
  const Tensor *value = im.known_value(cond);
  if (value == nullptr)
    unsupported(n.name, n.op_type, n.domain, n.opset,
                "its condition " + quote_excerpt(cond, 200) + " is not a compile-time constant");
  std::vector<int64_t> c = data_as_ints(*value);
  if (c.size() != 1) n.fail("condition \"" + cond + "\" has " + std::to_string(c.size()) + " elements, not 1");
  std::string key = c[0] != 0 ? "then_branch" : "else_branch";
  const onnx::GraphProto &g = branch(n, key);
  if (g.input_size() > 0) n.fail(key + " has inputs (an If's branches take none)");
  if (g.sparse_initializer_size() > 0) n.fail(key + ": sparse initializers are not supported");
  if (static_cast<size_t>(g.output_size()) != n.num_out())
    n.fail(key + " has " + std::to_string(g.output_size()) + " outputs, the node " + std::to_string(n.num_out()));

  Renames r;
  for (const auto &tp : g.initializer()) {
    if (tp.data_location() == onnx::TensorProto::EXTERNAL)
      n.fail(key + ": initializer \"" + tp.name() + "\" has external data (not supported inside a branch)");
    Tensor t = tensor_from_proto(tp, ".", n.label + ": " + key + " initializer \"" + tp.name() + "\"");
    t.name = r[tp.name()] = im.fresh_tensor_name(tp.name());
    im.define_const(std::move(t));
  }
  // A branch output its nodes produce is written under the node's output name directly.
  std::set<std::string> produced;
  for (const auto &node : g.node()) produced.insert(node.output().begin(), node.output().end());
  for (int k = 0; k < g.output_size(); ++k) {
    const std::string &o = g.output(k).name();
    std::string y = n.out(static_cast<size_t>(k));
    if (!y.empty() && produced.count(o) && !r.count(o)) r[o] = y;
  }
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto node = g.node(i);
    std::string name = im.fresh_op_name(n.name + "/" +
                                        (node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name()));
    if (!is_onnx_domain(node.domain()))
      unsupported(name, node.op_type(), node.domain(), -1, "in the " + key + " of If " + quote_excerpt(n.name, 200));
    if (!find_translator(node.domain(), node.op_type()))
      unsupported(name, node.op_type(), node.domain(), n.opset,
                  "in the " + key + " of If " + quote_excerpt(n.name, 200));
    for (auto &in : *node.mutable_input()) in = renamed(r, in);
    for (auto &out : *node.mutable_output())
      if (!out.empty()) {
        if (!r.count(out)) r[out] = im.fresh_tensor_name(out);
        out = r[out];
      }
    for (auto &a : *node.mutable_attribute()) {
      if (a.has_g()) rename_outer_refs(*a.mutable_g(), r, {});
      for (auto &sub : *a.mutable_graphs()) rename_outer_refs(sub, r, {});
    }
    std::string label = node_label(name, node.op_type(), node.domain(), n.opset);
    translate_node(im, NodeCtx{node, name, node.op_type(), node.domain(), n.opset, label, NodeAttrs(node, label),
                               n.phase});
  }
  // Outputs no branch node writes under the node's name: outer tensors, initializers, repeated outputs.
  for (int k = 0; k < g.output_size(); ++k) {
    std::string y = n.out(static_cast<size_t>(k));
    std::string src = renamed(r, g.output(k).name());
    if (y.empty() || src == y) continue;
    OpSpec copy;
    copy.kind = OpKind::Identity;
    copy.inputs = {src};
    copy.outputs = {y};
    copy.phase = n.phase;
    im.emit(copy, im.fresh_op_name(n.name + "/Identity"), n);
  }
}

}  // namespace cleave
