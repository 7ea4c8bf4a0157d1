#include "frontend/control_flow.h"

#include <onnx/onnx_pb.h>

#include <limits>
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

/** Translates the nodes of subgraph `g` (`what`: "the then_branch of If \"x\"", for messages) in order under the
 *  renames `r`, extended with a fresh name for each tensor they write that `r` does not map yet. */
void translate_subgraph(Importer &im, const NodeCtx &n, const onnx::GraphProto &g, Renames &r,
                        const std::string &what) {
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto node = g.node(i);
    std::string name = im.fresh_op_name(n.name + "/" +
                                        (node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name()));
    if (!is_onnx_domain(node.domain())) unsupported(name, node.op_type(), node.domain(), -1, "in " + what);
    if (!find_translator(node.domain(), node.op_type()))
      unsupported(name, node.op_type(), node.domain(), n.opset, "in " + what);
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
}

/** Defines subgraph `g`'s initializers as constants under fresh names, recorded in `r`. */
void define_initializers(Importer &im, const NodeCtx &n, const onnx::GraphProto &g, Renames &r,
                         const std::string &key) {
  if (g.sparse_initializer_size() > 0) n.fail(key + ": sparse initializers are not supported");
  for (const auto &tp : g.initializer()) {
    if (tp.data_location() == onnx::TensorProto::EXTERNAL)
      n.fail(key + ": initializer \"" + tp.name() + "\" has external data (not supported inside a subgraph)");
    Tensor t = tensor_from_proto(tp, ".", n.label + ": " + key + " initializer \"" + tp.name() + "\"");
    t.name = r[tp.name()] = im.fresh_tensor_name(tp.name());
    im.define_const(std::move(t));
  }
}

void emit_copy(Importer &im, const NodeCtx &n, const std::string &src, const std::string &dst) {
  OpSpec copy;
  copy.kind = OpKind::Identity;
  copy.inputs = {src};
  copy.outputs = {dst};
  copy.phase = n.phase;
  im.emit(copy, im.fresh_op_name(n.name + "/Identity"), n);
}

/** A scalar constant of `dtype` (i64 or bool) holding v, under a fresh name after `hint`. */
std::string define_scalar(Importer &im, const std::string &hint, DType dtype, int64_t v) {
  Tensor t;
  t.name = im.fresh_tensor_name(hint);
  t.dtype = dtype;
  t.role = Role::constant;
  t.data = encode_ints(dtype, {v});
  std::string name = t.name;
  im.define_const(std::move(t));
  return name;
}

/** The one element of compile-time constant `name` (input or output `what` of node n), as an integer. */
int64_t constant_scalar(Importer &im, const NodeCtx &n, const std::string &name, const std::string &what) {
  const Tensor *value = im.known_value(name);
  if (value == nullptr)
    unsupported(n.name, n.op_type, n.domain, n.opset, what + " " + quote_excerpt(name, 200) +
                                                          " is not a compile-time constant");
  std::vector<int64_t> c = data_as_ints(*value);
  if (c.size() != 1) n.fail(what + " \"" + name + "\" has " + std::to_string(c.size()) + " elements, not 1");
  return c[0];
}

}  // namespace

void translate_if(Importer &im, const NodeCtx &n) {
  std::string cond = n.in(0);
  if (cond.empty()) n.fail("input cond is missing");
  if (!im.defined(cond)) n.fail("input \"" + cond + "\" is not defined");
  std::string key = constant_scalar(im, n, cond, "its condition") != 0 ? "then_branch" : "else_branch";
  const onnx::GraphProto &g = branch(n, key);
  if (g.input_size() > 0) n.fail(key + " has inputs (an If's branches take none)");
  if (static_cast<size_t>(g.output_size()) != n.num_out())
    n.fail(key + " has " + std::to_string(g.output_size()) + " outputs, the node " + std::to_string(n.num_out()));

  Renames r;
  define_initializers(im, n, g, r, key);
  // A branch output its nodes produce is written under the node's output name directly.
  std::set<std::string> produced;
  for (const auto &node : g.node()) produced.insert(node.output().begin(), node.output().end());
  for (int k = 0; k < g.output_size(); ++k) {
    const std::string &o = g.output(k).name();
    std::string y = n.out(static_cast<size_t>(k));
    if (!y.empty() && produced.count(o) && !r.count(o)) r[o] = y;
  }
  translate_subgraph(im, n, g, r, "the " + key + " of If " + quote_excerpt(n.name, 200));
  // Outputs no branch node writes under the node's name: outer tensors, initializers, repeated outputs.
  for (int k = 0; k < g.output_size(); ++k) {
    std::string y = n.out(static_cast<size_t>(k));
    std::string src = renamed(r, g.output(k).name());
    if (y.empty() || src == y) continue;
    emit_copy(im, n, src, y);
  }
}

