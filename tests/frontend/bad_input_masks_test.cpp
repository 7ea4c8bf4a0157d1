// Bad or unsupported uses of the mask, padding, range and layer-norm ops give one clear error naming the node.
#include <gtest/gtest.h>

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

TEST(BadInputMasks, PadModesOtherThanConstantEdgeReflectAreUnsupported) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.init_i64("p", {4}, {0, 1, 0, 1});
  auto &n = mb.node("Pad", {"x", "p"}, {"y"}, "pad1");
  auto *a = n.add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("wrap");  // Pad-19's mode
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "padwrap");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "node \"pad1\" (Pad, opset 13)");
  EXPECT_HAS(msg, "\"wrap\"");
}

TEST(BadInputMasks, PadsMustBeConstant) {
  ModelBuilder mb;
  mb.input("x", kF32, {2, 3});
  mb.input("p", kI64, {4});
  mb.node("Pad", {"x", "p"}, {"y"}, "pad2");
  mb.output("y", 2);
  std::string msg = import_error(mb, "paddyn").first;
  EXPECT_HAS(msg, "node \"pad2\"");
  EXPECT_HAS(msg, "compile-time constant");
}

TEST(BadInputMasks, RangeNeedsConstants) {
  ModelBuilder mb;
  mb.input("s", kI64, {});
  mb.init_i64("l", {}, {5});
  mb.init_i64("d", {}, {1});
  mb.node("Range", {"s", "l", "d"}, {"y"}, "rng");
  mb.output("y", 1, kI64);
  std::string msg = import_error(mb, "rangedyn").first;
  EXPECT_HAS(msg, "node \"rng\" (Range, opset 13)");
  EXPECT_HAS(msg, "\"start\"");
  EXPECT_HAS(msg, "compile-time constant");
}

TEST(BadInputMasks, RangeWithZeroDelta) {
  ModelBuilder mb;
  mb.init_i64("s", {}, {0});
  mb.init_i64("l", {}, {5});
  mb.init_i64("d", {}, {0});
  mb.node("Range", {"s", "l", "d"}, {"y"}, "rng0");
  mb.output("y", 1, kI64);
  std::string msg = import_error(mb, "range0").first;
  EXPECT_HAS(msg, "node \"rng0\"");
  EXPECT_HAS(msg, "delta is 0");
}

TEST(BadInputMasks, TriluOfRuntimeValuesIsWhereButItsKMustBeConstant) {
  // Run-time values and trainable initializers import as Where(mask, x, 0) (their values: tests/e2e/index_ops.py).
  for (const char *source : {"x", "w"}) {
    ModelBuilder mb(14);
    mb.input("x", kF32, {3, 3});
    mb.init_f("w", {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    mb.node("Trilu", {source}, {"y"}, "tri");
    mb.output("y", 2);
    test::TempDir dir("trilu");
    Graph g = import_onnx(mb.save(dir / "model.onnx"), {});
    ASSERT_TRUE(g.find_op("tri").has_value()) << source;
    EXPECT_EQ(g.op(*g.find_op("tri")).kind, OpKind::Where) << source;
  }
  // The band's offset k decides the mask at compile time.
  ModelBuilder mb(14);
  mb.input("x", kF32, {3, 3});
  mb.input("k", kI64, {});
  mb.node("Trilu", {"x", "k"}, {"y"}, "tri");
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "trilu_k");
  EXPECT_HAS(msg, "node \"tri\" (Trilu, opset 14)");
  EXPECT_HAS(msg, "compile-time constant");
  EXPECT_NE(code, 0);
}

TEST(BadInputMasks, ScatterNDOfRuntimeValuesOrParamsAndBadShapes) {
  // Folded only (Swin's attention mask): of a graph input or a trainable initializer it names the node.
  ModelBuilder mb;
  mb.input("x", kF32, {4});
  mb.init_i64("i", {1, 1}, {2});
  mb.init_f("u", {1}, {5});
  mb.node("ScatterND", {"x", "i", "u"}, {"y"}, "sc");
  mb.output("y", 1);
  std::string msg = import_error(mb, "scatternd").first;
  EXPECT_HAS(msg, "node \"sc\" (ScatterND, opset 13)");
  EXPECT_HAS(msg, "compile-time constant");
  ModelBuilder pm;
  pm.init_f("w", {4}, {1, 2, 3, 4});
  pm.init_i64("i", {1, 1}, {2});
  pm.init_f("u", {1}, {5});
  pm.node("ScatterND", {"w", "i", "u"}, {"y"}, "sc2");
  pm.output("y", 1);
  auto [m2, code] = import_error(pm, "scatterndparam");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(m2, "trainable initializer");
  // Of constants (ConstantOfShape zeros), an index past the end is an error naming the node.
  ModelBuilder oob;
  oob.init_i64("s4", {1}, {4});
  oob.init_i64("s1", {1}, {1});
  oob.init_i64("i", {1, 1}, {4});
  oob.node("ConstantOfShape", {"s4"}, {"z"}, "zeros");
  oob.node("ConstantOfShape", {"s1"}, {"u"}, "ones");
  oob.node("ScatterND", {"z", "i", "u"}, {"y"}, "sc3");
  oob.output("y", 1);
  std::string m3 = import_error(oob, "scatterndoob").first;
  EXPECT_HAS(m3, "node \"sc3\"");
  EXPECT_HAS(m3, "index 4 is out of range for dimension 0 of size 4");
}

TEST(BadInputMasks, LayerNormStashTypeAndScaleShape) {
  ModelBuilder mb(17);
  mb.input("x", kF32, {2, 4});
  mb.init_f("s", {4}, {1, 1, 1, 1});
  auto &n = mb.node("LayerNormalization", {"x", "s"}, {"y"}, "ln");
  auto *a = n.add_attribute();
  a->set_name("stash_type");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(11);
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "lnstash");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "node \"ln\" (LayerNormalization, opset 17)");
  EXPECT_HAS(msg, "stash_type");
  ModelBuilder bad(17);
  bad.input("x", kF32, {2, 4});
  bad.init_f("s", {2}, {1, 1});
  bad.node("LayerNormalization", {"x", "s"}, {"y"}, "ln2");
  bad.output("y", 2);
  std::string m2 = import_error(bad, "lnscale").first;
  EXPECT_HAS(m2, "\"ln2\"");
}

}  // namespace
}  // namespace cleave
