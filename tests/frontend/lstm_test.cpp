// LSTM import (frontend/translate_rnn.cpp): the unrolled ops carry their node and timestep and round-trip through the
// IR text; sequence_lens behaves like running each row on its own prefix; unsupported features are listed with exit
// code 2 and bad shapes/attributes name the node. Numerics against independent references are in the ONNX
// conformance tests (test_lstm_*) and tests/e2e/tiny_lstm.py (torch).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/tensor_data.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::import_error;
using test::ModelBuilder;

constexpr int64_t kB = 3, kI = 2, kH = 4;

/** An LSTM node "l" over X [seq, B, I] with fixed random W, R, B, initial states and peepholes; outputs Y, Y_h, Y_c. */
ModelBuilder lstm_model(int64_t seq, const std::vector<int32_t> *lens = nullptr) {
  ModelBuilder mb(14);
  mb.input("X", kF32, {seq, kB, kI});
  mb.init_f("W", {1, 4 * kH, kI}, test::random_floats(4 * kH * kI, 1, 0.8f));
  mb.init_f("R", {1, 4 * kH, kH}, test::random_floats(4 * kH * kH, 2, 0.8f));
  mb.init_f("B", {1, 8 * kH}, test::random_floats(8 * kH, 3, 0.8f));
  mb.init_f("h0", {1, kB, kH}, test::random_floats(kB * kH, 4, 0.8f));
  mb.init_f("c0", {1, kB, kH}, test::random_floats(kB * kH, 5, 0.8f));
  mb.init_f("P", {1, 3 * kH}, test::random_floats(3 * kH, 6, 0.8f));
  if (lens) {
    auto *t = mb.g().add_initializer();
    t->set_name("lens");
    t->set_data_type(onnx::TensorProto::INT32);
    t->add_dims(kB);
    for (int32_t l : *lens) t->add_int32_data(l);
  }
  auto &n = mb.node("LSTM", {"X", "W", "R", "B", lens ? "lens" : "", "h0", "c0", "P"}, {"Y", "Y_h", "Y_c"}, "l");
  test::set_int(n, "hidden_size", kH);
  mb.output("Y", 4);
  mb.output("Y_h", 3);
  mb.output("Y_c", 3);
  return mb;
}

/** Runs the graph on X; returns the values of Y, Y_h, Y_c. */
std::vector<std::vector<double>> run(const Graph &g, const std::vector<float> &x, const Shape &x_shape) {
  interp::Values values = interp::initial_values(g);
  values[static_cast<size_t>(*g.find_tensor("X"))] = interp::Value{DType::f32, x_shape, {x.begin(), x.end()}};
  interp::run_graph(g, values, interp::Context{});
  std::vector<std::vector<double>> out;
  for (const char *name : {"Y", "Y_h", "Y_c"}) out.push_back(values[static_cast<size_t>(*g.find_tensor(name))]->data);
  return out;
}

TEST(ImportLstm, UnrolledOpsAreTaggedAndRoundTrip) {
  Graph g = import(lstm_model(3), "lstm_tags");
  EXPECT_EQ(g.tensor(*g.find_tensor("Y")).shape, (Shape{3, 1, kB, kH}));
  EXPECT_EQ(g.tensor(*g.find_tensor("Y_h")).shape, (Shape{1, kB, kH}));
  std::vector<int> gemms(3, 0), tagged(3, 0);
  for (const Op &op : g.ops()) {
    if (op.unroll_scope.empty()) {
      EXPECT_EQ(op.unroll_step, -1) << op.name;
      EXPECT_EQ(op.name.find("/t"), std::string::npos) << "untagged per-step op " << op.name;
      continue;
    }
    EXPECT_EQ(op.unroll_scope, "l");
    ASSERT_GE(op.unroll_step, 0);
    ASSERT_LT(op.unroll_step, 3);
    EXPECT_EQ(op.name.rfind("l/t" + std::to_string(op.unroll_step) + "/", 0), 0u) << op.name;
    ++tagged[static_cast<size_t>(op.unroll_step)];
    if (op.kind == OpKind::Gemm) ++gemms[static_cast<size_t>(op.unroll_step)];
  }
  // Every step has the same ops (initial states given): x W^T, h R^T, and the rest.
  EXPECT_EQ(gemms, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(tagged[0], tagged[1]);
  EXPECT_EQ(tagged[1], tagged[2]);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("unroll=l t=2"), std::string::npos);
  EXPECT_EQ(print_graph(parse_graph(text)), text);
}

