#include "frontend/model_loader.h"

#include <onnx/checker.h>
#include <onnx/common/file_utils.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "frontend/importer.h"
#include "frontend/node_attrs.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/types.h"

namespace cleave {
namespace {

std::string first_line(const std::string &s) {
  std::string line = s.substr(0, s.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '.' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string attr_type_label(int type) {
  if (!onnx::AttributeProto::AttributeType_IsValid(type)) return "type " + std::to_string(type);
  std::string n = onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type));
  for (char &c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}


/** ai.onnx ops whose behaviour on Cleave's dtypes is the same at every opset from 7 to 17. */
bool stable_since_opset7(const std::string &op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Sqrt",
                                             "Relu", "Sigmoid", "Tanh", "MatMul", "Identity"};
  return kOps.count(op) != 0;
}

}  // namespace

std::string node_label(const std::string &name, const std::string &op_type, const std::string &domain, int64_t opset) {
  std::string d = is_onnx_domain(domain) ? "" : domain + ", ";
  return "node \"" + name + "\" (" + op_type + ", " + d + "opset " + std::to_string(opset) + ")";
}

onnx::ModelProto load_model(const std::string &path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) CLEAVE_USER_ERROR(path, ": no such file");
  onnx::ModelProto m;
  try {
    onnx::LoadProtoFromPath(path, m);
  } catch (const std::exception &e) {
    CLEAVE_USER_ERROR(path, ": not a valid onnx model (cannot parse the protobuf)");
  }
  if (!m.has_graph() || m.ir_version() <= 0)
    CLEAVE_USER_ERROR(path, ": not a valid onnx model (no graph or ir_version)");
  return m;
}

int64_t model_opset(const onnx::ModelProto &m, const std::string &domain) {
  for (const auto &o : m.opset_import())
    if (is_onnx_domain(o.domain()) ? is_onnx_domain(domain) : o.domain() == domain) return o.version();
  return -1;
}

void check_opsets(const onnx::ModelProto &m) {
  int64_t v = model_opset(m, "");
  bool has_onnx_nodes = false, all_stable = true;
  for (const auto &n : m.graph().node()) {
    if (!is_onnx_domain(n.domain())) continue;
    has_onnx_nodes = true;
    all_stable = all_stable && stable_since_opset7(n.op_type());
  }
  if (has_onnx_nodes || v >= 0) {
    bool ok = (v >= 13 && v <= 17) || (v >= 7 && v < 13 && all_stable);
    if (!ok)
      throw UserError("ai.onnx opset " + std::to_string(v) + " is not supported (cleave reads opsets 13 to 17)", 2);
  }
  int64_t t = model_opset(m, "ai.onnx.preview.training");
  if (t >= 0 && t != 1)
    throw UserError("ai.onnx.preview.training opset " + std::to_string(t) + " is not supported (only opset 1)", 2);
}

void check_node_attributes(const onnx::ModelProto &m) {
  std::function<void(const onnx::GraphProto &)> scan = [&](const onnx::GraphProto &g) {
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto &n = g.node(i);
      int64_t opset = model_opset(m, n.domain());
      const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), n.domain());
      if (schema == nullptr) continue;  // onnx's checker reports it
      std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      NodeAttrs attrs(n, node_label(name, n.op_type(), n.domain(), opset));
      for (const auto &a : n.attribute()) {
        auto it = schema->attributes().find(a.name());
        if (it == schema->attributes().end() || !a.ref_attr_name().empty()) continue;
        if (a.type() != it->second.type)
          attrs.fail("attribute \"" + a.name() + "\" must be " + attr_type_label(it->second.type) + ", got " +
                     attr_type_label(a.type()));
      }
      for (const auto &[key, spec] : schema->attributes())
        if (spec.required && !attrs.has(key)) attrs.fail("missing required attribute \"" + key + "\"");
      for (const auto &a : n.attribute()) {  // If's branches: their nodes reach shape inference too
        if (a.has_g()) scan(a.g());
        for (const auto &sub : a.graphs()) scan(sub);
      }
    }
  };
  scan(m.graph());
}

