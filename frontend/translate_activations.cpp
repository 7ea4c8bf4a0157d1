// Activations, rounding, Clip and the variadic Sum/Mean. Activations map one-to-one with ONNX's attribute defaults
// made explicit; Clip's min/max inputs (opset >= 11) must be compile-time constants and become attributes; Sum and
// Mean lower to a left-to-right chain of Adds (and one Div by the count), which is what they compute.
#include <onnx/onnx_pb.h>

#include <map>

#include "frontend/importer.h"
#include "ir/tensor_data.h"

namespace cleave {

void translate_activation(Importer &im, const NodeCtx &n) {
  // ONNX's float attributes and their defaults, per op.
  static const std::map<std::string, std::vector<std::pair<const char *, double>>> kAttrs = {
      {"LeakyRelu", {{"alpha", 0.01}}},
      {"Elu", {{"alpha", 1.0}}},
      {"Celu", {{"alpha", 1.0}}},
      {"Selu", {{"alpha", 1.67326319217681884765625}, {"gamma", 1.05070102214813232421875}}},
      {"HardSigmoid", {{"alpha", 0.2}, {"beta", 0.5}}},
      {"ThresholdedRelu", {{"alpha", 1.0}}},
  };
  std::optional<OpKind> k = parse_op_kind(n.op_type);
  if (!k) n.fail("no IR op");  // unreachable: the op table only routes IR-named ops here
  OpSpec s = same_operands(n, *k);
  auto it = kAttrs.find(n.op_type);
  if (it != kAttrs.end())
    for (const auto &[key, def] : it->second) s.attrs[key] = n.attrs.get_float(key, def);
  im.emit(s, n.name, n);
}

void translate_gelu(Importer &im, const NodeCtx &n) {
  std::string approximate = n.attrs.get_string("approximate", "none");
  if (approximate != "none") n.fail("approximate=\"" + approximate + "\" is not supported (only \"none\")");
  im.emit(same_operands(n, OpKind::Gelu), n.name, n);
}

void translate_clip(Importer &im, const NodeCtx &n) {
  OpSpec s;
  s.kind = OpKind::Clip;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  s.outputs = {n.out(0)};
  if (n.opset < 11) {
    if (auto v = n.attrs.opt_float("min")) s.attrs["min"] = *v;
    if (auto v = n.attrs.opt_float("max")) s.attrs["max"] = *v;
  } else {
    const char *names[] = {"min", "max"};
    for (size_t i = 1; i <= 2; ++i) {
      if (n.in(i).empty()) continue;
      std::vector<double> v = const_doubles(im, n, i, std::string("\"") + names[i - 1] + "\"");
      if (v.size() != 1) n.fail(std::string("input \"") + names[i - 1] + "\" must be a scalar");
      s.attrs[names[i - 1]] = v[0];
    }
  }
  im.emit(s, n.name, n);
}

void translate_sum_mean(Importer &im, const NodeCtx &n) {
  std::vector<std::string> ins;
  for (size_t i = 0; i < n.num_in(); ++i)
    if (!n.in(i).empty()) ins.push_back(n.in(i));
  if (ins.empty()) n.fail("needs at least one input");
  bool mean = n.op_type == "Mean";
  bool first = true;
  auto op = [&](OpKind kind, std::vector<std::string> operands, const std::string &out) {
    OpSpec s;
    s.kind = kind;
    s.phase = n.phase;
    s.inputs = std::move(operands);
    s.outputs = {out};
    im.emit(s, first ? n.name : im.fresh_op_name(n.name), n);
    first = false;
  };
  const std::string sum_name = mean && ins.size() > 1 ? im.fresh_tensor_name(n.out(0) + ".sum") : n.out(0);
  if (ins.size() == 1) {
    op(OpKind::Identity, {ins[0]}, n.out(0));
    return;
  }
  std::string acc = ins[0];
  for (size_t i = 1; i < ins.size(); ++i) {
    std::string out = i + 1 == ins.size() ? sum_name : im.fresh_tensor_name(n.out(0) + ".partial");
    op(OpKind::Add, {acc, ins[i]}, out);
    acc = out;
  }
  if (!mean) return;
  DType dt = im.type_of(ins[0], n).dtype;
  Tensor count{im.fresh_tensor_name(n.out(0) + ".count"), dt, {}, Role::constant, {}};
  count.data = encode_doubles(dt, {static_cast<double>(ins.size())});
  std::string count_name = count.name;
  im.define_const(std::move(count));
  op(OpKind::Div, {acc, count_name}, n.out(0));
}

}  // namespace cleave
