// Ops without a translator but with a function body (the schema's or a model-local FunctionProto) import as the
// body's nodes (frontend/expand_functions.h); those whose body cannot be translated are listed, with why, in the one
// unsupported-nodes error.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::import_error;
using test::ModelBuilder;

std::vector<std::string> op_names(const Graph &g) {
  std::vector<std::string> names;
  for (const Op &op : g.ops()) names.push_back(op.name);
  return names;
}

bool has_op(const Graph &g, const std::string &name) {
  for (const Op &op : g.ops())
    if (op.name == name) return true;
  return false;
}

/** x -> MeanVarianceNormalization (unnamed unless `name`) -> Relu (unnamed) -> y, at `opset`. */
ModelBuilder mvn_model(int64_t opset, const std::string &name = "") {
  ModelBuilder mb(opset);
  mb.input("x", kF32, {2, 3, 4, 4});
  mb.node("MeanVarianceNormalization", {"x"}, {"n"}, name);
  mb.node("Relu", {"n"}, {"y"});
  mb.output("y", 4);
  return mb;
}

TEST(FunctionOps, SchemaBodyIsExpandedWithTraceableNames) {
  Graph g = import(mvn_model(13, "mvn"), "mvn");
  std::vector<std::string> names = op_names(g);
  ASSERT_GE(names.size(), 6u);
  // Every op of the body is named after the node; the Relu keeps the name it had before the body moved its index.
  for (size_t i = 0; i + 1 < names.size(); ++i) EXPECT_EQ(names[i].rfind("mvn/", 0), 0u) << names[i];
  EXPECT_EQ(names.back(), "Relu_1");
  EXPECT_TRUE(has_op(g, "mvn/ReduceMean_2")) << print_graph(g);
  EXPECT_EQ(g.tensor(g.outputs[0]).shape, (Shape{2, 3, 4, 4}));
}

TEST(FunctionOps, UnnamedNodeIsPrefixedByItsImporterName) {
  Graph g = import(mvn_model(17), "mvn_unnamed");
  EXPECT_TRUE(has_op(g, "MeanVarianceNormalization_0/ReduceMean_2")) << print_graph(g);
  EXPECT_TRUE(has_op(g, "Relu_1"));
}

TEST(FunctionOps, IrTextIsDeterministic) {
  std::string a = print_graph(import(mvn_model(15, "mvn"), "mvn_a"));
  std::string b = print_graph(import(mvn_model(15, "mvn"), "mvn_b"));
  EXPECT_EQ(a, b);
  EXPECT_HAS(a, "mvn/");
}

TEST(FunctionOps, NativeTranslationWins) {
  // HardSwish has a function body (HardSigmoid, Mul) from opset 14, and a translator of its own.
  ModelBuilder mb(14);
  mb.input("x", kF32, {2, 3});
  mb.node("HardSwish", {"x"}, {"y"}, "hs");
  mb.output("y", 2);
  Graph g = import(mb, "hardswish");
  ASSERT_EQ(g.ops().size(), 1u) << print_graph(g);
  EXPECT_EQ(g.ops()[0].name, "hs");
}

onnx::FunctionProto *local_function(ModelBuilder &mb, const std::string &name, std::vector<std::string> inputs,
                                    std::vector<std::string> outputs) {
  onnx::FunctionProto *f = mb.m.add_functions();
  f->set_name(name);
  f->set_domain("com.x");
  for (const auto &s : inputs) f->add_input(s);
  for (const auto &s : outputs) f->add_output(s);
  auto *o = f->add_opset_import();
  o->set_domain("");
  o->set_version(13);
  o = f->add_opset_import();
  o->set_domain("com.x");
  o->set_version(1);
  return f;
}

onnx::NodeProto *body_node(onnx::FunctionProto *f, const std::string &op, std::vector<std::string> ins,
                           std::vector<std::string> outs, const std::string &domain = "") {
  onnx::NodeProto *n = f->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  for (const auto &s : ins) n->add_input(s);
  for (const auto &s : outs) n->add_output(s);
  return n;
}

