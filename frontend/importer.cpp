#include "frontend/importer.h"

#include <onnx/onnx_pb.h>

#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "ir/tensor_data.h"

namespace cleave {

std::string NodeCtx::in(size_t i) const {
  return i < static_cast<size_t>(node.input_size()) ? node.input(static_cast<int>(i)) : std::string();
}
std::string NodeCtx::out(size_t i) const {
  return i < static_cast<size_t>(node.output_size()) ? node.output(static_cast<int>(i)) : std::string();
}
size_t NodeCtx::num_in() const { return static_cast<size_t>(node.input_size()); }
size_t NodeCtx::num_out() const { return static_cast<size_t>(node.output_size()); }

Importer::Importer(std::set<std::string> reserved_tensor_names, std::set<std::string> reserved_op_names)
    : reserved_tensors_(std::move(reserved_tensor_names)), reserved_ops_(std::move(reserved_op_names)) {}

const Tensor *Importer::known_value(const std::string &name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) return nullptr;
  if (it->second.value) return &*it->second.value;
  const Tensor &t = g.tensor(it->second.id);
  if (t.role == Role::param && t.data.size() == static_cast<size_t>(num_elements(t.shape) * dtype_size(t.dtype)))
    return &t;
  return nullptr;
}

bool Importer::is_const(const std::string &name) const {
  auto it = slots_.find(name);
  return it != slots_.end() && it->second.value.has_value();
}

TensorType Importer::type_of(const std::string &name, const NodeCtx &at) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) at.fail("input \"" + name + "\" is not defined");
  if (it->second.value) return {it->second.value->dtype, it->second.value->shape};
  const Tensor &t = g.tensor(it->second.id);
  return {t.dtype, t.shape};
}

TensorId Importer::use(const std::string &name, const NodeCtx *at) {
  auto it = slots_.find(name);
  if (it == slots_.end()) {
    if (at) at->fail("input \"" + name + "\" is not defined");
    CLEAVE_USER_ERROR("tensor \"", name, "\" is not defined");
  }
  Slot &s = it->second;
  if (s.id == kNoTensor) s.id = g.add_tensor(*s.value);
  return s.id;
}

void Importer::define_const(Tensor t) {
  if (slots_.count(t.name)) CLEAVE_USER_ERROR("tensor \"", t.name, "\" is defined twice");
  t.role = Role::constant;
  checked_num_elements(t.shape, "tensor \"" + t.name + "\"");
  std::string name = t.name;
  slots_[name].value = std::move(t);
}

TensorId Importer::define_source(Tensor t) {
  if (slots_.count(t.name)) CLEAVE_USER_ERROR("tensor \"", t.name, "\" is defined twice");
  checked_num_elements(t.shape, "tensor \"" + t.name + "\"");
  std::string name = t.name;
  TensorId id = g.add_tensor(std::move(t));
  slots_[name].id = id;
  return id;
}

std::string Importer::fresh_tensor_name(const std::string &base) {
  std::string name = base;
  for (int i = 1; reserved_tensors_.count(name) || slots_.count(name) || g.find_tensor(name); ++i)
    name = base + "." + std::to_string(i);
  reserved_tensors_.insert(name);
  return name;
}

std::string Importer::fresh_op_name(const std::string &base) {
  std::string name = base;
  for (int i = 1; reserved_ops_.count(name) || g.find_op(name); ++i) name = base + "." + std::to_string(i);
  reserved_ops_.insert(name);
  return name;
}

void Importer::check_against_onnx(const std::string &name, const TensorType &t, const NodeCtx &at) const {
  auto it = onnx_types.find(name);
  if (it == onnx_types.end()) return;
  // Both are computed from the same static input shapes; a difference is a bug in one of the shape rules.
  CLEAVE_CHECK(it->second == t, at.label, ": output \"", name, "\" has IR type ", dtype_name(t.dtype),
               shape_str(t.shape), " but ONNX infers ", dtype_name(it->second.dtype), shape_str(it->second.shape));
}

void Importer::fold(const OpSpec &spec, const std::string &name, const NodeCtx &at) {
  Graph scratch;
  std::map<std::string, TensorId> ids;
  Op op;
  op.name = name;
  op.kind = spec.kind;
  op.attrs = spec.attrs;
  for (const std::string &in : spec.inputs) {
    if (in.empty()) {
      op.inputs.push_back(kNoTensor);
      continue;
    }
    if (!ids.count(in)) ids[in] = scratch.add_tensor(*slots_.at(in).value);
    op.inputs.push_back(ids[in]);
  }
  op.outputs.assign(spec.outputs.size(), kNoTensor);
  std::vector<TensorType> types = infer_output_types(scratch, op);
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    if (spec.outputs[i].empty()) continue;
    check_against_onnx(spec.outputs[i], types[i], at);
    op.outputs[i] = scratch.add_tensor(spec.outputs[i], types[i].dtype, types[i].shape, Role::activation);
  }
  // An integer x / 0 runs as 0 (numpy's, and the kernels'), but folded at import it is a model's shape arithmetic
  // gone wrong: an error here rather than a silent 0 in a shape.
  if (spec.kind == OpKind::Div && is_integer(types[0].dtype))
    for (double v : data_as_doubles(scratch.tensor(op.inputs[1])))
      if (v == 0) at.fail("integer division by zero in a compile-time constant (input \"" + spec.inputs[1] + "\")");
  OpId id = scratch.add_op(op);
  interp::Values values = interp::initial_values(scratch);
  interp::run_op(scratch, id, values, interp::Context{});
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    if (spec.outputs[i].empty()) continue;
    const interp::Value &v = *values[static_cast<size_t>(op.outputs[i])];
    Tensor t;
    t.name = spec.outputs[i];
    t.dtype = v.dtype;
    t.shape = v.shape;
    t.data = encode_doubles(v.dtype, v.data);
    define_const(std::move(t));
  }
}

