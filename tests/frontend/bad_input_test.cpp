// Every kind of bad model gives one UserError whose message names the problem.
#include <gtest/gtest.h>

#include <fstream>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::kI64;
using test::import;
using test::import_error;
using test::ModelBuilder;

TEST(BadInput, UnsupportedNodesAreListedTogether) {
  ModelBuilder mb(14);
  mb.add_opset("com.x", 1);
  mb.input("x", kF32, {2, 3});
  mb.node("Relu", {"x"}, {"a"}, "ok");
  mb.node("Unique", {"a"}, {"b"}, "n1");
  mb.node("Foo", {"b"}, {"y"}, "n2", "com.x");
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "unsupported");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "2 unsupported nodes");
  EXPECT_HAS(msg, "\"n1\" (Unique, ai.onnx, opset 14)");
  EXPECT_HAS(msg, "\"n2\" (Foo, com.x, opset 1)");
  EXPECT_EQ(msg.find("\"ok\""), std::string::npos);
}

TEST(BadInput, OpsetOutOfRange) {
  ModelBuilder mb(11);
  mb.input("x", kF32, {2, 3});
  mb.node("Softmax", {"x"}, {"y"});
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "opset11");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "opset 11");
  ModelBuilder mb18(18);
  mb18.input("x", kF32, {2, 3});
  mb18.node("Relu", {"x"}, {"y"});
  mb18.output("y", 2);
  EXPECT_HAS(import_error(mb18, "opset18").first, "opset 18");
}

TEST(BadInput, SymbolicBatchNeedsFlag) {
  ModelBuilder mb;
  mb.input("x", kF32, {test::kSym, 3});
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 2);
  std::string msg = import_error(mb, "batch").first;
  EXPECT_HAS(msg, "input \"x\"");
  EXPECT_HAS(msg, "\"batch\"");
  EXPECT_HAS(msg, "--batch");
  // One symbolic dim is the sample axis, wherever it is; a second one cannot be fixed.
  ModelBuilder two;
  two.input("x", kF32, {test::kSym, test::kSym});
  two.node("Relu", {"x"}, {"y"});
  two.output("y", 2);
  ImportOptions opts;
  opts.batch = 4;
  msg = import_error(two, "twosym", opts).first;
  EXPECT_HAS(msg, "input \"x\": dimension 1 is symbolic (\"batch\"); cleave needs static shapes except the sample axis (0)");
}

TEST(BadInput, SampleAxisFromSymbolicDimOrFlag) {
  // A time-major [T, B] input: its symbolic dim 1 is the sample axis, fixed by --batch.
  test::TempDir dir("sampleaxis");
  ModelBuilder mb;
  mb.input("x", kF32, {5, test::kSym});
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 2);
  std::string path = mb.save(dir / "model.onnx");
  ImportOptions opts;
  opts.batch = 4;
  Graph g = import_onnx(path, opts);
  const Tensor &x = g.tensor(*g.find_tensor("x"));
  EXPECT_EQ(x.shape, (Shape{5, 4}));
  EXPECT_EQ(x.sample_axis, 1);
  // A static model: --batch-axis names it; a wrong name or axis is one error naming the flag.
  ModelBuilder st;
  st.input("x", kF32, {5, 4});
  st.node("Relu", {"x"}, {"y"});
  st.output("y", 2);
  path = st.save(dir / "static.onnx");
  EXPECT_EQ(import_onnx(path).tensor(0).sample_axis, 0);
  opts = {};
  opts.batch_axes = {{"x", 1}};
  EXPECT_EQ(import_onnx(path, opts).tensor(0).sample_axis, 1);
  opts.batch_axes = {{"x", 2}};
  EXPECT_HAS(import_error(st, "axis2", opts).first, "--batch-axis: input \"x\" has 2 dims, no axis 2");
  opts.batch_axes = {{"z", 0}};
  EXPECT_HAS(import_error(st, "axisz", opts).first, "--batch-axis: the model has no graph input \"z\"");
  // --batch-axis against the symbolic dim: the symbolic one cannot be fixed.
  opts.batch = 4;
  opts.batch_axes = {{"x", 0}};
  EXPECT_HAS(import_error(mb, "axis0", opts).first, "dimension 1 is symbolic (\"batch\"); cleave needs static shapes "
                                                    "except the sample axis (0)");
}

TEST(BadInput, BatchFlagOnAFixedBatchModel) {
  // A model exported without a dynamic axis keeps its batch: --batch must match it, not be silently dropped.
  test::TempDir dir("fixedbatch");
  ModelBuilder st;
  st.input("x", kF32, {32, 3});
  st.node("Relu", {"x"}, {"y"});
  st.output("y", 2);
  std::string path = st.save(dir / "fixed.onnx");
  ImportOptions opts;
  opts.batch = 32;
  EXPECT_EQ(import_onnx(path, opts).tensor(0).shape, (Shape{32, 3}));
  opts.batch = 16;
  EXPECT_HAS(import_error(st, "fixed16", opts).first,
             "--batch 16: the model's inputs have no symbolic dimension to take it (input \"x\" [32,3]): pass "
             "--batch 32, or export the model with a dynamic batch axis");
}

TEST(BadInput, CycleIsRejected) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.node("Add", {"x", "b"}, {"a"}, "first");
  mb.node("Relu", {"a"}, {"b"}, "second");
  mb.output("b", 1);
  std::string msg = import_error(mb, "cycle").first;
  EXPECT_HAS(msg, "cycle through node \"first\" (Add)");
}

