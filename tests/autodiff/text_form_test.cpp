// The training graph of a small model written as IR text: deterministic output and the expected backward structure.
#include <gtest/gtest.h>

#include "ir/autodiff/autodiff.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace cleave {
namespace {

const char *kMlp = R"(graph mlp
tensor x f32[4,5] input
tensor y i64[4] label
tensor fc1.weight f32[3,5] param
tensor fc1.bias f32[3] param
tensor fc2.weight f32[3,2] param
tensor h f32[4,3] activation
tensor r f32[4,3] activation
tensor logits f32[4,2] activation
tensor loss f32[] activation
op fc1 Gemm forward (x, fc1.weight, fc1.bias) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
op relu Relu forward (h) -> (r)
op fc2 MatMul forward (r, fc2.weight) -> (logits)
op ce SoftmaxCrossEntropyLoss forward (logits, y) -> (loss) {reduction="mean"}
output loss
)";

std::string train(const std::string &text, const std::string &optimizer) {
  Graph g = parse_graph(text);
  TrainOptions opts;
  opts.optimizer.kind = optimizer;
  build_training_graph(g, opts);
  verify(g);
  return print_graph(g);
}

TEST(TextForm, TrainingGraphIsDeterministicAndRoundTrips) {
  std::string text = kMlp;
  for (const char *opt : {"sgd", "momentum", "adam", "adamw"}) {
    SCOPED_TRACE(opt);
    std::string a = train(text, opt), b = train(text, opt);
    EXPECT_EQ(a, b);
    EXPECT_EQ(print_graph(parse_graph(a)), a);
    // Backward ops are tagged with their forward op and named after it.
    EXPECT_NE(a.find("op ce.grad SoftmaxCrossEntropyLossGrad backward group=ce "), std::string::npos) << a;
    EXPECT_NE(a.find("op relu.grad ReluGrad backward group=relu "), std::string::npos) << a;
    EXPECT_NE(a.find("op fc1.grad Gemm backward group=fc1 "), std::string::npos) << a;
    // x is an input, not a param: no gradient is built for it (fc1 needs only dW and dB: two ops).
    EXPECT_EQ(a.find("tensor x.grad"), std::string::npos) << a;
    EXPECT_EQ(a.find("op fc1.grad.2 "), std::string::npos) << a;
    // Every param's gradient is named after it.
    for (const char *p : {"fc1.weight", "fc1.bias", "fc2.weight"})
      EXPECT_NE(a.find(std::string("tensor ") + p + ".grad "), std::string::npos) << p;
    EXPECT_NE(a.find("loss loss"), std::string::npos) << a;
  }
}

}  // namespace
}  // namespace cleave
