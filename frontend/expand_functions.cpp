#include "frontend/expand_functions.h"

#include <onnx/defs/schema.h>

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "frontend/importer.h"
#include "ir/error.h"

namespace cleave {
namespace {

constexpr int kMaxDepth = 8;
/** Body nodes all expansions of one model may look at: bodies calling a function several times nest exponentially. */
constexpr int64_t kMaxNodes = 100000;
/** The start of the reasons that concern the whole nest of bodies (reported as they are, not once per level). */
const std::string kLimit = "its function bodies ";

std::string norm_domain(const std::string &d) { return is_onnx_domain(d) ? "" : d; }

/** Opset version by domain ("" = ai.onnx), as a model or a function imports them. */
using Opsets = std::map<std::string, int64_t>;

template <typename Imports>
Opsets opsets_of(const Imports &imports, Opsets inherited = {}) {
  for (const auto &o : imports) inherited[norm_domain(o.domain())] = o.version();
  return inherited;
}

/** A body op whose version at the body's opset differs from its version at the model's (ReduceSum-11 vs -13). */
struct VersionGap {
  std::string domain;
  int64_t body = 0, model = 0;
  std::string at_body, at_model;  // "ReduceSum-11", "ReduceSum-13"
};

/** Why a body node written for opset `body` of its domain may not be translated at the model's opset `model`, or
 *  empty; an op whose version differs is added to `gaps` instead (the caller lists them in one note). Translators read
 *  every node at the model's opset. */
std::string opset_problem(const onnx::NodeProto &n, int64_t body, int64_t model, std::vector<VersionGap> &gaps) {
  std::string op = escape_control(n.op_type());
  std::string domain = is_onnx_domain(n.domain()) ? "ai.onnx" : escape_control(n.domain());
  if (model < 0) return "its function body uses domain " + domain + ", which the model does not import";
  if (body == model) return {};
  const onnx::OpSchema *at_body = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(body), n.domain());
  const onnx::OpSchema *at_model = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(model), n.domain());
  if (at_model == nullptr)
    return "its function body uses " + op + ", which " + domain + " opset " + std::to_string(model) +
           " (the model's) does not define";
  if (at_body == nullptr || at_body->since_version() == at_model->since_version()) return {};
  // Between ai.onnx opsets 13 and 17 every op change added types, or attributes whose defaults keep the old
  // meaning (Reshape's allowzero, Shape's start/end, the RNNs' layout, ScatterND's reduction), except these two:
  // BatchNormalization-14 replaced the training outputs by training_mode, RoiAlign-16 changed a default.
  static const std::set<std::string> kChangedMeaning = {"BatchNormalization", "RoiAlign"};
  bool compatible = is_onnx_domain(n.domain()) && body >= 13 && body <= 17 && model >= 13 && model <= 17 &&
                    !kChangedMeaning.count(n.op_type());
  if (compatible) return {};
  VersionGap gap{domain, body, model, op + "-" + std::to_string(at_body->since_version()),
                 op + "-" + std::to_string(at_model->since_version())};
  for (const VersionGap &g : gaps)
    if (g.domain == gap.domain && g.at_body == gap.at_body) return {};
  gaps.push_back(std::move(gap));
  return {};
}

/** One note per (domain, body opset, model opset): "its function body uses A-11, B-8 (ai.onnx opset 11), not A-13,
 *  B-13 of the model's opset 15". */
std::vector<std::string> version_notes(const std::vector<VersionGap> &gaps) {
  std::vector<std::string> notes;
  std::vector<bool> done(gaps.size(), false);
  for (size_t i = 0; i < gaps.size(); ++i) {
    if (done[i]) continue;
    std::string at_body, at_model;
    for (size_t j = i; j < gaps.size(); ++j) {
      const VersionGap &g = gaps[j];
      if (g.domain != gaps[i].domain || g.body != gaps[i].body || g.model != gaps[i].model) continue;
      done[j] = true;
      at_body += (at_body.empty() ? "" : ", ") + g.at_body;
      at_model += (at_model.empty() ? "" : ", ") + g.at_model;
    }
    notes.push_back("its function body uses " + at_body + " (" + gaps[i].domain + " opset " +
                    std::to_string(gaps[i].body) + "), not " + at_model + " of the model's opset " +
                    std::to_string(gaps[i].model));
  }
  return notes;
}