void translate_loop(Importer &im, const NodeCtx &n) {
  const onnx::GraphProto &g = branch(n, "body");
  if (n.num_in() < 2) n.fail("a Loop has the inputs M and cond (either may be empty)");
  size_t carried = n.num_in() - 2;
  if (static_cast<size_t>(g.input_size()) != 2 + carried)
    n.fail("body has " + std::to_string(g.input_size()) + " inputs, want " + std::to_string(2 + carried) +
           " (iter_num, cond and the " + std::to_string(carried) + " loop-carried values)");
  if (static_cast<size_t>(g.output_size()) < 1 + carried)
    n.fail("body has " + std::to_string(g.output_size()) + " outputs, want at least " + std::to_string(1 + carried));
  size_t scans = static_cast<size_t>(g.output_size()) - 1 - carried;
  if (n.num_out() > carried + scans)
    n.fail("the node has " + std::to_string(n.num_out()) + " outputs, its body " + std::to_string(carried + scans));
  for (size_t j = 0; j < carried; ++j)
    if (!im.defined(n.in(2 + j))) n.fail("input \"" + n.in(2 + j) + "\" is not defined");
  // A while loop (M absent, or torch's INT64_MAX) unrolls too where its conditions are constants.
  bool cond = n.in(1).empty() || constant_scalar(im, n, n.in(1), "its condition") != 0;
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  int64_t trips = !cond || n.in(0).empty() ? kUnbounded : constant_scalar(im, n, n.in(0), "its trip count");
  if (trips > kMaxLoopUnroll && trips != kUnbounded)
    unsupported(n.name, n.op_type, n.domain, n.opset,
                "its trip count " + std::to_string(trips) + " is more than the " + std::to_string(kMaxLoopUnroll) +
                    " iterations unrolled at import");

  std::vector<std::string> values;
  for (size_t j = 0; j < carried; ++j) values.push_back(n.in(2 + j));
  std::vector<std::vector<std::string>> stacked(scans);
  for (int64_t i = 0; i < trips && cond; ++i) {
    if (i == kMaxLoopUnroll)
      unsupported(n.name, n.op_type, n.domain, n.opset,
                  "it runs more than the " + std::to_string(kMaxLoopUnroll) + " iterations unrolled at import");
    Renames r;
    std::string key = "body (iteration " + std::to_string(i) + ")";
    define_initializers(im, n, g, r, key);
    r[g.input(0).name()] = define_scalar(im, g.input(0).name(), DType::i64, i);
    r[g.input(1).name()] = define_scalar(im, g.input(1).name(), DType::boolean, 1);
    for (size_t j = 0; j < carried; ++j) r[g.input(static_cast<int>(2 + j)).name()] = values[j];
    translate_subgraph(im, n, g, r, "the body of Loop " + quote_excerpt(n.name, 200));
    cond = constant_scalar(im, n, renamed(r, g.output(0).name()), "its body's cond_out") != 0;
    for (size_t j = 0; j < carried; ++j) values[j] = renamed(r, g.output(static_cast<int>(1 + j)).name());
    for (size_t k = 0; k < scans; ++k) stacked[k].push_back(renamed(r, g.output(static_cast<int>(1 + carried + k)).name()));
  }
  for (size_t j = 0; j < carried && j < n.num_out(); ++j)
    if (!n.out(j).empty()) emit_copy(im, n, values[j], n.out(j));
  for (size_t k = 0; k < scans && carried + k < n.num_out(); ++k) {
    const std::string &y = n.out(carried + k);
    if (y.empty()) continue;
    if (stacked[k].empty())
      unsupported(n.name, n.op_type, n.domain, n.opset, "no iteration runs, and its scan outputs would be empty");
    // Each iteration's value as [1, ...], concatenated along that new first axis.
    OpSpec cat;
    cat.kind = OpKind::Concat;
    cat.phase = n.phase;
    cat.attrs["axis"] = int64_t{0};
    cat.outputs = {y};
    for (const std::string &v : stacked[k]) {
      Shape shape = im.type_of(v, n).shape;
      shape.insert(shape.begin(), 1);
      OpSpec reshape;
      reshape.kind = OpKind::Reshape;
      reshape.phase = n.phase;
      reshape.inputs = {v};
      reshape.outputs = {im.fresh_tensor_name(y + ".iteration")};
      reshape.attrs["shape"] = shape;
      im.emit(reshape, im.fresh_op_name(n.name + "/Unsqueeze"), n);
      cat.inputs.push_back(reshape.outputs[0]);
    }
    im.emit(cat, im.fresh_op_name(n.name + "/Concat"), n);
  }
}

}  // namespace cleave
