// import_onnx: the frontend's pipeline, top to bottom. Loading and checks live in model_loader.cpp, initializer
// decoding in tensor_proto.cpp, op translation in translate_*.cpp, folding in importer.cpp.
#include "frontend/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <queue>
#include <set>
#include <utility>

#include "frontend/class_test_casts.h"
#include "frontend/expand_functions.h"
#include "frontend/fuse_decomposed.h"
#include "frontend/importer.h"
#include "frontend/interleaved_rows.h"
#include "frontend/transposed_weights.h"
#include "frontend/model_checks.h"
#include "frontend/model_loader.h"
#include "frontend/prob_targets.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"

namespace cleave {
namespace {

/** Node indices of `g` in a topological order (ties broken by file order). `available` are the names defined
 *  before the graph runs. Throws UserError for undefined inputs, doubly-produced names and cycles. */
std::vector<int> topo_order(const onnx::GraphProto &g, const std::set<std::string> &available,
                            const std::vector<std::string> &names) {
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string &out : g.node(i).output()) {
      if (out.empty()) continue;
      if (available.count(out))
        CLEAVE_USER_ERROR("node \"", names[i], "\" (", g.node(i).op_type(), ") output \"", out,
                          "\" redefines a graph input or initializer");
      auto [it, fresh] = producer.emplace(out, i);
      if (!fresh)
        CLEAVE_USER_ERROR("tensor \"", out, "\" is produced by both node \"", names[it->second], "\" and node \"",
                          names[i], "\"");
    }
  std::vector<std::vector<int>> users(g.node_size());
  std::vector<int> pending(g.node_size(), 0);
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string &in : g.node(i).input()) {
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        CLEAVE_USER_ERROR("node \"", names[i], "\" (", g.node(i).op_type(), "): input \"", in, "\" is not defined");
      users[it->second].push_back(i);
      ++pending[i];
    }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < g.node_size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (static_cast<int>(order.size()) != g.node_size()) {
    // Walk producers from a stuck node until one repeats: that node is on a cycle.
    int at = 0;
    while (pending[at] == 0) ++at;
    std::set<int> seen;
    while (seen.insert(at).second) {
      for (const std::string &in : g.node(at).input()) {
        auto it = producer.find(in);
        if (!in.empty() && !available.count(in) && it != producer.end() && pending[it->second] > 0) {
          at = it->second;
          break;
        }
      }
    }
    CLEAVE_USER_ERROR("the graph has a cycle through node \"", names[at], "\" (", g.node(at).op_type(), ")");
  }
  return order;
}

/** IR op names for the nodes of `g`: the node's name if set and unique, else `<OpType>_<index>`. */
std::vector<std::string> op_names(const onnx::GraphProto &g, std::set<std::string> &taken,
                                  const std::string &prefix) {
  std::vector<std::string> names(g.node_size());
  for (int i = 0; i < g.node_size(); ++i) {
    const std::string &n = g.node(i).name();
    if (!n.empty() && taken.insert(n).second) names[i] = n;
  }
  for (int i = 0; i < g.node_size(); ++i) {
    if (!names[i].empty()) continue;
    std::string base = prefix + g.node(i).op_type() + "_" + std::to_string(i);
    std::string name = base;
    for (int k = 1; taken.count(name); ++k) name = base + "." + std::to_string(k);
    taken.insert(name);
    names[i] = name;
  }
  return names;
}