class Expander {
 public:
  explicit Expander(const onnx::ModelProto &m) : model_opsets_(opsets_of(m.opset_import())) {
    const onnx::GraphProto &g = m.graph();
    auto declare = [&](const onnx::ValueInfoProto &vi) {
      tensor_names_.insert(vi.name());
      if (vi.has_type()) types_.emplace(vi.name(), vi.type());
    };
    for (const auto &vi : g.input()) declare(vi);
    for (const auto &vi : g.output()) declare(vi);
    for (const auto &vi : g.value_info()) declare(vi);
    for (const auto &t : g.initializer()) {
      tensor_names_.insert(t.name());
      onnx::TypeProto type;
      auto *tt = type.mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
      types_.emplace(t.name(), std::move(type));
    }
    for (const auto &f : m.functions()) local_functions_.emplace(std::make_pair(norm_domain(f.domain()), f.name()), &f);
    for (const auto &n : g.node()) {
      for (const auto &s : n.input()) tensor_names_.insert(s);
      for (const auto &s : n.output()) tensor_names_.insert(s);
      if (!n.name().empty()) node_names_.insert(n.name());
    }
  }

  const Opsets &model_opsets() const { return model_opsets_; }
  std::set<std::string> &node_names() { return node_names_; }

  /** Appends the expansion of `n` (named `name`, read at `opsets`) to `out`. Returns nullopt on success, "" if `n`
   *  has no function body at all, else why it cannot be expanded. `out` is garbage unless it succeeded. */
  std::optional<std::string> expand(const onnx::NodeProto &n, const std::string &name, const Opsets &opsets,
                                    int depth, std::vector<onnx::NodeProto> &out) {
    const onnx::OpSchema *schema = nullptr;
    std::optional<onnx::FunctionProto> f = function_of(n, opsets, schema);
    if (!f) return build_problem_.empty() ? std::string() : build_problem_;
    if (depth >= kMaxDepth) return kLimit + "nest deeper than " + std::to_string(kMaxDepth);
    Opsets body_opsets = opsets_of(f->opset_import(), opsets);

    std::map<std::string, std::string> rename;
    for (int i = 0; i < f->input_size(); ++i) rename[f->input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < f->output_size(); ++i)
      rename[f->output(i)] = i < n.output_size() && !n.output(i).empty() ? n.output(i)
                                                                          : fresh_name(tensor_names_, name + "/" + f->output(i));
    auto renamed = [&](const std::string &s) {
      if (s.empty()) return s;
      auto it = rename.find(s);
      if (it == rename.end()) it = rename.emplace(s, fresh_name(tensor_names_, name + "/" + s)).first;
      return it->second;
    };

    std::vector<std::string> problems;
    std::vector<VersionGap> gaps;
    auto note = [&](const std::string &p) {
      for (const auto &q : problems)
        if (q == p) return;
      problems.push_back(p);
    };
    for (int j = 0; j < f->node_size(); ++j) {
      if (++visited_ > kMaxNodes) return kLimit + "expand to more than " + std::to_string(kMaxNodes) + " nodes";
      const onnx::NodeProto &b = f->node(j);
      onnx::NodeProto c = b;
      for (auto &s : *c.mutable_input()) s = renamed(s);
      for (auto &s : *c.mutable_output()) s = renamed(s);
      substitute_attributes(c, n, schema);
      std::string base = b.name().empty() ? b.op_type() + "_" + std::to_string(j) : b.name();
      c.set_name(fresh_name(node_names_, name + "/" + base));
      std::string domain = norm_domain(c.domain());
      if (find_translator(domain, c.op_type())) {
        auto body = body_opsets.find(domain);
        auto model = model_opsets_.find(domain);
        std::string p = opset_problem(c, body == body_opsets.end() ? -1 : body->second,
                                      model == model_opsets_.end() ? -1 : model->second, gaps);
        if (!p.empty()) note(p);
        out.push_back(std::move(c));
        continue;
      }
      std::optional<std::string> inner = expand(c, c.name(), body_opsets, depth + 1, out);
      if (!inner) continue;
      std::string op = escape_control(c.op_type());
      if (inner->empty())
        note("its function body needs " + op);
      else if (inner->rfind(kLimit, 0) == 0)
        return inner;
      else
        note("its function body needs " + op + " (" + *inner + ")");
    }
    for (const std::string &p : version_notes(gaps)) note(p);
    if (problems.empty()) return std::nullopt;
    std::string why;
    for (const auto &p : problems) why += (why.empty() ? "" : "; ") + p;
    return why;
  }

 private:
  const onnx::FunctionProto *local_function(const onnx::NodeProto &n) const {
    auto it = local_functions_.find({norm_domain(n.domain()), n.op_type()});
    return it == local_functions_.end() ? nullptr : it->second;
  }

