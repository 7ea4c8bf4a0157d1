// The IR text form: print(parse(x)) == x, and parse errors name the line and the problem.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"

namespace cleave {
namespace {

// A small training graph written by hand: odd names (quoted), constants of every dtype, float attributes that need
// their shortest round-trip form, an absent operand, a backward op with a group, and assigns.
const char *kText = R"(graph "tiny model"
tensor x f32[4,3] input
tensor y i64[4] label
tensor fc.weight f32[2,3] param
tensor fc.bias f32[2] param
tensor "onnx::Gemm weird \"name\"" f32[4,2] activation
tensor half f32[] constant = [0.1]
tensor d f64[2] constant = [0.30000000000000004,-1e-300]
tensor idx i64[3] constant = [-9223372036854775807,0,5]
tensor mask bool[2] constant = [1,0]
tensor scaled f32[4,2] activation
tensor loss f32[] activation
tensor log_prob f32[4,2] activation
tensor loss.grad f32[] constant = [1.0]
tensor scaled.grad f32[4,2] grad
op Gemm_0 Gemm forward (x, fc.weight, fc.bias) -> ("onnx::Gemm weird \"name\"") {alpha=1.0, beta=1.0, transA=0, transB=1}
op Mul_1 Mul forward ("onnx::Gemm weird \"name\"", half) -> (scaled)
op sce SoftmaxCrossEntropyLoss forward (scaled, y, _) -> (loss, log_prob) {reduction="mean"}
op sce.grad SoftmaxCrossEntropyLossGrad backward group=sce (loss.grad, log_prob, y, _) -> (scaled.grad) {reduction="mean"}
output loss
loss loss
)";

TEST(IrText, RoundTripIsExact) {
  Graph g = parse_graph(kText);
  EXPECT_EQ(print_graph(g), kText);
  Graph again = parse_graph(print_graph(g));
  EXPECT_EQ(print_graph(again), kText);
}

// Constants of the narrow types print their exact values and read back to the same bytes: halves and bfloat16 in
// float's shortest round-trip form, u64 above 2^63 unsigned.
TEST(IrText, NarrowDTypesRoundTrip) {
  const char *text = R"(graph narrow
tensor h f16[4] constant = [1.0,-65504.0,5.9604645e-08,0.099975586]
tensor b bf16[2] constant = [1.0078125,-3.3895314e+38]
tensor i8 i8[2] constant = [-128,127]
tensor i16 i16[2] constant = [-32768,32767]
tensor u8 u8[2] constant = [0,255]
tensor u16 u16[1] constant = [65535]
tensor u32 u32[1] constant = [4294967295]
tensor u64 u64[2] constant = [18446744073709551615,1]
tensor y f16[4] activation
op Cast_0 Cast forward (u8) -> (y) {to="f16"}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_EQ(g.tensor(*g.find_tensor("h")).data.size(), 8u);
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("h")))[2], std::ldexp(1.0, -24));
  EXPECT_EQ(data_as_ints(g.tensor(*g.find_tensor("u64")))[0], -1);  // all bits set
}

TEST(IrText, ParsesStructure) {
  Graph g = parse_graph(kText);
  EXPECT_EQ(g.name, "tiny model");
  ASSERT_EQ(g.num_ops(), 4);
  const Op &grad = g.op(3);
  EXPECT_EQ(grad.kind, OpKind::SoftmaxCrossEntropyLossGrad);
  EXPECT_EQ(grad.phase, Phase::backward);
  EXPECT_EQ(grad.group, 2);
  EXPECT_EQ(grad.inputs[3], kNoTensor);
  EXPECT_EQ(g.op(0).attr_float("alpha"), 1.0);
  EXPECT_EQ(g.op(0).attr_int("transB"), 1);
  EXPECT_EQ(g.op(2).attr_string("reduction"), "mean");
  const Tensor &idx = g.tensor(*g.find_tensor("idx"));
  EXPECT_EQ(data_as_ints(idx)[0], -9223372036854775807LL);
  const Tensor &d = g.tensor(*g.find_tensor("d"));
  EXPECT_EQ(data_as_doubles(d)[0], 0.1 + 0.2);
  EXPECT_EQ(data_as_doubles(g.tensor(*g.find_tensor("half")))[0], static_cast<double>(0.1f));
  EXPECT_EQ(g.tensor(*g.find_tensor("scaled")).producer, 1);
  EXPECT_EQ(g.loss, *g.find_tensor("loss"));
}

