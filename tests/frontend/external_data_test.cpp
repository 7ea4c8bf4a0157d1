// Initializers with external data, TensorProto decoding, and save_onnx_with_initializers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

namespace fs = std::filesystem;
using test::kF32;
using test::ModelBuilder;

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "message: " << (msg)

void write_floats(const fs::path &p, size_t skip_bytes, const std::vector<float> &v) {
  std::ofstream os(p, std::ios::binary);
  os << std::string(skip_bytes, 'x');
  os.write(reinterpret_cast<const char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
}

/** x[4] + w[4], with w stored externally at `location` (offset 8). */
ModelBuilder external_model(const std::string &location, std::optional<int64_t> length = std::nullopt) {
  ModelBuilder mb;
  mb.input("x", kF32, {4});
  auto *w = mb.g().add_initializer();
  w->set_name("w");
  w->set_data_type(kF32);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string &k, const std::string &v) {
    auto *e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", "8");
  if (length) add("length", std::to_string(*length));
  mb.node("Add", {"x", "w"}, {"y"});
  mb.output("y", 1);
  return mb;
}

/** The names of the files in `dir` that start with `prefix` and end with `suffix`, sorted. */
std::vector<std::string> files_named(const fs::path &dir, const std::string &prefix, const std::string &suffix) {
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.size() > prefix.size() + suffix.size() && n.rfind(prefix, 0) == 0 &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string import_error(const std::string &path) {
  try {
    import_onnx(path);
  } catch (const UserError &e) {
    return e.what();
  }
  ADD_FAILURE() << path << " imported";
  return "";
}

TEST(ExternalData, InsideModelDirectoryLoads) {
  test::TempDir dir("ext_ok");
  fs::create_directories(dir / "weights");
  write_floats(dir / "weights" / "w.bin", 8, {1.5f, -2.f, 3.f, 4.25f});
  std::string path = external_model("weights/w.bin", 16).save(dir / "model.onnx");
  Graph g = import_onnx(path);
  const Tensor &w = g.tensor(*g.find_tensor("w"));
  EXPECT_EQ(w.role, Role::param);
  EXPECT_EQ(data_as_doubles(w), (std::vector<double>{1.5, -2, 3, 4.25}));
}

TEST(ExternalData, OutsideModelDirectoryIsRejected) {
  test::TempDir dir("ext_out");
  fs::create_directories(dir / "model");
  write_floats(dir / "secret.bin", 8, {1, 2, 3, 4});
  std::string up = external_model("../secret.bin").save(dir / "model" / "up.onnx");
  EXPECT_HAS(import_error(up), "outside the model's directory");
  std::string abs = external_model((dir / "secret.bin").string()).save(dir / "model" / "abs.onnx");
  std::string msg = import_error(abs);
  EXPECT_HAS(msg, "initializer \"w\"");
  EXPECT_HAS(msg, "absolute");
  fs::create_symlink(dir / "secret.bin", dir / "model" / "link.bin");
  std::string link = external_model("link.bin").save(dir / "model" / "link.onnx");
  EXPECT_HAS(import_error(link), "outside the model's directory");
}

TEST(ExternalData, MissingOrShortFiles) {
  test::TempDir dir("ext_short");
  std::string missing = external_model("nothere.bin").save(dir / "missing.onnx");
  std::string msg = import_error(missing);
  EXPECT_HAS(msg, "initializer \"w\"");
  EXPECT_HAS(msg, "nothere.bin");
  write_floats(dir / "short.bin", 8, {1, 2, 3});  // 12 bytes after the offset, 16 needed
  msg = import_error(external_model("short.bin").save(dir / "short.onnx"));
  EXPECT_HAS(msg, "initializer \"w\"");
  EXPECT_HAS(msg, "short.bin");
  write_floats(dir / "full.bin", 8, {1, 2, 3, 4});
  msg = import_error(external_model("full.bin", 8).save(dir / "len.onnx"));  // length shorter than the shape
  EXPECT_HAS(msg, "initializer \"w\"");
  EXPECT_HAS(msg, "16 bytes");
}

TEST(TensorProto, TypedFieldsAndRawDataAgree) {
  onnx::TensorProto typed, raw;
  for (auto *t : {&typed, &raw}) {
    t->set_name("t");
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(3);
  }
  std::vector<int64_t> v{-1, 0, int64_t{1} << 40};
  for (int64_t x : v) typed.add_int64_data(x);
  raw.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(int64_t)));
  Tensor a = tensor_from_proto(typed, "", "t"), b = tensor_from_proto(raw, "", "t");
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(data_as_ints(a), v);
  raw.set_raw_data("abc");
  try {
    tensor_from_proto(raw, "", "tensor \"t\"");
    ADD_FAILURE() << "short raw_data accepted";
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), "raw_data has 3 bytes");
  }
}

