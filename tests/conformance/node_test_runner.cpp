#include "tests/conformance/node_test_runner.h"

#include <onnx/common/file_utils.h>
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "frontend/expand_functions.h"
#include "frontend/importer.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "ir/tensor_data.h"

namespace cleave::conformance {
namespace {

namespace fs = std::filesystem;

CaseResult make_result(const std::string &name, Outcome outcome, std::string detail, std::string group = {}) {
  return CaseResult{name, outcome, std::move(detail), std::move(group)};
}

std::vector<fs::path> sorted_entries(const fs::path &dir, const std::string &prefix) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/** input_0.pb, input_1.pb, ... in numeric order (not lexicographic: input_10 after input_9). */
std::vector<fs::path> numbered_files(const fs::path &dir, const std::string &stem) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (stem + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

std::string index_str(const Shape &shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}

/** A short rendering of a number: shortest round trip of a double is overkill in a message, %.9g is enough. */
std::string num_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/** The first element that differs beyond ONNX's tolerance, as a message; empty if none. */
std::string compare(const interp::Value &got, const Tensor &want, const std::string &what) {
  if (got.dtype != want.dtype)
    return detail::concat(what, ": dtype ", dtype_name(got.dtype), ", expected ", dtype_name(want.dtype));
  if (got.shape != want.shape)
    return detail::concat(what, ": shape ", shape_str(got.shape), ", expected ", shape_str(want.shape));
  std::vector<double> w = data_as_doubles(want);
  if (got.data.size() != w.size())
    return detail::concat(what, ": ", got.data.size(), " values for shape ", shape_str(got.shape));
  int64_t bad = 0;
  std::optional<int64_t> first;
  for (size_t i = 0; i < w.size(); ++i) {
    double a = got.data[i], b = w[i];
    bool ok;
    if (is_float(want.dtype)) {
      if (std::isnan(a) || std::isnan(b))
        ok = std::isnan(a) && std::isnan(b);
      else if (std::isinf(a) || std::isinf(b))
        ok = a == b;
      else
        ok = std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
    } else {
      ok = a == b;
    }
    if (!ok) {
      ++bad;
      if (!first) first = static_cast<int64_t>(i);
    }
  }
  if (!first) return {};
  return detail::concat(what, " ", shape_str(want.shape), ": element ", index_str(want.shape, *first), " = ",
                        num_str(got.data[static_cast<size_t>(*first)]), ", expected ",
                        num_str(w[static_cast<size_t>(*first)]), " (", bad, " of ", w.size(), " elements differ)");
}

/** Why a graph input/output type cannot be expressed in the IR, or empty. */
std::string unsupported_type(const onnx::ValueInfoProto &vi) {
  const onnx::TypeProto &t = vi.type();
  if (t.value_case() != onnx::TypeProto::kTensorType) {
    switch (t.value_case()) {
      case onnx::TypeProto::kSequenceType: return "sequence-typed inputs/outputs";
      case onnx::TypeProto::kOptionalType: return "optional-typed inputs/outputs";
      case onnx::TypeProto::kMapType: return "map-typed inputs/outputs";
      case onnx::TypeProto::kSparseTensorType: return "sparse tensor inputs/outputs";
      default: return "non-tensor inputs/outputs";
    }
  }
  int32_t et = t.tensor_type().elem_type();
  if (!dtype_from_onnx(et)) return "element type " + onnx_dtype_name(et) + " not supported by the IR";
  return {};
}

/** ONNX op types the importer folds or rewrites into IR ops rather than mapping one-to-one. */
const std::set<std::string> &frontend_only_ops() {
  static const std::set<std::string> ops = {
      "Constant",        "ConstantOfShape", "DepthToSpace", "Flatten",      "Gradient",        "LpNormalization",
      "ReduceL1",        "ReduceL2",        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Shape",
      "SpaceToDepth",    "Squeeze",         "Tile",         "Unsqueeze"};
  return ops;
}

/** The op types of `graph` that have no IR op kind and are not folded by the importer, sorted. Only for grouping
 *  skip reasons in the summary; the importer's verdict is what decides a skip. */
std::string ops_without_ir_kind(const onnx::GraphProto &graph) {
  std::set<std::string> out;
  for (const auto &n : graph.node())
    if (!parse_op_kind(n.op_type()) && !frontend_only_ops().count(n.op_type())) out.insert(n.op_type());
  std::string s;
  for (const auto &op : out) s += (s.empty() ? "" : ", ") + op;
  return s;
}

bool dropout_depends_on_rng(const Graph &g) {
  for (const Op &op : g.ops())
    if (op.kind == OpKind::Dropout && op.attr_int("training_mode", 0) != 0 && op.attr_float("ratio", 0.5) > 0.0)
      return true;
  return false;
}

int64_t ai_onnx_opset(const onnx::ModelProto &m) {
  for (const auto &o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

/** Upstream model files that contradict the generator of their own expected outputs. Each is patched to what the
 *  generator computed, citing where upstream acknowledged it; returns a note, or empty if `name` needs no patch. */
std::string patch_known_model_bugs(const std::string &name, onnx::ModelProto &m) {
  if (name == "node/test_adam_multiple") {
    // onnx/onnx#7749: backend/test/case/node/adam.py computes the outputs with epsilon = 1e-2 but the node was
    // serialized without the attribute, so a conforming runtime uses the schema default 1e-6 and differs.
    for (auto &node : *m.mutable_graph()->mutable_node()) {
      if (node.op_type() != "Adam") continue;
      for (const auto &a : node.attribute())
        if (a.name() == "epsilon") return {};
      auto *a = node.add_attribute();
      a->set_name("epsilon");
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(1e-2f);
      return "Adam epsilon = 1e-2 added as its generator used (onnx/onnx#7749)";
    }
  }
  return {};
}

/** Where a rewritten model is written: a per-process temporary directory (removed by run_case). */
fs::path scratch_model_path(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("cleave_conformance_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '_');
  return dir / (file + ".onnx");
}

/** The summary group of an importer rejection (exit code 2): the unsupported op types, or the message with the
 *  file and node names removed so that cases rejected for the same reason group together. */
std::string skip_group(const std::string &msg, const onnx::ModelProto &model) {
  if (msg.find("unsupported node") != std::string::npos) {
    std::string ops = ops_without_ir_kind(model.graph());
    if (!ops.empty()) return "unsupported ops: " + ops;
  }
  std::string m = msg;
  size_t onnx_file = m.find(".onnx: ");
  if (onnx_file != std::string::npos) m = m.substr(onnx_file + 7);
  size_t label_end = m.rfind("): ");
  if (m.rfind("node \"", 0) == 0 && label_end != std::string::npos) m = m.substr(label_end + 3);
  return "importer: " + m;
}

/** What ONNX fixes about a training-mode Dropout whatever its RNG: every output element is 0 or x / (1 - ratio),
 *  and the mask, if requested, is true exactly where x was kept. Returns the first violation, or empty. */
std::string check_dropout_semantics(const Graph &g, const interp::Values &values) {
  for (const Op &op : g.ops()) {
    if (op.kind != OpKind::Dropout) continue;
    const interp::Value &x = *values[static_cast<size_t>(op.inputs[0])];
    const interp::Value &y = *values[static_cast<size_t>(op.outputs[0])];
    const interp::Value *mask = op.output(1) != kNoTensor ? &*values[static_cast<size_t>(op.output(1))] : nullptr;
    double scale = 1.0 / (1.0 - op.attr_float("ratio"));
    size_t n_kept = 0, n_dropped = 0;
    for (size_t i = 0; i < x.data.size(); ++i) {
      double kept = static_cast<double>(static_cast<float>(x.data[i] * scale));
      bool is_kept = std::fabs(y.data[i] - kept) <= kAtol + kRtol * std::fabs(kept);
      bool is_dropped = y.data[i] == 0.0;
      n_kept += is_kept && x.data[i] != 0.0;
      n_dropped += is_dropped && x.data[i] != 0.0;
      if (!is_kept && !is_dropped)
        return detail::concat("Dropout \"", op.name, "\": element ", i, " = ", num_str(y.data[i]), ", neither 0 nor x/(1-ratio) = ",
                              num_str(kept));
      if (mask && x.data[i] != 0.0 && (mask->data[i] != 0.0) != is_kept)
        return detail::concat("Dropout \"", op.name, "\": mask element ", i, " = ", mask->data[i],
                              " does not match the output");
    }
    // With ratio in (0, 1) and dozens of elements, keeping all or none has negligible probability: it means the
    // RNG or the ratio is not used.
    if (x.data.size() >= 20 && (n_kept == 0 || n_dropped == 0))
      return detail::concat("Dropout \"", op.name, "\": kept ", n_kept, " and dropped ", n_dropped, " of ",
                            x.data.size(), " elements");
  }
  return {};
}

bool draws_random_numbers(const Graph &g) {
  for (const Op &op : g.ops())
    if (op.kind == OpKind::RandomLike) return true;
  return false;
}

/** What can be checked of a model with random draws (Bernoulli, expanded to RandomUniformLike): every uniform draw
 *  lies in [low, high) and every normal draw is finite, and an output whose expected elements are all 0 or 1 (a
 *  Bernoulli sample) has only 0s and 1s. Returns the first problem, or empty. */
std::string check_random_semantics(const Graph &g, const interp::Values &values, const std::vector<Tensor> &want) {
  for (const Op &op : g.ops()) {
    if (op.kind != OpKind::RandomLike) continue;
    bool normal = op.attr_int("normal", 0) != 0;
    double a = static_cast<float>(op.attr_float("a", 0.0)), b = static_cast<float>(op.attr_float("b", 1.0));
    const interp::Value &y = *values[static_cast<size_t>(op.outputs[0])];
    for (size_t i = 0; i < y.data.size(); ++i)
      if (normal ? !std::isfinite(y.data[i]) : !(y.data[i] >= a && y.data[i] < b))
        return detail::concat(op.name, ": draw ", i, " = ", num_str(y.data[i]),
                              normal ? " is not finite" : detail::concat(" is outside [", a, ", ", b, ")"));
  }
  for (size_t j = 0; j < want.size() && j < g.outputs.size(); ++j) {
    std::vector<double> w = data_as_doubles(want[j]);
    if (!std::all_of(w.begin(), w.end(), [](double v) { return v == 0 || v == 1; })) continue;
    const interp::Value &got = *values[static_cast<size_t>(g.outputs[j])];
    for (size_t i = 0; i < got.data.size(); ++i)
      if (got.data[i] != 0 && got.data[i] != 1)
        return detail::concat("output ", j, " element ", i, " = ", num_str(got.data[i]), ", not 0 or 1");
  }
  return {};
}

/** The graph input named by an importer error `... ("name") must be a compile-time constant`, or empty. */
std::string input_needed_constant(const std::string &msg) {
  const std::string tail = "\") must be a compile-time constant";
  size_t end = msg.find(tail);
  if (end == std::string::npos) return {};
  size_t begin = msg.rfind("(\"", end);
  return begin == std::string::npos ? std::string() : msg.substr(begin + 2, end - begin - 2);
}

/** Imports, binding as constants the float inputs the importer needs at compile time (Dropout's ratio is a float
 *  input in ONNX and an attribute in the IR): each such error moves that input from `fed` to the bound values and
 *  retries. Other errors propagate. */
Graph import_with_needed_constants(const std::string &path, ImportOptions &opts,
                                   std::vector<std::pair<std::string, Tensor>> &fed) {
  for (;;) {
    try {
      return import_onnx(path, opts);
    } catch (const UserError &e) {
      std::string name = input_needed_constant(e.what());
      auto it = std::find_if(fed.begin(), fed.end(), [&](const auto &f) { return f.first == name; });
      if (name.empty() || it == fed.end()) throw;
      opts.input_values.emplace(it->first, std::move(it->second));
      fed.erase(it);
    }
  }
}

/** ONNX's test generator stores bfloat16 values as their uint16 bit patterns (numpy has no bfloat16): a data file of
 *  uint16 for a value the model declares bfloat16 holds exactly the bf16 bytes, so it is read as bf16. */
void reinterpret_bf16_bits(Tensor &t, const onnx::ValueInfoProto &declared) {
  if (t.dtype == DType::u16 && declared.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
    t.dtype = DType::bf16;
}

/** The graph input (not an initializer) named `name`. */
const onnx::ValueInfoProto *graph_input(const onnx::ModelProto &model, const std::string &name) {
  for (const auto &vi : model.graph().input())
    if (vi.name() == name) return &vi;
  return nullptr;
}

struct SetResult {
  enum Kind { ok, mismatch, rng_dependent, random_draws } kind = ok;
  std::string detail;
};

/** Runs one test_data_set_*. Errors from the importer and the interpreter propagate for run_case to classify. */
SetResult run_data_set(const fs::path &model_path, const onnx::ModelProto &model, const fs::path &set_dir) {
  std::set<std::string> initializers;
  for (const auto &init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> input_names;
  for (const auto &vi : model.graph().input())
    if (!initializers.count(vi.name())) input_names.push_back(vi.name());

  std::vector<fs::path> input_files = numbered_files(set_dir, "input");
  std::vector<fs::path> output_files = numbered_files(set_dir, "output");
  if (input_files.size() > input_names.size())
    return {SetResult::mismatch, detail::concat(set_dir.filename().string(), ": ", input_files.size(), " input files for ",
                          input_names.size(), " graph inputs")};

  ImportOptions opts;
  std::vector<std::pair<std::string, Tensor>> fed;
  for (size_t i = 0; i < input_files.size(); ++i) {
    Tensor t = read_tensor_proto_file(input_files[i].string());
    reinterpret_bf16_bits(t, *graph_input(model, input_names[i]));
    t.name = input_names[i];
    t.role = Role::constant;
    // Integer and bool inputs are shapes, axes, indices, labels, step counts or mode flags: the importer folds
    // them, so they are bound at import. Float inputs stay runtime inputs, which is what exercises the kernels.
    if (is_float(t.dtype))
      fed.emplace_back(input_names[i], std::move(t));
    else
      opts.input_values.emplace(input_names[i], std::move(t));
  }

  Graph g = import_with_needed_constants(model_path.string(), opts, fed);
  bool rng_dependent = dropout_depends_on_rng(g), random = draws_random_numbers(g);

  interp::Values values = interp::initial_values(g);
  for (const auto &[name, t] : fed) {
    std::optional<TensorId> id = g.find_tensor(name);
    if (!id) continue;  // an input no output depends on may be dropped by the importer
    values[static_cast<size_t>(*id)] = interp::value_of(t);
  }
  interp::Context ctx;
  interp::run_graph(g, values, ctx);
  if (rng_dependent) {
    std::string problem = check_dropout_semantics(g, values);
    return {problem.empty() ? SetResult::rng_dependent : SetResult::mismatch, problem};
  }
  if (random) {
    std::vector<Tensor> want;
    for (const fs::path &f : output_files) want.push_back(read_tensor_proto_file(f.string()));
    std::string problem = check_random_semantics(g, values, want);
    return {problem.empty() ? SetResult::random_draws : SetResult::mismatch, problem};
  }

  if (g.outputs.size() != static_cast<size_t>(model.graph().output_size()))
    return {SetResult::mismatch, detail::concat("imported graph has ", g.outputs.size(), " outputs, the model ",
                                                model.graph().output_size())};
  if (output_files.size() > g.outputs.size())
    return {SetResult::mismatch, detail::concat(set_dir.filename().string(), ": ", output_files.size(),
                                                " output files for ", g.outputs.size(), " graph outputs")};
  for (size_t j = 0; j < output_files.size(); ++j) {
    Tensor want = read_tensor_proto_file(output_files[j].string());
    reinterpret_bf16_bits(want, model.graph().output(static_cast<int>(j)));
    TensorId id = g.outputs[j];
    std::string what = detail::concat(set_dir.filename().string(), " output ", j, " \"",
                                       model.graph().output(static_cast<int>(j)).name(), "\"");
    const std::optional<interp::Value> &got = values[static_cast<size_t>(id)];
    if (!got) return {SetResult::mismatch, what + ": not computed"};
    std::string problem = compare(*got, want, what);
    if (!problem.empty()) return {SetResult::mismatch, problem};
  }
  return {};
}

}  // namespace

std::string testdata_root() {
  const char *env = std::getenv("CLEAVE_ONNX_TESTDATA");
  return env && *env ? env : "/usr/share/libonnx-testdata/data";
}

std::vector<std::string> list_cases(const std::string &root) {
  std::vector<std::string> out;
  for (const char *kind : {"node", "simple"})
    for (const fs::path &p : sorted_entries(fs::path(root) / kind, "test_"))
      if (fs::exists(p / "model.onnx")) out.push_back(std::string(kind) + "/" + p.filename().string());
  return out;
}

bool ops_supported(const std::string &root, const std::string &name) {
  onnx::ModelProto model;
  try {
    onnx::LoadProtoFromPath((fs::path(root) / name / "model.onnx").string(), model);
  } catch (const std::exception &) {
    return false;
  }
  expand_functions(model);  // an op with a function body of supported ops is supported
  for (const auto &node : model.graph().node()) {
    std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    if (node.op_type() == "Constant" && domain.empty()) continue;
    if (!find_translator(domain, node.op_type())) return false;
  }
  return true;
}

CaseResult run_case(const std::string &root, const std::string &name) {
  fs::path dir = fs::path(root) / name;
  fs::path model_path = dir / "model.onnx";
  onnx::ModelProto model;
  try {
    onnx::LoadProtoFromPath(model_path.string(), model);
  } catch (const std::exception &e) {
    return make_result(name, Outcome::fail, std::string("cannot read model.onnx: ") + e.what());
  }
  for (const auto *list : {&model.graph().input(), &model.graph().output()})
    for (const auto &vi : *list) {
      std::string why = unsupported_type(vi);
      if (!why.empty()) return make_result(name, Outcome::skip, "\"" + vi.name() + "\": " + why, why);
    }

  // Models rewritten before import: known upstream model bugs patched, and opsets below 13 (the importer reads 13
  // to 17, DESIGN §3) lifted to 13 by ONNX's own version converter, so the kernels of ops whose tests were
  // generated at an old opset (Conv, AveragePool, ...) are still checked. A model the converter cannot lift is
  // imported as it is and the importer decides.
  std::string note = patch_known_model_bugs(name, model);
  bool rewritten = !note.empty();
  int64_t opset = ai_onnx_opset(model);
  if (opset > 0 && opset < 13) {
    try {
      model = onnx::version_conversion::ConvertVersion(model, 13);
      note += std::string(note.empty() ? "" : "; ") + "lifted from opset " + std::to_string(opset) +
              " to 13 by ONNX's version converter";
      rewritten = true;
    } catch (const std::exception &) {
      // keep the original; the importer's verdict on it is the result
    }
  }
  fs::path import_path = model_path;
  if (rewritten) {
    import_path = scratch_model_path(name);
    std::ofstream out(import_path, std::ios::binary);
    if (!model.SerializeToOstream(&out)) return make_result(name, Outcome::fail, "cannot write " + import_path.string());
  }
  struct RemoveScratch {
    fs::path p;
    bool on;
    ~RemoveScratch() {
      std::error_code ec;
      if (!on) return;
      fs::remove(p, ec);
      fs::remove(p.parent_path(), ec);  // only succeeds once empty
    }
  } remove_scratch{import_path, rewritten};

  std::vector<fs::path> sets = sorted_entries(dir, "test_data_set_");
  if (sets.empty()) return make_result(name, Outcome::fail, "no test_data_set_* directory");
  for (const fs::path &set : sets) {
    try {
      SetResult r = run_data_set(import_path, model, set);
      if (r.kind == SetResult::mismatch)
        return make_result(name, Outcome::fail, note.empty() ? r.detail : r.detail + " [model " + note + "]");
      if (r.kind == SetResult::rng_dependent)
        return make_result(name, Outcome::skip,
                           "training-mode Dropout with ratio > 0: ONNX's expected mask comes from numpy's RNG, "
                           "Cleave's from its counter-based RNG (DESIGN §3); checked instead: each output is 0 or "
                           "x/(1-ratio) and the mask agrees",
                           "training-mode Dropout with ratio > 0 (expected outputs come from numpy's RNG)");
      if (r.kind == SetResult::random_draws)
        return make_result(name, Outcome::skip,
                           "random draws (RandomUniformLike, ...): ONNX's expected outputs come from numpy's RNG, "
                           "Cleave's from its counter-based RNG; checked instead: draws lie in their range and a 0/1 "
                           "output stays 0/1",
                           "random draws (expected outputs come from numpy's RNG)");
    } catch (const UserError &e) {
      if (e.exit_code() == 2) return make_result(name, Outcome::skip, e.what(), skip_group(e.what(), model));
      return make_result(name, Outcome::fail,
                         std::string("user error: ") + e.what() + (note.empty() ? "" : " [model " + note + "]"));
    } catch (const InternalError &e) {
      return make_result(name, Outcome::fail, std::string("internal error: ") + e.what());
    } catch (const std::exception &e) {
      return make_result(name, Outcome::fail, std::string("exception: ") + e.what());
    }
  }
  return make_result(name, Outcome::pass, note);
}

}  // namespace cleave::conformance