std::vector<TensorId> Importer::emit(const OpSpec &spec, const std::string &name, const NodeCtx &at) {
  for (const std::string &out : spec.outputs)
    if (!out.empty() && slots_.count(out)) at.fail("output \"" + out + "\" is already defined");
  bool all_const = spec.foldable && spec.phase == Phase::forward;
  for (const std::string &in : spec.inputs) {
    if (in.empty()) continue;
    if (!slots_.count(in)) at.fail("input \"" + in + "\" is not defined");
    all_const = all_const && is_const(in);
  }
  if (all_const && !spec.inputs.empty()) {
    fold(spec, name, at);
    return std::vector<TensorId>(spec.outputs.size(), kNoTensor);
  }
  Op op;
  op.name = name;
  op.kind = spec.kind;
  op.attrs = spec.attrs;
  op.phase = spec.phase;
  for (const std::string &in : spec.inputs) op.inputs.push_back(in.empty() ? kNoTensor : use(in, &at));
  op.outputs.assign(spec.outputs.size(), kNoTensor);
  std::vector<TensorType> types = infer_output_types(g, op);
  CLEAVE_CHECK(types.size() == spec.outputs.size(), at.label);
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    if (spec.outputs[i].empty()) continue;
    check_against_onnx(spec.outputs[i], types[i], at);
    checked_num_elements(types[i].shape, at.label + ": output \"" + spec.outputs[i] + "\"");
    op.outputs[i] = define_source(Tensor{spec.outputs[i], types[i].dtype, types[i].shape, Role::activation, {}});
  }
  g.add_op(std::move(op));
  std::vector<TensorId> ids;
  for (const std::string &out : spec.outputs) ids.push_back(out.empty() ? kNoTensor : slots_.at(out).id);
  return ids;
}

void translate_node(Importer &im, const NodeCtx &n) {
  Translator t = find_translator(n.domain, n.op_type);
  CLEAVE_CHECK(t != nullptr, n.label);
  try {
    t(im, n);
  } catch (const UserError &e) {
    std::string msg = e.what();
    // Errors from the IR's shape rules and interpreter start with `op "name" (Kind): `; the node's label says more.
    std::string ir_prefix = "op \"" + n.name + "\" (";
    if (msg.rfind(ir_prefix, 0) == 0 && msg.find("): ") != std::string::npos) msg = msg.substr(msg.find("): ") + 3);
    if (msg.rfind("node \"", 0) != 0 && msg.rfind(kUnsupportedNodeLine, 0) != 0) msg = n.label + ": " + msg;
    throw UserError(msg, e.exit_code());
  }
}

// ---- helpers ----

namespace {
const Tensor &const_input(Importer &im, const NodeCtx &n, size_t i, const std::string &what) {
  std::string name = n.in(i);
  if (name.empty()) n.fail("input " + what + " is missing");
  if (!im.defined(name)) n.fail("input \"" + name + "\" is not defined");
  const Tensor *t = im.known_value(name);
  if (t == nullptr)
    n.fail("input " + what + " (\"" + name + "\") must be a compile-time constant");
  return *t;
}
}  // namespace

std::vector<int64_t> const_ints(Importer &im, const NodeCtx &n, size_t i, const std::string &what) {
  return data_as_ints(const_input(im, n, i, what));
}

std::vector<double> const_doubles(Importer &im, const NodeCtx &n, size_t i, const std::string &what) {
  return data_as_doubles(const_input(im, n, i, what));
}

int64_t norm_axis(const NodeCtx &n, int64_t axis, int64_t rank, const std::string &what) {
  if (axis < -rank || axis >= rank)
    n.fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

OpSpec same_operands(const NodeCtx &n, OpKind k) {
  OpSpec s;
  s.kind = k;
  s.phase = n.phase;
  for (size_t i = 0; i < n.num_in(); ++i) s.inputs.push_back(n.in(i));
  for (size_t i = 0; i < n.num_out(); ++i) s.outputs.push_back(n.out(i));
  return s;
}

}  // namespace cleave
