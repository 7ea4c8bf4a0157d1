// complete_plan: a hand-written plan may leave out produced tensors' lines; they are filled in from their producers'
// configs, and nothing else is (sources, ops and contradicting entries stay for plan_problems to report).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/verifier.h"
#include "planner/plan/plan.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

// x -> Gemm (bias c) -> h -> Softmax (axis 1) -> p -> Reshape [512] -> f.
const char *kGraph = R"(graph small
tensor x f32[16,64] input
tensor w f32[32,64] param
tensor c f32[32] param
tensor h f32[16,32] activation
tensor p f32[16,32] activation
tensor f f32[512] activation
op g Gemm forward (x, w, c) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
op s Softmax forward (h) -> (p) {axis=1}
op r Reshape forward (p) -> (f) {shape=[512]}
)";

Graph small_graph() {
  Graph g = parse_graph(kGraph);
  verify(g);
  return g;
}

std::string completed(const std::string &text) {
  Plan p = parse_plan(text);
  complete_plan(small_graph(), p);
  return print_plan(p);
}

TEST(CompletePlan, FillsProducedTensorsInIdOrder) {
  // Gemm split on n (column split of w): h split(1); Softmax and Reshape replicated. Only sources and ops given,
  // in an order that is not the IR's.
  std::string hand = "plan devices=2\n"
                     "tensor w devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor x devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor c devices=[0,1] mesh=[2] [split(0)]\n"
                     "op g devices=[0,1] mesh=[2] [n]\n"
                     "op s devices=[0,1] mesh=[2] [-]\n"
                     "op r devices=[1,0] mesh=[2] [i]\n";
  std::string want = "plan devices=2\n"
                     "tensor x devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor w devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor c devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor h devices=[0,1] mesh=[2] [split(1)]\n"
                     "tensor p devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor f devices=[1,0] mesh=[2] [split(0)]\n"
                     "op g devices=[0,1] mesh=[2] [n]\n"
                     "op s devices=[0,1] mesh=[2] [-]\n"
                     "op r devices=[1,0] mesh=[2] [i]\n";
  EXPECT_EQ(completed(hand), want);
  EXPECT_EQ(plan_problems(small_graph(), parse_plan(completed(hand))), std::vector<std::string>{});
  // A 2-D mesh gives one entry per axis.
  std::string red = "plan devices=4\n"
                    "tensor x devices=[0,1,2,3] mesh=[2,2] [split(0),replicate]\n"
                    "tensor w devices=[0,1,2,3] mesh=[2,2] [replicate,split(1)]\n"
                    "tensor c devices=[0,1,2,3] mesh=[2,2] [replicate,split(0)]\n"
                    "op g devices=[0,1,2,3] mesh=[2,2] [m,n]\n"
                    "op s devices=[0,1,2,3] mesh=[4] [i]\n"
                    "op r devices=[0,1,2,3] mesh=[4] [i]\n";
  std::string out = completed(red);
  EXPECT_NE(out.find("tensor h devices=[0,1,2,3] mesh=[2,2] [split(0),split(1)]\n"), std::string::npos) << out;
  EXPECT_NE(out.find("tensor p devices=[0,1,2,3] mesh=[4] [split(0)]\n"), std::string::npos) << out;
  EXPECT_EQ(plan_problems(small_graph(), parse_plan(out)), std::vector<std::string>{});
}

TEST(CompletePlan, CompletePlanIsUnchanged) {
  std::string full = "plan devices=2\n"
                     "tensor x devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor w devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor c devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor h devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor p devices=[0,1] mesh=[2] [split(0)]\n"
                     "tensor f devices=[0,1] mesh=[2] [split(0)]\n"
                     "op g devices=[0,1] mesh=[2] [m]\n"
                     "op s devices=[0,1] mesh=[2] [i]\n"
                     "op r devices=[0,1] mesh=[2] [i]\n";
  EXPECT_EQ(completed(full), full);
  // An entry given by hand is kept even where it contradicts its producer: the validator names it.
  std::string wrong = full;
  wrong.replace(wrong.find("tensor p devices=[0,1] mesh=[2] [split(0)]"), 42,
                "tensor p devices=[0,1] mesh=[2] [replicate]");
  std::string h_left_out = wrong;
  h_left_out.erase(h_left_out.find("tensor h "), std::string("tensor h devices=[0,1] mesh=[2] [split(0)]\n").size());
  EXPECT_EQ(plan_problems(small_graph(), parse_plan(completed(h_left_out))),
            std::vector<std::string>{"tensor \"p\": sharding devices=[0,1] mesh=[2] [replicate] is inconsistent with "
                                     "its producer op \"s\" (expected devices=[0,1] mesh=[2] [split(0)])"});
}

TEST(CompletePlan, LeavesWhatItCannotImply) {
  // A missing source, a missing op and an invalid config (Softmax's axis var j cannot be split) each leave their
  // tensors missing; plan_problems reports every one.
  std::string hand = "plan devices=2\n"
                     "tensor w devices=[0,1] mesh=[2] [replicate]\n"
                     "tensor c devices=[0,1] mesh=[2] [replicate]\n"
                     "op g devices=[0,1] mesh=[2] [m]\n"
                     "op s devices=[0,1] mesh=[2] [j]\n";
  std::vector<std::string> problems = plan_problems(small_graph(), parse_plan(completed(hand)));
  std::vector<std::string> want = {
      "missing entry for tensor \"x\"", "missing entry for tensor \"p\"", "missing entry for tensor \"f\"",
      "op \"s\": var \"j\" cannot be split: it is opaque in output Y", "missing entry for op \"r\""};
  EXPECT_EQ(problems, want);
}

}  // namespace
}  // namespace cleave::plan
