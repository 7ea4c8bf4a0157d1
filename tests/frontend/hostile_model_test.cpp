// Hostile models (issue 25): values ONNX's shape inference would crash on or silently accept. Each gives exactly one
// one-line UserError (exit code 1) naming the node and the attribute or tensor, before InferShapes runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

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

#define EXPECT_ERROR(mb, tag, fragment)                                  \
  do {                                                                   \
    auto [msg_, code_] = import_error(mb, tag);                          \
    EXPECT_EQ(code_, 1) << msg_;                                         \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_; \
  } while (0)

/** x[1,1,4,4] -> OP(kind) -> y, with the window attributes `set` adds. */
template <typename F>
ModelBuilder window_model(const std::string &op, F set) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {1, 1, 4, 4});
  std::vector<std::string> ins = {"x"};
  if (op == "Conv") {
    mb.init_f("w", {1, 1, 2, 2}, std::vector<float>(4, 1.f));
    ins.push_back("w");
  }
  onnx::NodeProto &n = mb.node(op, ins, {"y"}, "win");
  if (op != "Conv") test::set_ints(n, "kernel_shape", {2, 2});
  set(n);
  mb.output("y", 4);
  return mb;
}

TEST(HostileModel, ZeroOrNegativeStrideDilationKernel) {
  for (const char *op : {"Conv", "MaxPool", "AveragePool"}) {
    EXPECT_ERROR(window_model(op, [](auto &n) { test::set_ints(n, "strides", {1, 0}); }), "stride0",
                 "(" + std::string(op) + ", opset 13): attribute \"strides\" must be positive, got [1,0]");
    EXPECT_ERROR(window_model(op, [](auto &n) { test::set_ints(n, "strides", {-1, 1}); }), "strideneg",
                 "attribute \"strides\" must be positive");
    EXPECT_ERROR(window_model(op, [](auto &n) { test::set_ints(n, "pads", {0, -1, 0, 0}); }), "padneg",
                 "attribute \"pads\" must not be negative, got [0,-1,0,0]");
  }
  EXPECT_ERROR(window_model("Conv", [](auto &n) { test::set_ints(n, "dilations", {0, 1}); }), "dil0",
               "attribute \"dilations\" must be positive");
  EXPECT_ERROR(window_model("Conv", [](auto &n) { test::set_ints(n, "kernel_shape", {2, 0}); }), "kernel0",
               "attribute \"kernel_shape\" must be positive");
  EXPECT_ERROR(window_model("MaxPool", [](auto &n) { test::set_ints(n, "pads", {0, 0, 0}); }), "padlen",
               "attribute \"pads\" has 3 entries, kernel_shape 2 needs 4");
}

TEST(HostileModel, AutoPadWithExplicitPads) {
  for (const char *mode : {"VALID", "SAME_UPPER"}) {
    ModelBuilder mb = window_model("Conv", [&](auto &n) {
      test::set_string(n, "auto_pad", mode);
      test::set_ints(n, "pads", {1, 1, 1, 1});
    });
    EXPECT_ERROR(mb, "autopad", "attribute \"auto_pad\" is " + std::string(mode) + " and explicit \"pads\"");
  }
  EXPECT_ERROR(window_model("Conv", [](auto &n) { test::set_string(n, "auto_pad", "SAME"); }), "autopad_unknown",
               "attribute \"auto_pad\" must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"SAME\"");
}

TEST(HostileModel, FlagsMustBeZeroOrOne) {
  auto gemm = [](const char *key, int64_t v) {
    ModelBuilder mb(13);
    mb.input("x", kF32, {2, 3});
    mb.init_f("w", {3, 3}, std::vector<float>(9, 1.f));
    test::set_int(mb.node("Gemm", {"x", "w"}, {"y"}, "fc"), key, v);
    mb.output("y", 2);
    return mb;
  };
  EXPECT_ERROR(gemm("transB", 2), "transB", "node \"fc\" (Gemm, opset 13): attribute \"transB\" must be 0 or 1, got 2");
  EXPECT_ERROR(gemm("transA", -1), "transA", "attribute \"transA\" must be 0 or 1, got -1");
  EXPECT_ERROR(window_model("MaxPool", [](auto &n) { test::set_int(n, "ceil_mode", 5); }), "ceil",
               "attribute \"ceil_mode\" must be 0 or 1, got 5");
}

ModelBuilder batchnorm(const char *key, float eps, int64_t training_mode) {
  ModelBuilder mb(15);
  mb.input("x", kF32, {2, 3, 4});
  for (const char *p : {"s", "b", "m", "v"}) mb.init_f(p, {3}, {1.f, 1.f, 1.f});
  onnx::NodeProto &n = mb.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"}, "bn");
  if (std::string(key) == "epsilon") test::set_float(n, "epsilon", eps);
  else test::set_int(n, "training_mode", training_mode);
  mb.output("y", 3);
  return mb;
}