void run_onnx_checker(const onnx::ModelProto &model, const std::string &model_dir) {
  // onnx's checker (given a ModelProto) stats external data files relative to the working directory, and planning
  // must work without them. So it checks a copy in which the main graph's external initializers are plain graph
  // inputs of the same type (after our own checks of where they point, whose messages win), and those of training
  // graphs (always loaded) point at their checked absolute paths.
  const onnx::ModelProto *m = &model;
  onnx::ModelProto copy;
  auto has_external = [](const onnx::GraphProto &g) {
    for (const auto &t : g.initializer())
      if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
    return false;
  };
  bool any = has_external(model.graph());
  for (const auto &ti : model.training_info()) any = any || has_external(ti.algorithm()) || has_external(ti.initialization());
  if (any) {
    copy = model;
    onnx::GraphProto *main = copy.mutable_graph();
    std::set<std::string> inputs;
    for (const auto &in : main->input()) inputs.insert(in.name());
    google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
    for (auto &t : *main->mutable_initializer()) {
      if (t.data_location() != onnx::TensorProto::EXTERNAL) {
        *kept.Add() = std::move(t);
        continue;
      }
      external_data_ref(t, model_dir, "initializer \"" + t.name() + "\"");
      if (!inputs.insert(t.name()).second) continue;
      onnx::ValueInfoProto *vi = main->add_input();
      vi->set_name(t.name());
      auto *tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      auto *shape = tt->mutable_shape();
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    }
    main->mutable_initializer()->Swap(&kept);
    auto relocate = [&](onnx::GraphProto *g) {
      for (auto &t : *g->mutable_initializer()) {
        if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
        std::string file = external_data_path(t, model_dir, "initializer \"" + t.name() + "\"");
        for (auto &e : *t.mutable_external_data())
          if (e.key() == "location") e.set_value(file);
      }
    };
    for (auto &ti : *copy.mutable_training_info()) {
      relocate(ti.mutable_algorithm());
      relocate(ti.mutable_initialization());
    }
    m = &copy;
  }
  try {
    onnx::checker::check_model(*m);
  } catch (const std::exception &e) {
    CLEAVE_USER_ERROR("onnx checker: ", first_line(e.what()));
  }
}

void check_nodes_supported(const onnx::ModelProto &m, const std::string &path,
                           const std::map<int, std::string> &unexpanded) {
  std::vector<std::string> bad;
  auto scan = [&](const onnx::GraphProto &g, const std::map<int, std::string> &why) {
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto &n = g.node(i);
      if (find_translator(n.domain(), n.op_type())) continue;
      std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
      std::string domain = is_onnx_domain(n.domain()) ? "ai.onnx" : n.domain();
      auto reason = why.find(i);
      bad.push_back(quote_excerpt(name, 200) + " (" + escape_control(n.op_type()) + ", " + escape_control(domain) + ", opset " +
                    std::to_string(model_opset(m, n.domain())) +
                    (reason == why.end() ? "" : "; " + reason->second) + ")");
    }
  };
  scan(m.graph(), unexpanded);
  for (const auto &ti : m.training_info()) scan(ti.algorithm(), {});
  if (bad.empty()) return;
  std::ostringstream os;
  os << path << ": " << bad.size() << " unsupported node" << (bad.size() == 1 ? "" : "s") << ": ";
  for (size_t i = 0; i < bad.size(); ++i) os << (i ? ", " : "") << bad[i];
  throw UserError(os.str(), 2);
}