TEST(IrText, AttributeTypesRoundTrip) {
  Graph g;
  g.add_tensor("a", DType::f32, {2}, Role::input);
  g.add_tensor("b", DType::f32, {2}, Role::activation);
  Op op;
  op.name = "n";
  op.kind = OpKind::Identity;
  op.inputs = {0};
  op.outputs = {1};
  op.attrs = {{"i", int64_t{-3}}, {"f", 1e-5}, {"g", 3.0}, {"s", std::string("a\"b")},
              {"is", std::vector<int64_t>{1, -2}}, {"fs", std::vector<double>{0.5, 2.0, 1e20}}, {"e", std::vector<int64_t>{}}};
  g.add_op(op);
  std::string text = print_graph(g);
  EXPECT_NE(text.find("e=[], f=1e-05, fs=[0.5,2.0,1e+20], g=3.0, i=-3, is=[1,-2], s=\"a\\\"b\""), std::string::npos)
      << text;
  Graph back = parse_graph(text);
  EXPECT_EQ(back.op(0).attrs, g.op(0).attrs);
}

TEST(IrText, UnrollTagRoundTrips) {
  // The per-timestep ops of an unrolled recurrent node carry their scope and timestep; a backward op keeps its group.
  const char *text = R"(graph g
tensor x f32[2] input
tensor a f32[2] activation
tensor b f32[2] activation
tensor b.grad f32[2] grad
op /lstm/LSTM/t0/i Sigmoid forward unroll=/lstm/LSTM t=0 (x) -> (a)
op "my rnn/t1/i" Tanh forward unroll="my rnn" t=1 (a) -> (b)
op g1 SigmoidGrad backward group=/lstm/LSTM/t0/i (b, a) -> (b.grad)
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_EQ(g.op(0).unroll_scope, "/lstm/LSTM");
  EXPECT_EQ(g.op(0).unroll_step, 0);
  EXPECT_EQ(g.op(1).unroll_scope, "my rnn");
  EXPECT_EQ(g.op(1).unroll_step, 1);
  EXPECT_EQ(g.op(2).unroll_scope, "");
  EXPECT_EQ(g.op(2).unroll_step, -1);
  EXPECT_EQ(g.op(2).group, 0);
}

TEST(IrText, ZeroInitOptimizerStateRoundTrips) {
  // Optimizer state the training graph creates carries no bytes, only the mark that it starts at zero.
  const char *text = R"(graph g
tensor w f32[2,3] param
tensor w.velocity f32[2,3] optimizer_state zeros
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_TRUE(g.tensor(1).zero_init);
  EXPECT_TRUE(g.tensor(1).data.empty());
  EXPECT_FALSE(g.tensor(0).zero_init);
}

TEST(IrText, SampleAxisRoundTrips) {
  // A time-major input [T, B, F] and its labels [T, B]: the sample axis is printed where it is not dim 0.
  const char *text = R"(graph g
tensor x f32[5,4,3] input samples=1
tensor y i64[5,4] label samples=1
tensor z f32[4,3] input
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_EQ(g.tensor(0).sample_axis, 1);
  EXPECT_EQ(g.tensor(1).sample_axis, 1);
  EXPECT_EQ(g.tensor(2).sample_axis, 0);
  EXPECT_EQ(sample_shape(g.tensor(0)), (Shape{5, 3}));
}

