#include "frontend/prob_targets.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/expand_functions.h"
#include "frontend/model_loader.h"
#include "frontend/node_attrs.h"
#include "ir/error.h"

namespace cleave {
namespace {

bool is_float_type(int32_t t) {
  using T = onnx::TensorProto;
  return t == T::FLOAT || t == T::DOUBLE || t == T::FLOAT16 || t == T::BFLOAT16;
}

/** The declared element type and rank (-1: unknown) of each graph input, initializer and value_info. */
struct Declared {
  int32_t elem = 0;
  int rank = -1;
};

std::map<std::string, Declared> declared_types(const onnx::GraphProto &g) {
  std::map<std::string, Declared> out;
  auto declare = [&](const onnx::ValueInfoProto &vi) {
    if (!vi.has_type() || !vi.type().has_tensor_type()) return;
    const auto &tt = vi.type().tensor_type();
    out[vi.name()] = {tt.elem_type(), tt.has_shape() ? tt.shape().dim_size() : -1};
  };
  for (const auto &vi : g.input()) declare(vi);
  for (const auto &vi : g.value_info()) declare(vi);
  for (const auto &t : g.initializer()) out[t.name()] = {t.data_type(), t.dims_size()};
  return out;
}

}  // namespace

void expand_prob_target_losses(onnx::ModelProto &m) {
  onnx::GraphProto *g = m.mutable_graph();
  std::map<std::string, Declared> declared = declared_types(*g);
  auto float_labels = [&](const onnx::NodeProto &n) {
    if (n.op_type() != "SoftmaxCrossEntropyLoss" || !is_onnx_domain(n.domain()) || n.input_size() < 2) return false;
    auto it = declared.find(n.input(1));
    return it != declared.end() && is_float_type(it->second.elem);
  };
  bool any = false;
  for (const auto &n : g->node()) any = any || float_labels(n);
  if (!any) return;

  int64_t opset = 0;
  for (const auto &o : m.opset_import())
    if (is_onnx_domain(o.domain())) opset = o.version();
  std::vector<std::string> names = importer_names(*g);
  std::set<std::string> tensors, node_names(names.begin(), names.end());
  for (const auto &vi : g->input()) tensors.insert(vi.name());
  for (const auto &vi : g->output()) tensors.insert(vi.name());
  for (const auto &vi : g->value_info()) tensors.insert(vi.name());
  for (const auto &t : g->initializer()) tensors.insert(t.name());
  for (const auto &n : g->node()) {
    tensors.insert(n.input().begin(), n.input().end());
    tensors.insert(n.output().begin(), n.output().end());
  }

  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto &n = *g->mutable_node(i);
    const std::string &name = names[static_cast<size_t>(i)];
    if (!float_labels(n)) {
      n.set_name(name);
      *nodes.Add() = std::move(n);
      continue;
    }
    std::string where = node_label(name, n.op_type(), n.domain(), opset);
    std::string labels = "its labels \"" + n.input(1) + "\" are float (probability targets)";
    NodeAttrs attrs(n, where);
    if (n.input_size() > 2 && !n.input(2).empty())
      CLEAVE_USER_ERROR(where, ": ", labels, ", which cannot take a class weight here");
    // torch writes its default ignore_index (-100) with probability targets too, and ignores a negative one.
    if (int64_t ignore = attrs.get_int("ignore_index", -1); ignore >= 0)
      CLEAVE_USER_ERROR(where, ": ", labels, ", which cannot take an ignore_index (", ignore, ")");
    if (declared[n.input(1)].rank >= 0 && declared[n.input(1)].rank < 2)
      CLEAVE_USER_ERROR(where, ": ", labels, " of rank ", declared[n.input(1)].rank,
                        ": probability targets have the scores' shape [N, C, ...]");
    std::string reduction = attrs.get_string("reduction", "mean");
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
      CLEAVE_USER_ERROR(where, ": reduction \"", reduction, "\" is not mean, sum or none");

    auto add = [&](const std::string &op, std::vector<std::string> inputs, const std::string &output) {
      onnx::NodeProto *b = nodes.Add();
      b->set_op_type(op);
      b->set_name(fresh_name(node_names, name + "/" + op));
      for (auto &s : inputs) b->add_input(s);
      b->add_output(output);
      return b;
    };
    auto set_int = [](onnx::NodeProto *b, const std::string &attr, int64_t v) {
      onnx::AttributeProto *a = b->add_attribute();
      a->set_name(attr);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(v);
    };
    bool asked = n.output_size() > 1 && !n.output(1).empty();
    std::string log_prob = asked ? n.output(1) : fresh_name(tensors, name + "/log_prob");
    set_int(add("LogSoftmax", {n.input(0)}, log_prob), "axis", 1);
    std::string weighted = fresh_name(tensors, name + "/weighted_log_prob");
    add("Mul", {log_prob, n.input(1)}, weighted);
    // The sum over the classes: axis 1 (ReduceSum takes its axes as an input from opset 13).
    std::string per_sample = fresh_name(tensors, name + "/sample_log_likelihood");
    onnx::NodeProto *sum = nullptr;
    if (opset >= 13) {
      std::string axes = fresh_name(tensors, name + "/class_axis");
      onnx::NodeProto *c = add("Constant", {}, axes);
      onnx::AttributeProto *value = c->add_attribute();
      value->set_name("value");
      value->set_type(onnx::AttributeProto::TENSOR);
      value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
      value->mutable_t()->add_dims(1);
      value->mutable_t()->add_int64_data(1);
      sum = add("ReduceSum", {weighted, axes}, per_sample);
    } else {
      sum = add("ReduceSum", {weighted}, per_sample);
      onnx::AttributeProto *a = sum->add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      a->add_ints(1);
    }
    set_int(sum, "keepdims", 0);
    std::string loss_in = per_sample;
    if (reduction != "none") {
      // ReduceMean / ReduceSum without axes reduce every axis: a scalar.
      loss_in = fresh_name(tensors, name + "/" + reduction + "_log_likelihood");
      set_int(add(reduction == "mean" ? "ReduceMean" : "ReduceSum", {per_sample}, loss_in), "keepdims", 0);
    }
    add("Neg", {loss_in}, n.output(0));
  }
  g->mutable_node()->Swap(&nodes);
}

}  // namespace cleave