TEST(ImportLstm, SequenceLensMatchRunningEachRowOnItsPrefix) {
  // Row b with length L: Y[t < L] and the final states are those of the same LSTM run on X[:L] alone; Y[t >= L] = 0.
  const int64_t seq = 4;
  std::vector<int32_t> lens{4, 2, 1};
  std::vector<float> x = test::random_floats(seq * kB * kI, 7, 0.8f);
  auto masked = run(import(lstm_model(seq, &lens), "lstm_lens"), x, {seq, kB, kI});
  for (int64_t b = 0; b < kB; ++b) {
    int64_t len = lens[static_cast<size_t>(b)];
    std::vector<float> prefix(x.begin(), x.begin() + len * kB * kI);
    auto ref = run(import(lstm_model(len), "lstm_prefix"), prefix, {len, kB, kI});
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t h = 0; h < kH; ++h) {
        size_t at = static_cast<size_t>((t * kB + b) * kH + h);
        double want = t < len ? ref[0][at] : 0.0;
        EXPECT_NEAR(masked[0][at], want, 1e-6) << "Y[" << t << ", 0, " << b << ", " << h << "]";
      }
    for (size_t o = 1; o <= 2; ++o)
      for (int64_t h = 0; h < kH; ++h) {
        size_t at = static_cast<size_t>(b * kH + h);
        EXPECT_NEAR(masked[o][at], ref[o][at], 1e-6) << (o == 1 ? "Y_h" : "Y_c") << " row " << b;
      }
  }
}

TEST(ImportLstm, ReverseIsForwardOnTimeReversedInput) {
  const int64_t seq = 3;
  std::vector<float> x = test::random_floats(seq * kB * kI, 8, 0.8f), flipped;
  for (int64_t t = seq; t-- > 0;) flipped.insert(flipped.end(), x.begin() + t * kB * kI, x.begin() + (t + 1) * kB * kI);
  ModelBuilder rev = lstm_model(seq);
  test::set_string(*rev.g().mutable_node(0), "direction", "reverse");
  auto r = run(import(rev, "lstm_rev"), x, {seq, kB, kI});
  auto f = run(import(lstm_model(seq), "lstm_fwd"), flipped, {seq, kB, kI});
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < kB * kH; ++i)
      EXPECT_NEAR(r[0][static_cast<size_t>(t * kB * kH + i)], f[0][static_cast<size_t>((seq - 1 - t) * kB * kH + i)],
                  1e-6)
          << "Y[" << t << "]";
  for (size_t o = 1; o <= 2; ++o)
    for (size_t i = 0; i < r[o].size(); ++i) EXPECT_NEAR(r[o][i], f[o][i], 1e-6) << (o == 1 ? "Y_h" : "Y_c");
}

TEST(ImportLstm, UnsupportedFeaturesAreListedWithExitCode2) {
  ModelBuilder mb = lstm_model(2);
  auto &n = *mb.g().mutable_node(0);
  test::set_float(n, "clip", 3.0f);
  test::set_int(n, "input_forget", 1);
  auto [msg, code] = import_error(mb, "lstm_clip");
  EXPECT_EQ(code, 2);
  EXPECT_HAS(msg, "node \"l\" (LSTM, opset 14): attribute \"clip\", input_forget=1 is not supported");

  ModelBuilder act = lstm_model(2);
  auto *a = act.g().mutable_node(0)->add_attribute();
  a->set_name("activations");
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const char *s : {"Sigmoid", "LeakyRelu", "Tanh"}) a->add_strings(s);
  auto [amsg, acode] = import_error(act, "lstm_act");
  EXPECT_EQ(acode, 2);
  EXPECT_HAS(amsg, "node \"l\" (LSTM, opset 14): activation \"LeakyRelu\" (only Sigmoid, Tanh and Relu) is not supported");
}

TEST(ImportLstm, BadAttributesAndShapesNameTheNode) {
  ModelBuilder dir = lstm_model(2);
  test::set_string(*dir.g().mutable_node(0), "direction", "sideways");
  auto [dmsg, dcode] = import_error(dir, "lstm_dir");
  EXPECT_EQ(dcode, 1);
  EXPECT_HAS(dmsg, "node \"l\" (LSTM, opset 14): attribute \"direction\" must be forward, reverse or bidirectional");

  ModelBuilder hs = lstm_model(2);
  hs.g().mutable_node(0)->mutable_attribute(0)->set_i(5);  // hidden_size
  auto [hmsg, hcode] = import_error(hs, "lstm_hidden");
  EXPECT_EQ(hcode, 1);
  EXPECT_HAS(hmsg, "attribute \"hidden_size\" 5 does not match R's shape [1,16,4]");

  ModelBuilder lay = lstm_model(2);
  test::set_int(*lay.g().mutable_node(0), "layout", 2);
  auto [lmsg, lcode] = import_error(lay, "lstm_layout");
  EXPECT_EQ(lcode, 1);
  EXPECT_HAS(lmsg, "node \"l\" (LSTM, opset 14): attribute \"layout\" must be 0 or 1, got 2");

  std::vector<int32_t> lens{2, 3, 1};
  auto [smsg, scode] = import_error(lstm_model(2, &lens), "lstm_lens_range");
  EXPECT_EQ(scode, 1);
  EXPECT_HAS(smsg, "node \"l\" (LSTM, opset 14): sequence_lens holds 3, outside [0, 2]");
}

}  // namespace
}  // namespace cleave