  /** The function body of `n` at `opsets` (`schema` set when it is a schema's), or nullopt; then build_problem_
   *  says why a body exists but could not be built, or is empty. */
  std::optional<onnx::FunctionProto> function_of(const onnx::NodeProto &n, const Opsets &opsets,
                                                 const onnx::OpSchema *&schema) {
    build_problem_.clear();
    if (const onnx::FunctionProto *f = local_function(n)) return *f;
    auto v = opsets.find(norm_domain(n.domain()));
    if (v == opsets.end()) return std::nullopt;
    schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(v->second), n.domain());
    if (schema == nullptr) return std::nullopt;
    if (schema->HasFunction()) return *schema->GetFunction();
    if (!schema->HasContextDependentFunction()) return std::nullopt;
    std::vector<onnx::TypeProto> input_types;
    bool all_typed = true;
    for (const auto &in : n.input()) {
      auto it = types_.find(in);
      all_typed = all_typed && (in.empty() || it != types_.end());
      input_types.push_back(it == types_.end() ? onnx::TypeProto() : it->second);
    }
    onnx::FunctionBodyBuildContextImpl ctx(n, input_types);
    onnx::FunctionProto f;
    try {
      if (schema->BuildContextDependentFunction(ctx, f)) return f;
    } catch (const std::exception &) {
      // reported below like a refusal
    }
    build_problem_ = all_typed ? "its function body could not be built"
                               : "its function body depends on input types the model does not declare";
    return std::nullopt;
  }

  /** Replaces the attributes of body node `c` that refer to one of the calling node's (ref_attr_name) by that
   *  attribute, else by the schema's default; drops them when neither exists. */
  static void substitute_attributes(onnx::NodeProto &c, const onnx::NodeProto &caller, const onnx::OpSchema *schema) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
    for (const auto &a : c.attribute()) {
      if (a.ref_attr_name().empty()) {
        *attrs.Add() = a;
        continue;
      }
      const onnx::AttributeProto *value = nullptr;
      for (const auto &ca : caller.attribute())
        if (ca.name() == a.ref_attr_name()) value = &ca;
      if (value == nullptr && schema != nullptr) {
        auto it = schema->attributes().find(a.ref_attr_name());
        if (it != schema->attributes().end() && it->second.default_value.type() != onnx::AttributeProto::UNDEFINED)
          value = &it->second.default_value;
      }
      if (value == nullptr) continue;
      onnx::AttributeProto *added = attrs.Add();
      *added = *value;
      added->set_name(a.name());
    }
    c.mutable_attribute()->Swap(&attrs);
  }

  Opsets model_opsets_;
  /** ModelProto.functions by (domain, name) (the first, if one is defined twice). */
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto *> local_functions_;
  std::set<std::string> tensor_names_, node_names_;
  std::map<std::string, onnx::TypeProto> types_;
  std::string build_problem_;
  int64_t visited_ = 0;  // body nodes looked at, by all expansions
};

}  // namespace

std::string fresh_name(std::set<std::string> &taken, const std::string &base) {
  std::string name = base;
  for (int k = 1; taken.count(name); ++k) name = base + "." + std::to_string(k);
  taken.insert(name);
  return name;
}

std::vector<std::string> importer_names(const onnx::GraphProto &g) {
  std::set<std::string> taken;
  std::vector<std::string> names(g.node_size());
  for (int i = 0; i < g.node_size(); ++i)
    if (!g.node(i).name().empty() && taken.insert(g.node(i).name()).second) names[i] = g.node(i).name();
  for (int i = 0; i < g.node_size(); ++i)
    if (names[i].empty()) names[i] = fresh_name(taken, g.node(i).op_type() + "_" + std::to_string(i));
  return names;
}

UnexpandedNodes expand_functions(onnx::ModelProto &m) {
  onnx::GraphProto *g = m.mutable_graph();
  std::vector<int> todo;
  for (int i = 0; i < g->node_size(); ++i)
    if (!find_translator(norm_domain(g->node(i).domain()), g->node(i).op_type())) todo.push_back(i);
  if (todo.empty()) return {};

  std::vector<std::string> names = importer_names(*g);
  Expander ex(m);
  for (const auto &n : names) ex.node_names().insert(n);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  UnexpandedNodes unexpanded;
  size_t next = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto &n = *g->mutable_node(i);
    if (next < todo.size() && todo[next] == i) {
      ++next;
      std::vector<onnx::NodeProto> body;
      std::optional<std::string> why = ex.expand(n, names[static_cast<size_t>(i)], ex.model_opsets(), 0, body);
      if (!why) {
        for (auto &b : body) *nodes.Add() = std::move(b);
        continue;
      }
      if (!why->empty()) unexpanded[nodes.size()] = *why;
    }
    // Named as the importer names it (the same name it would get anyway), before bodies move the indices its
    // generated name is made of.
    n.set_name(names[static_cast<size_t>(i)]);
    *nodes.Add() = std::move(n);
  }
  g->mutable_node()->Swap(&nodes);
  return unexpanded;
}

}  // namespace cleave
