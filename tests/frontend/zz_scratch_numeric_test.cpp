#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <onnx/onnx_pb.h>
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "ir/tensor_data.h"
namespace fs = std::filesystem;
using namespace cleave;
TEST(Scratch, Numeric) {
  std::vector<fs::path> dirs;
  for (auto &e : fs::directory_iterator("/usr/share/libonnx-testdata/data/node")) dirs.push_back(e.path());
  for (auto &e : fs::directory_iterator("/usr/share/libonnx-testdata/data/simple")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  int pass = 0, fail = 0;
  for (auto &dir : dirs) {
    std::string model = (dir / "model.onnx").string();
    onnx::ModelProto m; { std::ifstream in(model, std::ios::binary); if (!m.ParseFromIstream(&in)) continue; }
    std::set<std::string> inits; for (auto &t : m.graph().initializer()) inits.insert(t.name());
    std::vector<std::string> names; for (auto &i : m.graph().input()) if (!inits.count(i.name())) names.push_back(i.name());
    ImportOptions o; std::map<std::string, Tensor> feeds;
    for (size_t i = 0; i < names.size(); ++i) {
      fs::path pb = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
      try { Tensor t = read_tensor_proto_file(pb.string()); if (!is_float(t.dtype) || (t.shape.empty() && dir.string().find("gradient") == std::string::npos)) o.input_values[names[i]] = t; else feeds[names[i]] = t; } catch (...) {}
    }
    Graph g;
    try { g = import_onnx(model, o); } catch (const std::exception &e) { continue; }
    std::string err;
    try {
      interp::Values v = interp::initial_values(g);
      for (auto &[n, t] : feeds) { auto id = g.find_tensor(n); if (id) { t.name = n; v[*id] = interp::value_of(t); } }
      interp::run_graph(g, v, interp::Context{});
      for (size_t i = 0; i < g.outputs.size(); ++i) {
        fs::path pb = dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb");
        Tensor want = read_tensor_proto_file(pb.string());
        const auto &got = v[g.outputs[i]];
        if (!got) { err = "output not computed"; break; }
        if (got->shape != want.shape) { err = "shape " + shape_str(got->shape) + " vs " + shape_str(want.shape); break; }
        auto w = data_as_doubles(want);
        for (size_t k = 0; k < w.size(); ++k)
          if (!(std::abs(got->data[k] - w[k]) <= 1e-7 + 1e-3 * std::abs(w[k]))) { err = "value mismatch at " + std::to_string(k) + " out " + std::to_string(i) + ": " + std::to_string(got->data[k]) + " vs " + std::to_string(w[k]); break; }
        if (!err.empty()) break;
      }
    } catch (const std::exception &e) { err = std::string("exception: ") + e.what(); }
    if (err.empty()) ++pass; else { ++fail; std::cerr << dir.filename().string() << ": " << err << "\n"; }
  }
  std::cerr << "pass " << pass << " fail " << fail << "\n";
}
