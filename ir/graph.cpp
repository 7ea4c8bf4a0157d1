#include "ir/graph.h"

#include "ir/error.h"

namespace cleave {

const char *attr_type_name(const Attr &a) {
  static const char *const kNames[] = {"int", "float", "string", "ints", "floats"};
  return kNames[a.index()];
}

namespace {

/** A missing or mistyped attribute is the input's fault (IR text names ops and attributes freely; the frontend
 *  always sets them), so it is a user error naming the op. */
template <typename T>
const T &get_attr(const Op &op, const std::string &key) {
  auto it = op.attrs.find(key);
  if (it == op.attrs.end())
    CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), ") has no attribute ", key);
  const T *v = std::get_if<T>(&it->second);
  if (!v)
    CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), ") attribute ", key, " is ",
                      attr_type_name(it->second), ", not ", attr_type_name(Attr(T{})));
  return *v;
}

}  // namespace

int64_t Op::attr_int(const std::string &key) const { return get_attr<int64_t>(*this, key); }
int64_t Op::attr_int(const std::string &key, int64_t def) const { return has_attr(key) ? attr_int(key) : def; }
double Op::attr_float(const std::string &key) const { return get_attr<double>(*this, key); }
double Op::attr_float(const std::string &key, double def) const { return has_attr(key) ? attr_float(key) : def; }
const std::string &Op::attr_string(const std::string &key) const { return get_attr<std::string>(*this, key); }
const std::vector<int64_t> &Op::attr_ints(const std::string &key) const {
  return get_attr<std::vector<int64_t>>(*this, key);
}
std::vector<int64_t> Op::attr_ints(const std::string &key, std::vector<int64_t> def) const {
  return has_attr(key) ? attr_ints(key) : def;
}
const std::vector<double> &Op::attr_floats(const std::string &key) const {
  return get_attr<std::vector<double>>(*this, key);
}

TensorId Graph::add_tensor(Tensor t) {
  if (tensor_by_name_.count(t.name)) CLEAVE_USER_ERROR("duplicate tensor name \"", t.name, "\"");
  auto id = static_cast<TensorId>(tensors_.size());
  t.producer = kNoOp;
  tensor_by_name_.emplace(t.name, id);
  tensors_.push_back(std::move(t));
  return id;
}

TensorId Graph::add_tensor(std::string name, DType dtype, Shape shape, Role role) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.role = role;
  return add_tensor(std::move(t));
}

OpId Graph::add_op(Op op) {
  if (op_by_name_.count(op.name)) CLEAVE_USER_ERROR("duplicate op name \"", op.name, "\"");
  auto id = static_cast<OpId>(ops_.size());
  for (TensorId in : op.inputs) CLEAVE_CHECK(in == kNoTensor || (in >= 0 && in < num_tensors()), "bad input id");
  for (TensorId out : op.outputs) {
    if (out == kNoTensor) continue;
    CLEAVE_CHECK(out >= 0 && out < num_tensors(), "bad output id");
    Tensor &t = tensors_[static_cast<size_t>(out)];
    if (t.producer == id) CLEAVE_USER_ERROR("op \"", op.name, "\" lists output \"", t.name, "\" twice");
    if (t.producer != kNoOp)
      CLEAVE_USER_ERROR("tensor \"", t.name, "\" is produced by both \"", ops_[static_cast<size_t>(t.producer)].name,
                        "\" and \"", op.name, "\"");
    t.producer = id;
  }
  if (op.group == kNoOp) op.group = id;
  op_by_name_.emplace(op.name, id);
  ops_.push_back(std::move(op));
  return id;
}

std::optional<TensorId> Graph::find_tensor(const std::string &name) const {
  auto it = tensor_by_name_.find(name);
  if (it == tensor_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<OpId> Graph::find_op(const std::string &name) const {
  auto it = op_by_name_.find(name);
  if (it == op_by_name_.end()) return std::nullopt;
  return it->second;
}

namespace {
template <typename Map>
std::string fresh_name(const Map &m, const std::string &base) {
  if (!m.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "." + std::to_string(i);
    if (!m.count(candidate)) return candidate;
  }
}
}  // namespace

std::string Graph::fresh_tensor_name(const std::string &base) const { return fresh_name(tensor_by_name_, base); }
std::string Graph::fresh_op_name(const std::string &base) const { return fresh_name(op_by_name_, base); }

std::vector<std::vector<OpId>> Graph::all_consumers() const {
  std::vector<std::vector<OpId>> result(tensors_.size());
  for (OpId i = 0; i < num_ops(); ++i)
    for (TensorId in : ops_[static_cast<size_t>(i)].inputs) {
      if (in == kNoTensor) continue;
      std::vector<OpId> &r = result[static_cast<size_t>(in)];
      if (r.empty() || r.back() != i) r.push_back(i);  // an op reading t twice is listed once, as consumers() does
    }
  return result;
}

std::vector<OpId> Graph::consumers(TensorId t) const {
  std::vector<OpId> result;
  for (OpId i = 0; i < num_ops(); ++i)
    for (TensorId in : ops_[static_cast<size_t>(i)].inputs)
      if (in == t) {
        result.push_back(i);
        break;
      }
  return result;
}

}  // namespace cleave