TEST(IrText, LossScaleRoundTripsAndIsVerified) {
  // --precision fp16's training graph: the seed of the backward pass is the loss scale, optimizer state.
  const char *text = R"(graph g
tensor x f32[] input
tensor loss f32[] activation
tensor loss_scale f32[] optimizer_state
op l Relu forward (x) -> (loss)
loss loss
loss_scale loss_scale init=65536.0 growth_interval=2000
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(print_graph(g), text);
  EXPECT_EQ(g.loss_scaling.scale, 2);
  EXPECT_EQ(g.loss_scaling.growth_interval, 2000);
  EXPECT_EQ(data_as_doubles(g.tensor(2)), std::vector<double>{65536.0});
  EXPECT_TRUE(verify_problems(g).empty()) << verify_problems(g)[0];
  g.tensor(2).role = Role::constant;
  std::vector<std::string> problems = verify_problems(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("is not optimizer state"), std::string::npos) << problems[0];
}

void expect_parse_error(const std::string &text, const std::string &fragment) {
  try {
    parse_graph(text, "t.ir");
    FAIL() << "no error for:\n" << text;
  } catch (const UserError &e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(IrText, ErrorsNameLineAndProblem) {
  expect_parse_error("", "t.ir: empty IR text");
  expect_parse_error("tensor x f32[1] input\n", "t.ir:1: expected 'graph NAME'");
  expect_parse_error("graph g\ntensor x f33[1] input\n", "t.ir:2: unknown dtype 'f33'");
  expect_parse_error("graph g\ntensor x f32[1] inputt\n", "t.ir:2: unknown role 'inputt'");
  expect_parse_error("graph g\ntensor x f32[1] input\ntensor x f32[1] input\n", "t.ir:3: duplicate tensor \"x\"");
  expect_parse_error("graph g\ntensor x f32[1] input\nop a Relux forward (x) -> (x)\n", "t.ir:3: unknown op kind 'Relux'");
  expect_parse_error("graph g\ntensor x f32[1] input\nop a Relu forward (z) -> (x)\n", "t.ir:3: unknown tensor \"z\"");
  expect_parse_error("graph g\ntensor c f32[2] constant = [1.0]\n", "constant has 1 values, its shape needs 2");
  expect_parse_error("graph g\ntensor x f32[1] input\nop a Relu forward (x -> (x)\n", "t.ir:3: expected");
  expect_parse_error("graph g\ntensor x f32[1] input\nfoo\n", "t.ir:3: unknown keyword 'foo'");
  expect_parse_error("graph g\ntensor x f32[1] input \"unterminated\n", "unterminated string");
  expect_parse_error("graph g\ntensor x f32[1] input\ntensor y f32[1] activation\n"
                     "op a Relu backward group=zz (x) -> (y)\n",
                     "t.ir:4: unknown group op \"zz\"");
  expect_parse_error("graph g\ntensor x f32[1] input\ntensor y f32[1] activation\n"
                     "op a Relu forward unroll=r t=-1 (x) -> (y)\n",
                     "t.ir:4: bad timestep '-1'");
  expect_parse_error("graph g\ntensor x f32[1] input\ntensor y f32[1] activation\n"
                     "op a Relu forward unroll=r step=1 (x) -> (y)\n",
                     "t.ir:4: expected 't=' after the unroll scope");
  expect_parse_error("graph g\ntensor w f32[1] param zeros\n", "t.ir:2: only optimizer state starts as zeros");
  expect_parse_error("graph g\ntensor w f32[2,3] param samples=1\n", "t.ir:2: only inputs and labels have a sample axis");
  expect_parse_error("graph g\ntensor x f32[2,3] input samples=2\n", "t.ir:2: sample axis must be a dim of [2,3]");
  expect_parse_error("graph g\ntensor s f32[] optimizer_state\nloss_scale s init=8 growth_interval=0\n",
                     "t.ir:3: the growth interval must be a positive integer");
  expect_parse_error("graph g\ntensor s f32[] optimizer_state\nloss_scale s init=8 every=2\n",
                     "t.ir:3: expected growth_interval=N");
  expect_parse_error("graph g\ntensor s f32[] optimizer_state\nloss_scale s init=-1 growth_interval=2\n",
                     "t.ir:3: the first loss scale must be a positive float32 number");
}

// all_consumers() is consumers() of every tensor; an op reading one tensor twice is listed once.
TEST(IrGraph, AllConsumersIsConsumersOfEachTensor) {
  const std::string twice = R"(graph "twice"
tensor a f32[2] input
tensor b f32[2] activation
tensor c f32[2] activation
op m Mul forward (a, a) -> (b)
op n Add forward (b, a) -> (c)
output c
)";
  for (const std::string &text : {std::string(kText), twice}) {
    Graph g = parse_graph(text);
    std::vector<std::vector<OpId>> all = g.all_consumers();
    ASSERT_EQ(all.size(), static_cast<size_t>(g.num_tensors()));
    size_t listed = 0;
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      EXPECT_EQ(all[static_cast<size_t>(t)], g.consumers(t)) << g.tensor(t).name;
      listed += all[static_cast<size_t>(t)].size();
    }
    // kText: Gemm reads 3 tensors, Mul 2, the loss 2 and its gradient 3 (absent operands are no reads); twice: m
    // reads a (once), n reads b and a.
    EXPECT_EQ(listed, text == twice ? 3u : 10u);
  }
}