TEST(HostileModel, BatchNormEpsilonAndTrainingMode) {
  EXPECT_ERROR(batchnorm("epsilon", -1.f, 0), "eps", "(BatchNormalization, opset 15): attribute \"epsilon\" must be >= 0");
  EXPECT_ERROR(batchnorm("epsilon", std::numeric_limits<float>::quiet_NaN(), 0), "epsnan",
               "attribute \"epsilon\" must be finite, got nan");
  EXPECT_ERROR(batchnorm("training_mode", 0, 7), "tm", "attribute \"training_mode\" must be 0 or 1, got 7");
}

TEST(HostileModel, NonFiniteGemmAlpha) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 3});
  mb.init_f("w", {3, 3}, std::vector<float>(9, 1.f));
  test::set_float(mb.node("Gemm", {"x", "w"}, {"y"}, "fc"), "alpha", std::numeric_limits<float>::quiet_NaN());
  mb.output("y", 2);
  EXPECT_ERROR(mb, "alpha", "attribute \"alpha\" must be finite, got nan");
}

TEST(HostileModel, GemmOfMoreThanTwoDims) {
  // The IR's Gemm sums leading dims under transA; an ONNX Gemm multiplies matrices only, and ONNX's shape inference
  // (run before anything is translated) refuses other ranks.
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 3, 4});
  mb.init_f("w", {2, 3, 5}, std::vector<float>(30, 1.f));
  test::set_int(mb.node("Gemm", {"x", "w"}, {"y"}, "fc"), "transA", 1);
  mb.output("y", 2);
  EXPECT_ERROR(mb, "gemm3d", "(op_type:Gemm, node name: fc): [ShapeInferenceError] First input does not have rank 2");
}

TEST(HostileModel, Int64InitializerWithWrongRawData) {
  for (size_t bytes : {8u, 24u}) {  // shorter and longer than the 2 int64s its dims say
    ModelBuilder mb(13);
    mb.input("x", kF32, {2, 3});
    onnx::TensorProto *shape = mb.init_i64("shape", {2}, {});
    shape->set_raw_data(std::string(bytes, '\0'));
    mb.node("Reshape", {"x", "shape"}, {"y"}, "r");
    mb.output("y", 2);
    EXPECT_ERROR(mb, "raw", "initializer \"shape\": raw_data has " + std::to_string(bytes) +
                               " bytes, shape [2] of i64 needs 16");
  }
}

TEST(HostileModel, FloatInitializerWithWrongRawDataWithoutLoadingData) {
  // `cleave plan` imports without data; it must reject what `cleave ir` rejects.
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 3});
  mb.init_f("w", {3, 3}, {})->set_raw_data(std::string(5, '\0'));
  mb.node("MatMul", {"x", "w"}, {"y"}, "mm");
  mb.output("y", 2);
  ImportOptions opts;
  opts.load_data = false;
  auto [msg, code] = import_error(mb, "rawf", opts);
  EXPECT_EQ(code, 1);
  EXPECT_NE(msg.find("initializer \"w\": raw_data has 5 bytes, shape [3,3] of f32 needs 36"), std::string::npos) << msg;
}

TEST(HostileModel, NodesOutOfTopologicalOrder) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2});
  mb.node("Exp", {"b"}, {"y"}, "e");
  mb.node("Neg", {"x"}, {"a"}, "n");
  mb.node("Tanh", {"a"}, {"b"}, "t");
  mb.output("y", 1);
  EXPECT_ERROR(mb, "unsorted",
               "node \"e\" (Exp, opset 13): input \"b\" is produced by a later node \"t\" (nodes must be in "
               "topological order)");
}

TEST(HostileModel, SecondDefaultOpsetImport) {
  ModelBuilder mb(13);
  mb.add_opset("ai.onnx", 15);
  mb.input("x", kF32, {2});
  mb.node("Relu", {"x"}, {"y"});
  mb.output("y", 1);
  EXPECT_ERROR(mb, "opset2", "the model imports the default (ai.onnx) opset twice (versions 13 and 15)");
}

TEST(HostileModel, ControlCharactersAreEscaped) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2});
  mb.node("Relu", {"x"}, {"y"}, "a\nb");
  mb.output("y", 1);
  EXPECT_ERROR(mb, "nl_name", "node \"a\\nb\" (Relu): names and op types must not contain control characters");
  ModelBuilder op(13);
  op.input("x", kF32, {2});
  op.node("Re\nlu", {"x"}, {"y"}, "r");
  op.output("y", 1);
  auto [msg, code] = import_error(op, "nl_op");
  EXPECT_EQ(code, 2);
  EXPECT_NE(msg.find("\"r\" (Re\\nlu, ai.onnx, opset 13)"), std::string::npos) << msg;
}