TEST(TensorProto, ReadsConformanceFiles) {
  // test_add: inputs [3,4,5] float, output = their sum (checked against ONNX's own output file).
  std::string dir = "/usr/share/libonnx-testdata/data/node/test_add/test_data_set_0/";
  Tensor a = read_tensor_proto_file(dir + "input_0.pb"), b = read_tensor_proto_file(dir + "input_1.pb");
  Tensor c = read_tensor_proto_file(dir + "output_0.pb");
  ASSERT_EQ(a.shape, (Shape{3, 4, 5}));
  EXPECT_EQ(a.dtype, DType::f32);
  std::vector<double> x = data_as_doubles(a), y = data_as_doubles(b), z = data_as_doubles(c);
  ASSERT_EQ(z.size(), 60u);
  for (size_t i = 0; i < z.size(); ++i) EXPECT_FLOAT_EQ(static_cast<float>(x[i] + y[i]), static_cast<float>(z[i]));
  try {
    read_tensor_proto_file(dir + "nope.pb");
    ADD_FAILURE();
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), "nope.pb");
  }
}

TEST(SaveOnnx, ReplacesInitializersAtomically) {
  test::TempDir dir("save");
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.init_f("w", {2}, {1.f, 2.f});  // typed float_data: must be cleared
  mb.init_f("v", {2}, {5.f, 6.f});
  mb.node("Add", {"x", "w"}, {"a"});
  mb.node("Mul", {"a", "v"}, {"y"});
  mb.output("y", 1);
  std::string in = mb.save(dir / "in.onnx");
  std::string out = (dir / "out.onnx").string();
  std::vector<float> nw{7.f, -8.f};
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), nw.data(), 8);
  save_onnx_with_initializers(in, out, {{"w", bytes}});
  Graph g = import_onnx(out);
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("w"))), (std::vector<double>{7, -8}));
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("v"))), (std::vector<double>{5, 6}));

  // Errors leave nothing behind: no output, no temporary file.
  std::string out2 = (dir / "out2.onnx").string();
  for (const auto &bad : std::vector<std::map<std::string, std::vector<uint8_t>>>{{{"nosuch", bytes}},
                                                                                 {{"w", {1, 2, 3}}}}) {
    EXPECT_THROW(save_onnx_with_initializers(in, out2, bad), UserError);
  }
  int files = 0;
  for (const auto &e : fs::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);  // in.onnx, out.onnx
  EXPECT_THROW(save_onnx_with_initializers(in, (dir / "no_dir" / "x.onnx").string(), {{"w", bytes}}), UserError);
}