TEST(FunctionOps, ModelLocalFunctionsNestAndTakeAttributes) {
  ModelBuilder mb(13);
  mb.add_opset("com.x", 1);
  // ScaledClip(x, lo, hi) = Clip(x * alpha, lo, hi), alpha an attribute of the call.
  onnx::FunctionProto *sc = local_function(mb, "ScaledClip", {"x", "lo", "hi"}, {"y"});
  sc->add_attribute("alpha");
  onnx::NodeProto *k = body_node(sc, "Constant", {}, {"a"});
  auto *ref = k->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  body_node(sc, "Mul", {"x", "a"}, {"t"});
  body_node(sc, "Clip", {"t", "lo", "hi"}, {"y"});
  // Outer(x) = ScaledClip(MeanVarianceNormalization(x)) with alpha 3 and no bounds: nested expansion.
  onnx::FunctionProto *outer = local_function(mb, "Outer", {"x"}, {"y"});
  body_node(outer, "MeanVarianceNormalization", {"x"}, {"t"});
  onnx::NodeProto *call = body_node(outer, "ScaledClip", {"t"}, {"y"}, "com.x");
  test::set_float(*call, "alpha", 3.0f);
  mb.input("x", kF32, {2, 3, 4, 4});
  mb.node("Outer", {"x"}, {"y"}, "out", "com.x");
  mb.output("y", 4);
  Graph g = import(mb, "local");
  EXPECT_TRUE(has_op(g, "out/MeanVarianceNormalization_0/ReduceMean_2")) << print_graph(g);
  EXPECT_TRUE(has_op(g, "out/ScaledClip_1/Mul_1")) << print_graph(g);
  EXPECT_TRUE(has_op(g, "out/ScaledClip_1/Clip_2")) << print_graph(g);
  // The constant the attribute fed is 3 (its value reaches the IR as a constant tensor).
  EXPECT_HAS(print_graph(g), "3");
}

TEST(FunctionOps, UnexpandableBodiesAreListedWithWhy) {
  ModelBuilder mb(15);
  mb.add_opset("com.x", 1);
  onnx::FunctionProto *loopy = local_function(mb, "Loopy", {"x"}, {"y"});
  body_node(loopy, "Loopy", {"x"}, {"y"}, "com.x");
  body_node(local_function(mb, "NeedsUnique", {"x"}, {"y"}), "Unique", {"x"}, {"y"});
  mb.input("x", kF32, {2, 3});
  mb.node("NeedsUnique", {"x"}, {"b"}, "wrap", "com.x");  // body built, needs Unique
  mb.node("Relu", {"x"}, {"r"}, "relu");
  mb.node("Bernoulli", {"r"}, {"b2"}, "coin2");     // input type not declared: body not built
  mb.node("Unique", {"x"}, {"c"}, "unique");         // no body at all
  mb.node("Loopy", {"x"}, {"l"}, "loopy", "com.x");  // recursive
  mb.node("Sum", {"b", "b2", "c", "l"}, {"y"});
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "unexpandable");
  EXPECT_EQ(code, 2);
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_HAS(msg, "4 unsupported nodes");
  EXPECT_HAS(msg, "\"wrap\" (NeedsUnique, com.x, opset 1; its function body needs Unique)");
  EXPECT_HAS(msg, "\"coin2\" (Bernoulli, ai.onnx, opset 15; its function body depends on input types the model "
                  "does not declare)");
  EXPECT_HAS(msg, "\"unique\" (Unique, ai.onnx, opset 15)");
  EXPECT_HAS(msg, "\"loopy\" (Loopy, com.x, opset 1; its function bodies nest deeper than 8)");
}

TEST(FunctionOps, ExponentialNestingIsCutOff) {
  // W0 calls W1 16 times, ..., W7 calls Relu 16 times: 16^8 nodes, within the depth limit.
  ModelBuilder mb(13);
  mb.add_opset("com.x", 1);
  for (int level = 0; level < 8; ++level) {
    onnx::FunctionProto *f = local_function(mb, "W" + std::to_string(level), {"x0"}, {"x16"});
    for (int i = 0; i < 16; ++i)
      body_node(f, level == 7 ? "Relu" : "W" + std::to_string(level + 1), {"x" + std::to_string(i)},
                {"x" + std::to_string(i + 1)}, level == 7 ? "" : "com.x");
  }
  mb.input("x", kF32, {2, 3});
  mb.node("W0", {"x"}, {"y"}, "wide", "com.x");
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "wide");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "\"wide\" (W0, com.x, opset 1; its function bodies expand to more than 100000 nodes)");
}

TEST(FunctionOps, BodyForAnotherMeaningOfAnOpIsNotExpanded) {
  // A body written for ai.onnx opset 11 whose ReduceSum takes axes as an attribute, in an opset-13 model where
  // ReduceSum takes them as an input.
  ModelBuilder mb(13);
  mb.add_opset("com.x", 1);
  onnx::FunctionProto *f = local_function(mb, "SumRows", {"x"}, {"y"});
  f->mutable_opset_import(0)->set_version(11);
  test::set_ints(*body_node(f, "ReduceSum", {"x"}, {"s"}), "axes", {1});
  body_node(f, "Clip", {"s"}, {"c"});
  body_node(f, "Clip", {"c"}, {"y"});
  mb.input("x", kF32, {2, 3});
  mb.node("SumRows", {"x"}, {"y"}, "rows", "com.x");
  mb.output("y", 2);
  auto [msg, code] = import_error(mb, "opset11_body");
  EXPECT_EQ(code, 2);
  // One note for the body's opset, each op once.
  EXPECT_HAS(msg, "\"rows\" (SumRows, com.x, opset 1; its function body uses ReduceSum-11, Clip-11 (ai.onnx opset "
                  "11), not ReduceSum-13, Clip-13 of the model's opset 13)");
}

}  // namespace
}  // namespace cleave
