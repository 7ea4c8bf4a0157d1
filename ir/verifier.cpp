#include "ir/verifier.h"

#include <set>

#include "ir/error.h"
#include "ir/shape_rules.h"

namespace cleave {
namespace {

bool is_source_role(Role r) {
  return r == Role::input || r == Role::label || r == Role::param || r == Role::optimizer_state ||
         r == Role::constant;
}

std::string tensor_label(const Tensor &t) { return "tensor \"" + t.name + "\""; }
std::string op_label(const Op &op) {
  return "op \"" + op.name + "\" (" + std::string(op_kind_name(op.kind)) + ")";
}

void check_tensors(const Graph &g, std::vector<std::string> &out) {
  for (const Tensor &t : g.tensors()) {
    try {
      int64_t n = checked_num_elements(t.shape, tensor_label(t));
      if (!t.data.empty() && t.data.size() != static_cast<size_t>(n * dtype_size(t.dtype)))
        out.push_back(tensor_label(t) + ": " + std::to_string(t.data.size()) + " data bytes, shape " +
                      shape_str(t.shape) + " needs " + std::to_string(n * dtype_size(t.dtype)));
      if (t.role == Role::constant && t.data.size() != static_cast<size_t>(n * dtype_size(t.dtype)))
        out.push_back(tensor_label(t) + ": constant without data");
    } catch (const UserError &e) {
      out.push_back(e.what());
    }
    if (t.sample_axis != 0 && (!is_data(t) || t.sample_axis < 0 || t.sample_axis >= static_cast<int>(t.shape.size())))
      out.push_back(tensor_label(t) + " (" + std::string(role_name(t.role)) + "): sample axis " +
                    std::to_string(t.sample_axis) + " is not a dim of " + shape_str(t.shape));
    if (t.producer == kNoOp && !is_source_role(t.role))
      out.push_back(tensor_label(t) + " (" + std::string(role_name(t.role)) + ") has no producer");
    if (t.producer != kNoOp && (t.role == Role::input || t.role == Role::label || t.role == Role::constant))
      out.push_back(tensor_label(t) + " (" + std::string(role_name(t.role)) + ") is produced by op \"" +
                    g.op(t.producer).name + "\"");
  }
}

void check_ops(const Graph &g, std::vector<std::string> &out) {
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op &op = g.op(id);
    bool ids_ok = true;
    for (TensorId in : op.inputs) {
      if (in == kNoTensor) continue;
      if (in < 0 || in >= g.num_tensors()) {
        out.push_back(op_label(op) + ": input id " + std::to_string(in) + " out of range");
        ids_ok = false;
        continue;
      }
      OpId p = g.tensor(in).producer;
      if (p != kNoOp && p >= id)
        out.push_back(op_label(op) + ": input \"" + g.tensor(in).name + "\" is produced later, by op \"" +
                      g.op(p).name + "\" (ops must be in topological order)");
    }
    for (TensorId o : op.outputs) {
      if (o == kNoTensor) continue;
      if (o < 0 || o >= g.num_tensors() || g.tensor(o).producer != id) {
        out.push_back(op_label(op) + ": output slot does not record this op as producer");
        ids_ok = false;
      }
    }
    if (op.group < 0 || op.group >= g.num_ops())
      out.push_back(op_label(op) + ": group out of range");
    else if (op.phase == Phase::forward && op.group != id)
      out.push_back(op_label(op) + ": a forward op must be its own group");
    if (!ids_ok) continue;
    std::vector<TensorType> types;
    try {
      types = infer_output_types(g, op);
    } catch (const UserError &e) {
      out.push_back(e.what());
      continue;
    }
    if (types.size() != op.outputs.size()) {
      out.push_back(op_label(op) + ": has " + std::to_string(op.outputs.size()) + " output slots, shape rule gives " +
                    std::to_string(types.size()));
      continue;
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (op.outputs[i] == kNoTensor) continue;
      const Tensor &t = g.tensor(op.outputs[i]);
      if (t.dtype != types[i].dtype || t.shape != types[i].shape)
        out.push_back(op_label(op) + ": output \"" + t.name + "\" is declared " + std::string(dtype_name(t.dtype)) +
                      shape_str(t.shape) + " but computes " + std::string(dtype_name(types[i].dtype)) +
                      shape_str(types[i].shape));
    }
  }
}

void check_graph_links(const Graph &g, std::vector<std::string> &out) {
  auto valid = [&](TensorId t) { return t >= 0 && t < g.num_tensors(); };
  for (TensorId t : g.outputs)
    if (!valid(t)) out.push_back("graph output id " + std::to_string(t) + " out of range");
  if (g.loss != kNoTensor) {
    if (!valid(g.loss)) {
      out.push_back("loss id out of range");
    } else {
      const Tensor &l = g.tensor(g.loss);
      if (!l.shape.empty() && num_elements(l.shape) != 1)
        out.push_back("loss " + tensor_label(l) + " has shape " + shape_str(l.shape) + "; a loss must be a scalar");
      if (!is_float(l.dtype)) out.push_back("loss " + tensor_label(l) + " is not a float tensor");
    }
  }
  if (g.loss_scaling.scale != kNoTensor) {
    if (!valid(g.loss_scaling.scale)) {
      out.push_back("loss scale id out of range");
    } else {
      const Tensor &s = g.tensor(g.loss_scaling.scale);
      if (g.loss == kNoTensor || !valid(g.loss)) out.push_back("a loss scale without a loss");
      else if (s.shape != g.tensor(g.loss).shape || s.dtype != DType::f32)
        out.push_back("loss scale " + tensor_label(s) + " is not a float32 tensor shaped like the loss");
      if (s.role != Role::optimizer_state) out.push_back("loss scale " + tensor_label(s) + " is not optimizer state");
      if (g.loss_scaling.growth_interval < 1) out.push_back("loss scale growth interval below 1");
    }
  }
  std::set<TensorId> assigned;
  for (const Assign &a : g.assigns) {
    if (!valid(a.dst) || !valid(a.src)) {
      out.push_back("assign with an out-of-range tensor id");
      continue;
    }
    const Tensor &d = g.tensor(a.dst), &s = g.tensor(a.src);
    if (d.producer != kNoOp) out.push_back("assign to " + tensor_label(d) + ", which is computed by an op");
    if (d.dtype != s.dtype || d.shape != s.shape)
      out.push_back("assign " + tensor_label(d) + " <- " + tensor_label(s) + ": types differ (" +
                    std::string(dtype_name(d.dtype)) + shape_str(d.shape) + " vs " +
                    std::string(dtype_name(s.dtype)) + shape_str(s.shape) + ")");
    if (!assigned.insert(a.dst).second) out.push_back(tensor_label(d) + " is assigned twice");
  }
}

}  // namespace

std::vector<std::string> verify_problems(const Graph &g) {
  std::vector<std::string> out;
  check_tensors(g, out);
  check_ops(g, out);
  check_graph_links(g, out);
  return out;
}

void verify(const Graph &g) {
  std::vector<std::string> problems = verify_problems(g);
  if (problems.empty()) return;
  std::string msg = "invalid IR: " + problems.front();
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more problems)";
  throw UserError(msg);
}

}  // namespace cleave