TEST(HostileModel, LrnAttributesAndInput) {
  auto lrn = [](int dtype, std::vector<int64_t> shape, std::optional<int64_t> size) {
    ModelBuilder mb(13);
    mb.input("x", dtype, shape);
    onnx::NodeProto &n = mb.node("LRN", {"x"}, {"y"}, "norm");
    if (size) test::set_int(n, "size", *size);
    mb.output("y", static_cast<int>(shape.size()));
    return mb;
  };
  EXPECT_ERROR(lrn(kF32, {2, 4, 3, 3}, std::nullopt), "lrn_nosize",
               "node \"norm\" (LRN, opset 13): missing required attribute \"size\"");
  EXPECT_ERROR(lrn(kF32, {2, 4, 3, 3}, 0), "lrn_size0", "attribute \"size\" must be given and positive");
  EXPECT_ERROR(lrn(kF32, {4}, 3), "lrn_rank1", "input X has rank 1; LRN needs [N, C, ...]");
  EXPECT_ERROR(lrn(kI64, {2, 4, 3, 3}, 3), "lrn_int",
               "(op_type:LRN, node name: norm): X typestr: T, has unsupported type");
}

TEST(HostileModel, RandomNodesShapeAndDtype) {
  auto random = [](const std::vector<int64_t> &shape, std::optional<int64_t> dtype) {
    ModelBuilder mb(13);
    mb.input("x", kF32, {2, 3});
    onnx::NodeProto &n = mb.node("RandomNormal", {}, {"r"}, "noise");
    test::set_ints(n, "shape", shape);
    if (dtype) test::set_int(n, "dtype", *dtype);
    mb.node("Identity", {"x"}, {"y"});
    mb.output("y", 2);
    mb.output("r", 2);
    return mb;
  };
  EXPECT_ERROR(random({2, 0}, std::nullopt), "random_shape0",
               "node \"noise\" (RandomNormal, opset 13): attribute \"shape\" must be positive, got [2,0]");
  EXPECT_ERROR(random({2, 3}, onnx::TensorProto::INT64), "random_int", "(op_type:RandomNormal, node name: noise)");
}

TEST(HostileModel, DetOfLargeOrNonSquareMatrices) {
  auto det = [](std::vector<int64_t> shape) {
    ModelBuilder mb(13);
    mb.input("x", kF32, shape);
    mb.node("Det", {"x"}, {"y"}, "det");
    mb.output("y", static_cast<int>(shape.size()) - 2);
    return mb;
  };
  auto [msg, code] = import_error(det({2, 5, 5}), "det5");
  EXPECT_EQ(code, 2) << msg;
  EXPECT_NE(msg.find("node \"det\" (Det, opset 13): matrices of 5x5 are not supported (up to 4x4)"),
            std::string::npos) << msg;
  EXPECT_ERROR(det({2, 3, 4}), "det34", "(op_type:Det, node name: det)");
}

TEST(HostileModel, IntegerDivisionByZeroInShapeArithmetic) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 6});
  mb.init_i64("zero_one", {2}, {0, 1});
  mb.node("Shape", {"x"}, {"s"}, "shape");
  mb.node("Div", {"s", "zero_one"}, {"t"}, "halve");
  mb.node("Reshape", {"x", "t"}, {"y"}, "reshape");
  mb.output("y", 2);
  EXPECT_ERROR(mb, "div0", "node \"halve\" (Div, opset 13): integer division by zero in a compile-time constant");
}

TEST(HostileModel, MaxUnpoolShapes) {
  auto unpool = [](std::vector<int64_t> idx_shape, std::optional<std::vector<int64_t>> out_shape) {
    ModelBuilder mb(13);
    mb.input("x", kF32, {1, 2, 2, 2});
    mb.input("i", kI64, idx_shape);
    std::vector<std::string> ins = {"x", "i"};
    if (out_shape) {
      mb.init_i64("shape", {4}, *out_shape);
      ins.push_back("shape");
    }
    onnx::NodeProto &n = mb.node("MaxUnpool", ins, {"y"}, "unpool");
    test::set_ints(n, "kernel_shape", {2, 2});
    test::set_ints(n, "strides", {2, 2});
    mb.output("y", 4);
    return mb;
  };
  EXPECT_ERROR(unpool({1, 2, 2, 2}, std::vector<int64_t>{1, 2, 3, 4}), "unpool_small",
               "node \"unpool\" (MaxUnpool, opset 13): output_shape [1,2,3,4] must be [N, C, spatial...] no smaller "
               "than [1,2,4,4]");
  EXPECT_ERROR(unpool({1, 2, 2, 2}, std::vector<int64_t>{1, 3, 5, 5}), "unpool_channels",
               "output_shape [1,3,5,5] must be [N, C, spatial...] no smaller than [1,2,4,4]");
  EXPECT_ERROR(unpool({1, 2, 2, 3}, std::nullopt), "unpool_indices",
               "(MaxUnpool, opset 13): indices I [1,2,2,3] must have X's shape [1,2,2,2]");
}

TEST(HostileModel, DetOfEmptyMatrices) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 0, 0});
  mb.node("Det", {"x"}, {"y"}, "det");
  mb.output("y", 1);
  EXPECT_ERROR(mb, "det0", "node \"det\" (Det, opset 13): input X [2,0,0] has empty matrices");
}

}  // namespace
}  // namespace cleave
