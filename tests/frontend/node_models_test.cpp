// Imports every ONNX node conformance model: supported ones must import, the rest must fail with the exit-code-2
// "unsupported" error, and nothing may crash or throw anything else.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"

namespace cleave {
namespace {

namespace fs = std::filesystem;
const char *kData = "/usr/share/libonnx-testdata/data";

/** Binds a test's non-float and scalar inputs (Dropout's ratio) as compile-time values (as the conformance runner does), so shape/axes inputs
 *  fold. Input i of the model is input_<i>.pb of test_data_set_0; a uint16 file for an input declared bfloat16 holds
 *  bfloat16 bits (ONNX's generator writes bfloat16 so, numpy having no such type), as the runner reads it. */
ImportOptions options_for(const fs::path &dir, const std::vector<std::string> &input_names,
                          const std::vector<int32_t> &declared) {
  ImportOptions o;
  for (size_t i = 0; i < input_names.size(); ++i) {
    fs::path pb = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(pb)) continue;
    try {
      Tensor t = read_tensor_proto_file(pb.string());
      if (t.dtype == DType::u16 && declared[i] == onnx::TensorProto::BFLOAT16) t.dtype = DType::bf16;
      if (!is_float(t.dtype) || t.shape.empty()) o.input_values[input_names[i]] = t;
    } catch (const UserError &) {
      // Unsupported dtype: the import reports it.
    }
  }
  return o;
}

/** The input named by an importer error `... ("name") must be a compile-time constant`, or empty. */
std::string input_needed_constant(const std::string &msg) {
  const std::string tail = "\") must be a compile-time constant";
  size_t end = msg.find(tail);
  size_t begin = end == std::string::npos ? std::string::npos : msg.rfind("(\"", end);
  return begin == std::string::npos ? std::string() : msg.substr(begin + 2, end - begin - 2);
}

struct Outcome {
  int ok = 0, unsupported = 0;
  std::vector<std::string> failures;
};

Outcome import_all(const std::string &sub) {
  Outcome r;
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(kData) / sub)) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path &dir : dirs) {
    std::string model = (dir / "model.onnx").string();
    if (!fs::exists(model)) continue;
    std::vector<std::string> names;
    std::vector<int32_t> declared;
    {
      onnx::ModelProto m;
      std::ifstream in(model, std::ios::binary);
      if (m.ParseFromIstream(&in)) {
        std::set<std::string> inits;
        for (const auto &t : m.graph().initializer()) inits.insert(t.name());
        for (const auto &i : m.graph().input())
          if (!inits.count(i.name())) {
            names.push_back(i.name());
            declared.push_back(i.type().tensor_type().elem_type());
          }
      }
    }
    ImportOptions opts = options_for(dir, names, declared);
    for (;;) {
      try {
        import_onnx(model, opts);
        ++r.ok;
      } catch (const UserError &e) {
        // A float input the importer needs at compile time (Resize's scales) is bound from its data and retried, as
        // the conformance runner does.
        std::string needed = input_needed_constant(e.what());
        auto it = std::find(names.begin(), names.end(), needed);
        fs::path pb = dir / "test_data_set_0" / ("input_" + std::to_string(it - names.begin()) + ".pb");
        if (!needed.empty() && it != names.end() && !opts.input_values.count(needed) && fs::exists(pb)) {
          opts.input_values[needed] = read_tensor_proto_file(pb.string());
          continue;
        }
        if (e.exit_code() == 2) ++r.unsupported;
        else r.failures.push_back(dir.filename().string() + ": " + e.what());
      } catch (const std::exception &e) {
        r.failures.push_back(dir.filename().string() + ": non-user error: " + e.what());
      }
      break;
    }
  }
  return r;
}

TEST(NodeModels, EveryNodeTestImportsOrIsReportedUnsupported) {
  Outcome r = import_all("node");
  std::string all;
  for (const auto &f : r.failures) all += f + "\n";
  EXPECT_TRUE(r.failures.empty()) << r.failures.size() << " failures:\n" << all;
  // The supported subset is large: if this drops, ops stopped importing.
  EXPECT_GT(r.ok, 150) << "imported " << r.ok << ", unsupported " << r.unsupported;
  std::cerr << "node tests: " << r.ok << " imported, " << r.unsupported << " unsupported\n";
}

}  // namespace
}  // namespace cleave