/** Tensors that feed a loss op as its target: graph inputs among them get role label. */
std::set<std::string> label_names(const onnx::GraphProto &g) {
  std::set<std::string> labels;
  for (const auto &n : g.node())
    if ((n.op_type() == "SoftmaxCrossEntropyLoss" || n.op_type() == "NegativeLogLikelihoodLoss") &&
        (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() > 1)
      labels.insert(n.input(1));
  return labels;
}

void define_initializers(Importer &im, const onnx::GraphProto &g, const std::string &model_dir, bool load_data,
                         bool defer_external, bool as_constants) {
  if (g.sparse_initializer_size() > 0)
    throw UserError("sparse initializer \"" + g.sparse_initializer(0).values().name() + "\" is not supported", 2);
  for (const auto &tp : g.initializer()) {
    std::string what = "initializer \"" + tp.name() + "\"";
    if (im.defined(tp.name())) CLEAVE_USER_ERROR(what, " is defined twice");
    std::optional<DType> dt = dtype_from_onnx(tp.data_type());
    bool param = !as_constants && dt && is_float(*dt);
    // Non-float initializers are shapes, indices and the like: always loaded, so they can fold.
    Tensor t = tensor_from_proto(tp, model_dir, what, load_data || !param, defer_external && param);
    if (param) {
      t.role = Role::param;
      im.define_source(std::move(t));
    } else {
      im.define_const(std::move(t));
    }
  }
}

void define_inputs(Importer &im, const onnx::GraphProto &g, const ImportOptions &opts,
                   const std::set<std::string> &labels, const std::map<std::string, int> &sample_axes) {
  for (const auto &in : g.input()) {
    if (im.defined(in.name())) continue;  // IR >= 4: an input named like an initializer is that initializer
    const auto &tt = in.type().tensor_type();
    DType dt = *dtype_from_onnx(tt.elem_type());  // fix_input_shapes checked it
    if (auto it = opts.input_values.find(in.name()); it != opts.input_values.end()) {
      Tensor v = it->second;
      if (v.dtype != dt)
        CLEAVE_USER_ERROR("input \"", in.name(), "\" is ", onnx_dtype_name(tt.elem_type()), " but its bound value is ",
                          dtype_name(v.dtype));
      if (v.data.size() != static_cast<size_t>(checked_num_elements(v.shape, "input \"" + in.name() + "\"") *
                                               dtype_size(v.dtype)))
        CLEAVE_USER_ERROR("input \"", in.name(), "\": bound value has ", v.data.size(), " bytes for shape ",
                          shape_str(v.shape));
      v.name = in.name();
      im.define_const(std::move(v));
      continue;
    }
    Tensor t;
    t.name = in.name();
    t.dtype = dt;
    for (const auto &d : tt.shape().dim()) t.shape.push_back(d.dim_value());
    t.role = labels.count(t.name) ? Role::label : Role::input;
    t.sample_axis = sample_axes.at(t.name);
    im.define_source(std::move(t));
  }
}

/** Whether layer norm chain c computes LayerNormalization: x is float32 and its last k dims are the scale's (the
 *  chain's Mul does not broadcast). `first` names the chain's first node. */
bool fits_layer_norm(const Importer &im, const onnx::ModelProto &m, const onnx::GraphProto &g, const LayerNormChain &c,
                     const std::string &first) {
  const onnx::NodeProto &mean = g.node(c.nodes[0]);
  std::string label = node_label(first, mean.op_type(), mean.domain(), model_opset(m, mean.domain()));
  NodeCtx ctx{mean, first, mean.op_type(), mean.domain(), model_opset(m, mean.domain()), label, NodeAttrs(mean, label),
              Phase::forward};
  if (!im.defined(c.x)) return false;
  TensorType x = im.type_of(c.x, ctx);
  size_t k = static_cast<size_t>(c.k);
  return x.dtype == DType::f32 && x.shape.size() >= k &&
         Shape(x.shape.end() - static_cast<long>(k), x.shape.end()) == c.normalized;
}

/** Whether Cast node n converts a float to a float type holding every value of it (f32 to f64; f16 or bf16 to f32
 *  or f64), so that a value's class (NaN, infinite) is the same on both sides. */
bool widens(const Importer &im, const NodeCtx &n) {
  if (!im.defined(n.in(0)) || !n.attrs.has("to")) return false;
  std::optional<DType> to = dtype_from_onnx(static_cast<int32_t>(n.attrs.get_int("to", 0)));
  DType from = im.type_of(n.in(0), n).dtype;
  if (!to || !is_float(from) || !is_float(*to)) return false;
  return from == *to || *to == DType::f64 || (*to == DType::f32 && (from == DType::f16 || from == DType::bf16));
}

void translate_nodes(Importer &im, const onnx::ModelProto &m, const onnx::GraphProto &g,
                     const std::vector<std::string> &names, const std::set<std::string> &available, Phase phase) {
  std::map<int, LayerNormChain> layer_norms;
  std::map<int, GeluChain> gelus;
  std::map<int, std::string> transposed_operands;
  std::map<int, RowGemm> row_gemms;
  std::map<int, std::string> class_test_casts;
  if (phase == Phase::forward) {
    if (m.training_info_size() == 0) class_test_casts = find_class_test_casts(g);
    layer_norms = find_layer_norms(g);
    gelus = find_gelus(g);
    transposed_operands = find_transposed_operands(m, g);
    row_gemms = find_row_gemms(g);
  }
  auto context = [&](const onnx::NodeProto &node, const std::string &name) {
    int64_t opset = model_opset(m, node.domain());
    std::string label = node_label(name, node.op_type(), node.domain(), opset);
    return NodeCtx{node, name, node.op_type(), node.domain(), opset, label, NodeAttrs(node, label), phase};
  };
  auto translate = [&](const NodeCtx &ctx) {
    CLEAVE_CHECK(find_translator(ctx.domain, ctx.op_type) != nullptr, ctx.label);  // check_nodes_supported ran first
    translate_node(im, ctx);
  };
  std::set<int> fused;  // nodes of layer norms and GELUs already translated as one op
  std::map<int, const RowGemm *> deferred;  // the Gemm and last Reshape of row chains, translated at the last
  for (int i : topo_order(g, available, names)) {
    if (fused.count(i)) continue;
    if (auto w = transposed_operands.find(i);
        w != transposed_operands.end() && im.defined(w->second) && !im.is_const(w->second)) {
      im.pending_transposes[g.node(i).output(0)] = w->second;
      continue;
    }
    if (auto c = class_test_casts.find(i); c != class_test_casts.end() && widens(im, context(g.node(i), names[i]))) {
      im.widened[g.node(i).output(0)] = c->second;
      continue;
    }
    if (auto c = row_gemms.find(i);
        c != row_gemms.end() && rows_interleave_samples(im, g.node(i).input(0))) {
      deferred[c->second.gemm] = deferred[c->second.from_rows] = &c->second;
      continue;
    }
    if (auto d = deferred.find(i); d != deferred.end()) {
      if (i == d->second->gemm) continue;
      // The chain's last node: every input of the three is defined now.
      const RowGemm &c = *d->second;
      NodeCtx first = context(g.node(c.to_rows), names[c.to_rows]), gemm = context(g.node(c.gemm), names[c.gemm]),
              last = context(g.node(i), names[i]);
      if (translate_row_gemm(im, first, gemm, last)) continue;
      translate(first);
      translate(gemm);
      translate(last);
      continue;
    }
    const onnx::NodeProto *at = &g.node(i);
    std::string name = names[i];
    onnx::NodeProto fused_node;  // a fused chain's one node, named `<scope>/<kind>`
    auto fuse = [&](onnx::NodeProto node, const std::vector<int> &nodes, const char *kind) {
      size_t slash = name.rfind('/');
      name = im.fresh_op_name((slash == std::string::npos ? name + "/" : name.substr(0, slash + 1)) + kind);
      fused_node = std::move(node);
      fused_node.set_name(name);
      at = &fused_node;
      fused.insert(nodes.begin(), nodes.end());
    };
    // A chain becomes its one op here, at its first node: its inputs (x; scale and bias) are defined, and the chain's
    // other nodes feed only each other, so nothing reads their results.
    if (auto c = layer_norms.find(i); c != layer_norms.end() && fits_layer_norm(im, m, g, c->second, name))
      fuse(layer_norm_node(c->second), c->second.nodes, "LayerNorm");
    else if (auto c = gelus.find(i); c != gelus.end())
      fuse(gelu_node(c->second), c->second.nodes, "Gelu");
    translate(context(*at, name));
  }
}

/** Names defined in the graph before its nodes run. */
std::set<std::string> source_names(const onnx::GraphProto &g) {
  std::set<std::string> s;
  for (const auto &t : g.initializer()) s.insert(t.name());
  for (const auto &in : g.input()) s.insert(in.name());
  return s;
}

void import_training_info(Importer &im, const onnx::ModelProto &m, const std::string &model_dir,
                          const ImportOptions &opts, std::set<std::string> &taken_ops) {
  // The initialization graph is ignored: initial values come from the main graph's initializers.
  for (int k = 0; k < m.training_info_size(); ++k) {
    const onnx::TrainingInfoProto &ti = m.training_info(k);
    const onnx::GraphProto &alg = ti.algorithm();
    define_initializers(im, alg, model_dir, true, false, /*as_constants=*/true);
    std::set<std::string> available;
    for (const auto &in : alg.input()) {
      if (!im.defined(in.name())) {
        Tensor t;
        t.name = in.name();
        const auto &tt = in.type().tensor_type();
        std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
        if (!dt) throw UserError("training input \"" + in.name() + "\": unsupported element type", 2);
        t.dtype = *dt;
        for (const auto &d : tt.shape().dim()) {
          if (!d.has_dim_value()) CLEAVE_USER_ERROR("training input \"", in.name(), "\": shape is not static");
          t.shape.push_back(d.dim_value());
        }
        im.define_source(std::move(t));
      }
    }
    // Everything the main graph defines is visible to the algorithm.
    for (const auto &t : im.g.tensors()) available.insert(t.name);
    for (const auto &s : source_names(alg)) available.insert(s);
    for (const auto &s : source_names(m.graph())) available.insert(s);
    for (const auto &n : m.graph().node())
      for (const auto &o : n.output()) available.insert(o);
    std::vector<std::string> names = op_names(alg, taken_ops, "");
    translate_nodes(im, m, alg, names, available, Phase::update);
    for (const auto &b : ti.update_binding()) {
      if (!im.defined(b.key()) || !im.defined(b.value()))
        CLEAVE_USER_ERROR("training update binding \"", b.key(), "\" <- \"", b.value(), "\" names an undefined tensor");
      TensorId dst = im.use(b.key()), src = im.use(b.value());
      Role r = im.g.tensor(dst).role;
      if (r != Role::param && r != Role::optimizer_state && r != Role::input && r != Role::constant)
        CLEAVE_USER_ERROR("training update binding: \"", b.key(), "\" is not an initializer or input of the model");
      im.g.assigns.push_back(Assign{dst, src});
    }
  }
}

/** Rejects duplicate initializers, undefined inputs, cycles, and nodes out of topological order (ONNX requires the
 *  order, and its shape inference reads the nodes in file order). Errors name the node or tensor. */
void check_node_order(const onnx::ModelProto &m) {
  const onnx::GraphProto *g = &m.graph();
  std::set<std::string> sources;
  for (const auto &t : g->initializer())
    if (!sources.insert(t.name()).second) CLEAVE_USER_ERROR("initializer \"", t.name(), "\" is defined twice");
  for (const auto &in : g->input()) sources.insert(in.name());
  std::set<std::string> taken;
  std::vector<std::string> names = op_names(*g, taken, "");
  topo_order(*g, sources, names);  // undefined inputs, cycles and doubly-produced names first: clearer messages
  std::map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i)
    for (const std::string &out : g->node(i).output()) producer.emplace(out, i);
  for (int i = 0; i < g->node_size(); ++i)
    for (const std::string &in : g->node(i).input()) {
      auto it = producer.find(in);
      if (in.empty() || sources.count(in) || it == producer.end() || it->second < i) continue;
      const onnx::NodeProto &n = g->node(i);
      CLEAVE_USER_ERROR(node_label(names[i], n.op_type(), n.domain(), model_opset(m, n.domain())), ": input \"", in,
                        "\" is produced by a later node \"", names[it->second],
                        "\" (nodes must be in topological order)");
    }
}