TEST(SaveOnnx, PastTheLimitInitializersGoToADataFileBesideTheModel) {
  test::TempDir dir("save_external");
  ModelBuilder mb;
  mb.input("x", kF32, {512});
  mb.init_f("w", {512}, std::vector<float>(512, 1.f));
  mb.init_f("s", {1}, {3.f});  // below kExternalMin: stays inline
  mb.node("Add", {"x", "w"}, {"a"});
  mb.node("Mul", {"a", "s"}, {"y"});
  mb.output("y", 1);
  std::string in = mb.save(dir / "in.onnx");
  std::string out = (dir / "out.onnx").string();
  std::vector<float> nw(512);
  for (size_t i = 0; i < nw.size(); ++i) nw[i] = 0.5f * static_cast<float>(i);
  std::vector<uint8_t> bytes(nw.size() * 4);
  std::memcpy(bytes.data(), nw.data(), bytes.size());
  save_onnx_with_initializers(in, out, {{"w", bytes}}, "--save-model", false, 1000);
  std::vector<std::string> data_files = files_named(dir.path(), "out.onnx.", ".data");
  ASSERT_EQ(data_files.size(), 1u);
  EXPECT_EQ(data_files[0].size(), std::string("out.onnx.0123456789abcdef.data").size()) << data_files[0];
  EXPECT_EQ(fs::file_size(dir / data_files[0]), 2048u);
  onnx::ModelProto m;
  std::ifstream is(out, std::ios::binary);
  ASSERT_TRUE(m.ParseFromIstream(&is));
  for (const auto &tp : m.graph().initializer()) {
    bool external = tp.data_location() == onnx::TensorProto::EXTERNAL;
    EXPECT_EQ(external, tp.name() == "w") << tp.name();
    if (external) EXPECT_EQ(tp.external_data(0).value(), data_files[0]);  // relative: the pair can move together
  }
  Graph g = import_onnx(out);
  std::vector<double> want(nw.begin(), nw.end());
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("w"))), want);
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("s"))), (std::vector<double>{3}));

  // Saved again in place with other weights: the model reads its own data file, written beside the old one, which
  // is removed once the new model is in place.
  for (float &v : nw) v += 1;
  std::memcpy(bytes.data(), nw.data(), bytes.size());
  save_onnx_with_initializers(out, out, {{"w", bytes}}, "--save-model", false, 1000);
  std::vector<std::string> now = files_named(dir.path(), "out.onnx.", ".data");
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], data_files[0]);
  std::vector<double> want2(nw.begin(), nw.end());
  Graph g2 = import_onnx(out);
  EXPECT_EQ(data_as_doubles(g2.tensor(*g2.find_tensor("w"))), want2);

  // Below the limit the model stays one file.
  std::string small = (dir / "small.onnx").string();
  save_onnx_with_initializers(in, small, {{"w", bytes}});
  EXPECT_TRUE(files_named(dir.path(), "small.onnx.", ".data").empty());
  Graph g3 = import_onnx(small);
  EXPECT_EQ(data_as_doubles(g3.tensor(*g3.find_tensor("w"))), want2);
}

TEST(SaveOnnx, TheSourcesExternalDataIsCopiedIn) {
  test::TempDir dir("save_copies");
  fs::create_directory(dir / "src");
  fs::create_directory(dir / "elsewhere");
  write_floats(dir / "src" / "w.bin", 8, {1.f, 2.f, 3.f, 4.f});
  std::string in = external_model("w.bin").save(dir / "src" / "model.onnx");
  std::string out = (dir / "elsewhere" / "model.onnx").string();
  save_onnx_with_initializers(in, out, {});
  fs::remove_all(dir / "src");
  Graph g = import_onnx(out);
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("w"))), (std::vector<double>{1, 2, 3, 4}));
}

TEST(SaveOnnx, AModelPastTheLimitWithoutItsInitializersIsAnErrorAndWritesNothing) {
  test::TempDir dir("save_limit");
  ModelBuilder mb;
  mb.input("x", kF32, {512});
  mb.init_f("w", {512}, std::vector<float>(512, 1.f));
  mb.node("Add", {"x", "w"}, {"y"});
  mb.output("y", 1);
  std::string in = mb.save(dir / "in.onnx");
  try {
    save_onnx_with_initializers(in, (dir / "out.onnx").string(), {}, "--save-model", false, 10);
    ADD_FAILURE() << "saved";
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), "bytes, past protobuf's limit");
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // in.onnx only
}

}  // namespace
}  // namespace cleave
