// Initializer data that is referenced, not read (Tensor::external): planning a model whose external data is absent,
// reading the values when a stage needs them, the one-line error naming missing files, and the IR text form.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/tensor_data.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

namespace fs = std::filesystem;
using test::kF32;
using test::ModelBuilder;

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "message: " << (msg)

/** x[4] + w[4], w stored externally at `location`, offset 8, 16 bytes. */
std::string save_model(const fs::path &path, const std::string &location) {
  ModelBuilder mb;
  mb.input("x", kF32, {4});
  auto *w = mb.g().add_initializer();
  w->set_name("w");
  w->set_data_type(kF32);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto &[k, v] : std::vector<std::pair<std::string, std::string>>{
           {"location", location}, {"offset", "8"}, {"length", "16"}}) {
    auto *e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  mb.node("Add", {"x", "w"}, {"y"});
  mb.output("y", 1);
  return mb.save(path);
}

void write_file(const fs::path &p, const std::vector<float> &after_8_bytes) {
  std::ofstream os(p, std::ios::binary);
  os << "12345678";
  os.write(reinterpret_cast<const char *>(after_8_bytes.data()),
           static_cast<std::streamsize>(after_8_bytes.size() * sizeof(float)));
}

std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

ImportOptions shapes_only() {
  ImportOptions o;
  o.load_data = false;
  return o;
}

TEST(LazyData, PlansWithoutTheFileAndNamesItWhenValuesAreNeeded) {
  test::TempDir dir("lazy_absent");
  std::string path = save_model(dir / "m.onnx", "m.data");
  Graph g = import_onnx(path, shapes_only());  // the file does not exist: importing for planning works
  const Tensor &w = g.tensor(*g.find_tensor("w"));
  EXPECT_EQ(w.role, Role::param);
  EXPECT_TRUE(w.data.empty());
  ASSERT_TRUE(w.external.has_value());
  EXPECT_EQ(w.external->file, fs::weakly_canonical(dir / "m.data").string());
  EXPECT_EQ(w.external->offset, 8);
  EXPECT_EQ(w.external->length, 16);
  std::string msg = error_of([&] { check_external_data(g); });
  EXPECT_HAS(msg, "external data missing: " + w.external->file);
  EXPECT_HAS(msg, "needs 24 bytes; does not exist");
  EXPECT_HAS(error_of([&] { tensor_bytes(w); }), "tensor \"w\"");

  write_file(dir / "m.data", {1, 2});  // short: 16 bytes, 24 needed
  EXPECT_HAS(error_of([&] { check_external_data(g); }), "has 16 bytes");
  write_file(dir / "m.data", {1.5f, -2, 3, 4.25f});
  EXPECT_NO_THROW(check_external_data(g));
  Graph loaded = g;
  load_external_data(loaded);
  const Tensor &lw = loaded.tensor(*loaded.find_tensor("w"));
  EXPECT_FALSE(lw.external.has_value());
  EXPECT_EQ(data_as_doubles(lw), (std::vector<double>{1.5, -2, 3, 4.25}));
}

TEST(LazyData, DeferredImportReadsTheSameValuesAsAnEagerOne) {
  test::TempDir dir("lazy_defer");
  write_file(dir / "m.data", {1.5f, -2, 3, 4.25f});
  std::string path = save_model(dir / "m.onnx", "m.data");
  ImportOptions defer;
  defer.defer_external_data = true;
  Graph lazy = import_onnx(path, defer), eager = import_onnx(path);
  const Tensor &lw = lazy.tensor(*lazy.find_tensor("w")), &ew = eager.tensor(*eager.find_tensor("w"));
  EXPECT_TRUE(lw.data.empty());
  EXPECT_FALSE(ew.external.has_value());
  EXPECT_EQ(tensor_bytes(lw), ew.data);
}

TEST(LazyData, ReferencesKeepTheSecurityChecks) {
  test::TempDir dir("lazy_security");
  fs::create_directories(dir / "model");
  write_file(dir / "secret.bin", {1, 2, 3, 4});
  std::string up = save_model(dir / "model" / "up.onnx", "../secret.bin");
  EXPECT_HAS(error_of([&] { import_onnx(up, shapes_only()); }), "outside the model's directory");
  std::string abs = save_model(dir / "model" / "abs.onnx", (dir / "secret.bin").string());
  EXPECT_HAS(error_of([&] { import_onnx(abs, shapes_only()); }), "absolute");
  fs::create_symlink(dir / "secret.bin", dir / "model" / "link.bin");
  std::string link = save_model(dir / "model" / "link.onnx", "link.bin");
  EXPECT_HAS(error_of([&] { import_onnx(link, shapes_only()); }), "outside the model's directory");

  // A file replaced by a symlink after the import is not followed when the values are read.
  write_file(dir / "model" / "w.bin", {1, 2, 3, 4});
  Graph g = import_onnx(save_model(dir / "model" / "late.onnx", "w.bin"), shapes_only());
  fs::remove(dir / "model" / "w.bin");
  fs::create_symlink(dir / "secret.bin", dir / "model" / "w.bin");
  EXPECT_HAS(error_of([&] { tensor_bytes(g.tensor(*g.find_tensor("w"))); }), "symlink");
}

TEST(LazyData, IrTextRoundTripsReferences) {
  test::TempDir dir("lazy_text");
  Graph g = import_onnx(save_model(dir / "m.onnx", "m.data"), shapes_only());
  std::string text = print_graph(g);
  std::string file = g.tensor(*g.find_tensor("w")).external->file;
  EXPECT_HAS(text, "tensor w f32[4] param external(\"" + file + "\", 8, 16)");
  Graph back = parse_graph(text, "t.ir");
  EXPECT_EQ(print_graph(back), text);
  EXPECT_EQ(back.tensor(*back.find_tensor("w")).external, g.tensor(*g.find_tensor("w")).external);

  auto parse_error = [](const std::string &line) {
    return error_of([&] { parse_graph("graph g\n" + line + "\n", "t.ir"); });
  };
  EXPECT_HAS(parse_error("tensor w f32[4] param external(\"/a\", 0, 15)"), "t.ir:2: external data length must be 16");
  EXPECT_HAS(parse_error("tensor w f32[4] param external(\"/a\", -1, 16)"), "offset must be a non-negative integer");
  EXPECT_HAS(parse_error("tensor w f32[4] input external(\"/a\", 0, 16)"), "only params reference external data");
  EXPECT_HAS(parse_error("tensor w f32[4] param external(/a, 0, 16)"), "expected a quoted file name");
}

}  // namespace
}  // namespace cleave