Graph import_model(const std::string &path, const ImportOptions &opts) {
  onnx::ModelProto m = load_model(path);
  std::string model_dir = std::filesystem::path(path).parent_path().string();
  if (model_dir.empty()) model_dir = ".";
  // Every check of the model's structure and values runs before ONNX's shape inference, which crashes on some
  // malformed models instead of reporting them (model_checks.h).
  check_opset_imports(m);
  check_opsets(m);
  // Function ops are expanded before every other check, so the checks, ONNX's checker and shape inference see the
  // nodes that are translated; the support check then lists what is left, with why a body did not expand.
  UnexpandedNodes unexpanded = expand_functions(m);
  expand_prob_target_losses(m);
  check_nodes_supported(m, path, unexpanded);
  check_names(m);
  check_node_order(m);
  check_node_attributes(m);
  check_attribute_values(m);
  check_initializer_data(m);
  run_onnx_checker(m, model_dir);
  std::map<std::string, int> sample_axes = fix_input_shapes(m, opts);
  std::map<std::string, TensorType> onnx_types = infer_onnx_types(m);

  // Reserve every name in the model so generated names never collide with one defined later.
  std::set<std::string> tensor_names, node_names;
  auto reserve = [&](const onnx::GraphProto &g) {
    for (const auto &n : g.node()) {
      for (const auto &o : n.output()) tensor_names.insert(o);
      if (!n.name().empty()) node_names.insert(n.name());
    }
    for (const auto &s : source_names(g)) tensor_names.insert(s);
  };
  reserve(m.graph());
  for (const auto &ti : m.training_info()) reserve(ti.algorithm());
  Importer im(tensor_names, node_names);
  im.onnx_types = std::move(onnx_types);
  im.from_torch = m.producer_name() == "pytorch";
  im.g.name = m.graph().name().empty() ? "main" : m.graph().name();

  const onnx::GraphProto &g = m.graph();
  define_initializers(im, g, model_dir, opts.load_data, opts.defer_external_data, /*as_constants=*/false);
  define_inputs(im, g, opts, label_names(g), sample_axes);
  std::set<std::string> taken_ops;
  std::vector<std::string> names = op_names(g, taken_ops, "");
  translate_nodes(im, m, g, names, source_names(g), Phase::forward);
  for (const auto &out : g.output()) {
    if (!im.defined(out.name())) CLEAVE_USER_ERROR("graph output \"", out.name(), "\" is not defined");
    im.g.outputs.push_back(im.use(out.name()));
  }
  if (m.training_info_size() > 0) import_training_info(im, m, model_dir, opts, taken_ops);
  return std::move(im.g);
}

}  // namespace

Graph import_onnx(const std::string &path, const ImportOptions &opts) {
  try {
    return import_model(path, opts);
  } catch (const UserError &e) {
    std::string msg = e.what();
    if (msg.rfind(path + ":", 0) == 0) throw;
    throw UserError(path + ": " + msg, e.exit_code());
  }
}

}  // namespace cleave