TEST(IrVerifier, AcceptsValidGraph) {
  Graph g = parse_graph(kText);
  EXPECT_EQ(verify_problems(g), std::vector<std::string>{});
}

TEST(IrVerifier, ReportsShapeMismatch) {
  std::string text = kText;
  text.replace(text.find("tensor scaled f32[4,2]"), 22, "tensor scaled f32[4,3]");
  Graph g = parse_graph(text);
  auto problems = verify_problems(g);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("op \"Mul_1\" (Mul)"), std::string::npos) << problems[0];
}

TEST(IrVerifier, ReportsOrderAndProducerProblems) {
  Graph g = parse_graph(
      "graph g\ntensor x f32[2] input\ntensor a f32[2] activation\ntensor b f32[2] activation\n"
      "tensor orphan f32[2] activation\n"
      "op r1 Relu forward (b) -> (a)\nop r2 Relu forward (x) -> (b)\nloss a\n");
  auto problems = verify_problems(g);
  std::string all;
  for (auto &p : problems) all += p + "\n";
  EXPECT_NE(all.find("input \"b\" is produced later, by op \"r2\""), std::string::npos) << all;
  EXPECT_NE(all.find("tensor \"orphan\" (activation) has no producer"), std::string::npos) << all;
  EXPECT_NE(all.find("a loss must be a scalar"), std::string::npos) << all;
  EXPECT_THROW(verify(g), UserError);
}

TEST(IrVerifier, RejectsOverflowingShape) {
  Graph g = parse_graph("graph g\ntensor x f32[4294967296,4294967296] input\n");
  auto problems = verify_problems(g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("overflows int64"), std::string::npos);
}

// A fuzzed IR text (tests/fuzz/regressions/ir/gemm_grad_float_transA.ir) reached an internal error: an attribute of
// the wrong type is the text's fault: a user error naming the op.
TEST(IrText, MistypedAttributesAreUserErrors) {
  const std::string head = "graph g\ntensor a f32[2,3] input\ntensor b f32[3,4] input\ntensor y f32[2,4] activation\n";
  auto error_of = [&](const std::string &op_line) {
    try {
      verify(parse_graph(head + op_line));
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of("op m Gemm forward (a, b) -> (y) {alpha=1.0, beta=1.0, transA=0.0, transB=0}\n"),
            "invalid IR: op \"m\" (Gemm) attribute transA is float, not int");
}

}  // namespace
}  // namespace cleave