TEST(BadInput, TwoProducersOfOneName) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.node("Relu", {"x"}, {"a"}, "p1");
  mb.node("Neg", {"x"}, {"a"}, "p2");
  mb.output("a", 1);
  std::string msg = import_error(mb, "dup").first;
  EXPECT_HAS(msg, "tensor \"a\" is produced by both node \"p1\" and node \"p2\"");
}

TEST(BadInput, UndefinedInput) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.node("Add", {"x", "nowhere"}, {"y"}, "add");
  mb.output("y", 1);
  EXPECT_HAS(import_error(mb, "undef").first, "node \"add\" (Add): input \"nowhere\" is not defined");
}

TEST(BadInput, DuplicateInitializer) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.init_f("w", {2}, {1, 2});
  mb.init_f("w", {2}, {3, 4});
  mb.node("Add", {"x", "w"}, {"y"});
  mb.output("y", 1);
  std::string msg = import_error(mb, "dupinit").first;
  EXPECT_HAS(msg, "initializer \"w\" is defined twice");
}

TEST(BadInput, InputNamedLikeInitializerIsTheInitializer) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.input("w", kF32, {2});
  mb.init_f("w", {2}, {1, 2});
  mb.node("Add", {"x", "w"}, {"y"});
  mb.output("y", 1);
  test::TempDir dir("inputinit");
  Graph g = import_onnx(mb.save(dir / "model.onnx"));
  EXPECT_EQ(g.tensor(*g.find_tensor("w")).role, Role::param);
}

TEST(BadInput, AttributeOfWrongType) {
  ModelBuilder mb;
  mb.input("x", kF32, {1, 1, 4, 4});
  mb.init_f("w", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
  auto &n = mb.node("Conv", {"x", "w"}, {"y"}, "c1");
  test::set_floats(n, "strides", {1.f, 1.f});
  mb.output("y", 4);
  std::string msg = import_error(mb, "attrtype").first;
  EXPECT_HAS(msg, "node \"c1\" (Conv, opset 13): attribute \"strides\" must be ints, got floats");
}

TEST(BadInput, MissingRequiredAttribute) {
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.node("Concat", {"x", "x"}, {"y"}, "cat");
  mb.output("y", 1);
  std::string msg = import_error(mb, "noattr").first;
  EXPECT_HAS(msg, "node \"cat\" (Concat, opset 13): missing required attribute \"axis\"");
}

TEST(BadInput, ElementCountOverflow) {
  ModelBuilder mb;
  mb.input("x", kF32, {int64_t{1} << 40, int64_t{1} << 40});
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 2);
  std::string msg = import_error(mb, "overflow").first;
  EXPECT_HAS(msg, "overflows");
  EXPECT_HAS(msg, "\"x\"");
}

TEST(BadInput, NonConstantShapeInput) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.input("s", kI64, {2});
  mb.node("Reshape", {"x", "s"}, {"y"}, "r");
  mb.output("y", 2);
  std::string msg = import_error(mb, "dynshape").first;
  EXPECT_HAS(msg, "node \"r\" (Reshape, opset 13)");
  EXPECT_HAS(msg, "compile-time constant");
}

TEST(BadInput, ShapeMismatchNamesTheNode) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_i64("s", {2}, {4, 4});
  mb.node("Reshape", {"x", "s"}, {"y"}, "r");
  mb.output("y", 2);
  std::string msg = import_error(mb, "badreshape").first;
  EXPECT_HAS(msg, "\"r\"");
}

TEST(BadInput, UnsupportedDtype) {
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::COMPLEX64, {2});
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 1, onnx::TensorProto::COMPLEX64);
  auto [msg, code] = import_error(mb, "complex");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "complex64");
}

TEST(BadInput, GarbageAndTruncatedFiles) {
  test::TempDir dir("garbage");
  std::string path = (dir / "bad.onnx").string();
  {
    std::ofstream os(path, std::ios::binary);
    os << "\xff\xff\xff\xff this is not a protobuf";
  }
  try {
    import_onnx(path);
    ADD_FAILURE() << "garbage imported";
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), path);
  }
  // A real model cut in half.
  ModelBuilder mb;
  mb.input("x", kF32, {2});
  mb.init_f("w", {64}, std::vector<float>(64, 1.f));
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 1);
  std::string bytes;
  mb.m.SerializeToString(&bytes);
  std::string cut = (dir / "cut.onnx").string();
  {
    std::ofstream os(cut, std::ios::binary);
    os << bytes.substr(0, bytes.size() / 2);
  }
  try {
    import_onnx(cut);
    ADD_FAILURE() << "truncated model imported";
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), cut);
  }
  try {
    import_onnx((dir / "missing.onnx").string());
    ADD_FAILURE() << "missing file imported";
  } catch (const UserError &e) {
    EXPECT_HAS(std::string(e.what()), "missing.onnx");
  }
}

TEST(BadInput, BoundValueOfWrongType) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.input("s", kI64, {2});
  mb.node("Reshape", {"x", "s"}, {"y"});
  mb.output("y", 2);
  ImportOptions opts;
  opts.input_values["s"] = Tensor{"s", DType::i32, {2}, Role::input, std::vector<uint8_t>(8, 0), kNoOp};
  EXPECT_HAS(import_error(mb, "boundtype", opts).first, "input \"s\"");
}

}  // namespace
}  // namespace cleave