std::map<std::string, int> fix_input_shapes(onnx::ModelProto &m, const ImportOptions &opts) {
  std::set<std::string> inits;
  for (const auto &t : m.graph().initializer()) inits.insert(t.name());
  std::map<std::string, int> sample_axes;
  bool symbolic = false, batch_matches = false;  // some input's dimension took opts.batch; one's samples equal it
  std::string first;                              // the first input with a sample dimension, its shape and axis
  Shape first_shape;
  size_t first_axis = 0;
  for (auto &in : *m.mutable_graph()->mutable_input()) {
    if (inits.count(in.name())) continue;
    std::string what = "input \"" + in.name() + "\"";
    if (!in.type().has_tensor_type()) throw UserError(what + ": only tensor inputs are supported", 2);
    auto *tt = in.mutable_type()->mutable_tensor_type();
    if (!dtype_from_onnx(tt->elem_type()))
      throw UserError(what + ": element type " + onnx_dtype_name(tt->elem_type()) + " is not supported", 2);
    if (opts.input_values.count(in.name())) {
      // A bound value fixes the shape.
      const Tensor &v = opts.input_values.at(in.name());
      tt->mutable_shape()->clear_dim();
      for (int64_t d : v.shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
      continue;
    }
    if (!tt->has_shape()) CLEAVE_USER_ERROR(what, ": has no shape; cleave needs static shapes");
    int rank = tt->shape().dim_size();
    std::optional<int> axis;
    if (auto it = opts.batch_axes.find(in.name()); it != opts.batch_axes.end()) {
      if (it->second < 0 || it->second >= std::max(rank, 1))
        CLEAVE_USER_ERROR("--batch-axis: ", what, " has ", rank, " dims, no axis ", it->second);
      axis = it->second;
    }
    for (int i = 0; i < rank; ++i) {
      auto *d = tt->mutable_shape()->mutable_dim(i);
      if (d->has_dim_value()) {
        if (d->dim_value() < 0) CLEAVE_USER_ERROR(what, ": dimension ", i, " is negative");
        continue;
      }
      std::string sym = d->has_dim_param() ? "(\"" + d->dim_param() + "\")" : "(unnamed)";
      if (axis && *axis != i)
        CLEAVE_USER_ERROR(what, ": dimension ", i, " is symbolic ", sym, "; cleave needs static shapes except the ",
                          "sample axis (", *axis, ")");
      if (!opts.batch) CLEAVE_USER_ERROR(what, ": dimension ", i, " is symbolic ", sym, "; pass --batch N");
      d->set_dim_value(*opts.batch);
      axis = i;
      symbolic = true;
    }
    sample_axes[in.name()] = axis.value_or(0);
    if (rank > axis.value_or(0)) {
      batch_matches = batch_matches || tt->shape().dim(axis.value_or(0)).dim_value() == opts.batch;
      if (first.empty()) {
        first = what;
        for (int i = 0; i < rank; ++i) first_shape.push_back(tt->shape().dim(i).dim_value());
        first_axis = static_cast<size_t>(axis.value_or(0));
      }
    }
  }
  // A --batch that no input takes would be ignored: the step would silently run the model's own batch.
  if (opts.batch && !symbolic && !batch_matches && !first.empty())
    CLEAVE_USER_ERROR("--batch ", *opts.batch, ": the model's inputs have no symbolic dimension to take it (", first,
                      " ", shape_str(first_shape), "): pass --batch ", first_shape[first_axis],
                      ", or export the model with a dynamic batch axis");
  for (const auto &[name, axis] : opts.batch_axes)
    if (!sample_axes.count(name)) CLEAVE_USER_ERROR("--batch-axis: the model has no graph input ", quote_excerpt(name));
  return sample_axes;
}

std::map<std::string, TensorType> infer_onnx_types(onnx::ModelProto &m) {
  try {
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
  } catch (const std::exception &e) {
    CLEAVE_USER_ERROR("onnx shape inference: ", first_line(e.what()));
  }
  std::map<std::string, TensorType> types;
  auto take = [&](const onnx::ValueInfoProto &vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    const auto &tt = vi.type().tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt) return;
    TensorType t{*dt, {}};
    for (const auto &d : tt.shape().dim()) {
      if (!d.has_dim_value()) return;
      t.shape.push_back(d.dim_value());
    }
    types[vi.name()] = t;
  };
  for (const auto &vi : m.graph().value_info()) take(vi);
  for (const auto &vi : m.graph().output()) take(vi);
  return types;
}

}  // namespace cleave
