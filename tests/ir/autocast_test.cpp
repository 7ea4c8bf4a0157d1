// --precision bf16 and fp16 (ir/autocast.h): where the pass rounds, on hand-written forward graphs. Their numbers are
// checked against torch by tests/e2e/bf16_vs_autocast.py and tests/e2e/fp16_loss_scaling.py; these tests pin the
// placement rules one by one.
#include "ir/autocast.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/verifier.h"

namespace cleave {
namespace {

/** IR text declaring a Linear's tensors on 3 dims as torch exports it (MatMul x·w into m, then Add of the bias into
 *  a); the tests add its ops, in the operand order they check. */
const std::string kLinearTensors = R"(tensor x f32[2,4,3] input
tensor w f32[3,5] param
tensor bias f32[5] param
tensor m f32[2,4,5] activation
tensor a f32[2,4,5] activation
)";

/** The tensors rounding ops of `kind` read, by name. */
std::set<std::string> rounded_inputs(const Graph &g, OpKind kind = OpKind::RoundToBf16) {
  std::set<std::string> out;
  for (const Op &op : g.ops())
    if (op.kind == kind) out.insert(g.tensor(op.input(0)).name);
  return out;
}

/** A Gemm, then Relu, a Mul by a constant, Exp, an Add of a float32 parameter and the loss. */
const std::string kGemmChain = R"(graph mlp
tensor x f32[4,3] input
tensor y i64[4] label
tensor w f32[2,3] param
tensor b f32[2] param
tensor h f32[4,2] activation
tensor r f32[4,2] activation
tensor s f32[4,2] activation
tensor half f32[] constant = [0.5]
tensor t f32[4,2] activation
tensor other f32[4,2] param
tensor u f32[4,2] activation
tensor loss f32[] activation
op fc Gemm forward (x, w, b) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
op act Relu forward (h) -> (r)
op scale Mul forward (r, half) -> (s)
op exp Exp forward (s) -> (t)
op mix Add forward (t, other) -> (u)
op sce SoftmaxCrossEntropyLoss forward (u, y, _) -> (loss, _) {reduction="mean"}
output loss
)";

TEST(Autocast, GemmOperandsAndResultRoundPromotionStaysFloat32) {
  Graph g = parse_graph(kGemmChain);
  EXPECT_EQ(autocast(g, DType::bf16), 5);
  verify(g);
  // x, w and b are read rounded; the GEMM's result is rounded (h.f32 is the raw one); Relu keeps bfloat16 values;
  // Mul by a one-element constant stays bfloat16 but feeds Exp alone (a pointwise chain: one rounding, after Exp);
  // Add with a float32 tensor of several elements promotes: no rounding after it, nor in the loss.
  EXPECT_EQ(rounded_inputs(g), (std::set<std::string>{"x", "w", "b", "h.f32", "t.f32"}));
  const Op &fc = g.op(*g.find_op("fc"));
  EXPECT_EQ(g.tensor(fc.input(1)).name, "w.bf16");
  EXPECT_EQ(g.tensor(fc.output(0)).name, "h.f32");
  // Graph outputs and every consumer still see the original tensors.
  EXPECT_EQ(g.tensor(g.outputs[0]).name, "loss");
  EXPECT_EQ(g.tensor(g.op(*g.find_op("act")).input(0)).name, "h");
}

/** The same graph under fp16 (CUDA's lists): Exp is on the fp32 list, so the Mul before it ends a float16 value and
 *  rounds, and Exp's result is float32 (not rounded); the rounding ops are RoundToFp16. */
TEST(Autocast, Fp16UsesCudasFloat32List) {
  Graph g = parse_graph(kGemmChain);
  EXPECT_EQ(autocast(g, DType::f16), 5);
  verify(g);
  EXPECT_EQ(rounded_inputs(g, OpKind::RoundToFp16), (std::set<std::string>{"x", "w", "b", "h.f32", "s.f32"}));
  EXPECT_TRUE(rounded_inputs(g, OpKind::RoundToBf16).empty());
}

/** LayerNormalization (and the ReduceSum after it) give their input's type under bf16 (CPU autocast) but float32 under
 *  fp16 (CUDA's fp32 lists): their results are rounded only under bf16. */
TEST(Autocast, LayerNormIsFloat32UnderFp16Only) {
  const std::string text = R"(graph ln
tensor x f32[4,3] input
tensor w f32[3,3] param
tensor scale f32[3] param
tensor bias f32[3] param
tensor h f32[4,3] activation
tensor n f32[4,3] activation
tensor loss f32[] activation
op fc MatMul forward (x, w) -> (h)
op ln LayerNormalization forward (h, scale, bias) -> (n, _, _) {axis=-1, epsilon=1e-05}
op sum ReduceSum forward (n) -> (loss) {keepdims=0}
output loss
)";
  Graph bf = parse_graph(text), fp = parse_graph(text);
  autocast(bf, DType::bf16);
  autocast(fp, DType::f16);
  // (ReduceSum too: bfloat16 on CPUs, on CUDA's fp32 list.)
  EXPECT_EQ(rounded_inputs(bf), (std::set<std::string>{"x", "w", "h.f32", "n.f32", "loss.f32"}));
  EXPECT_EQ(rounded_inputs(fp, OpKind::RoundToFp16), (std::set<std::string>{"x", "w", "h.f32"}));
}

/** Tan (with Asin, Acos, Sinh and Cosh) is on CUDA's fp32 list, Sin on none: under fp16 Sin's result is float16 and
 *  rounds, Tan's is float32, and their product promotes. CPU autocast lists neither: under bf16 both round. */
TEST(Autocast, TanIsFloat32UnderFp16SinFollowsItsInput) {
  const std::string text = R"(graph trig
tensor x f32[4,3] input
tensor w f32[3,3] param
tensor h f32[4,3] activation
tensor s f32[4,3] activation
tensor t f32[4,3] activation
tensor p f32[4,3] activation
tensor loss f32[] activation
op fc MatMul forward (x, w) -> (h)
op sin Sin forward (h) -> (s)
op tan Tan forward (h) -> (t)
op mul Mul forward (s, t) -> (p)
op sum ReduceSum forward (p) -> (loss) {axes=[0,1], keepdims=0}
output loss
)";
  Graph bf = parse_graph(text), fp = parse_graph(text);
  autocast(bf, DType::bf16);
  autocast(fp, DType::f16);
  verify(bf);
  verify(fp);
  EXPECT_EQ(rounded_inputs(bf), (std::set<std::string>{"x", "w", "h.f32", "s.f32", "t.f32", "p.f32", "loss.f32"}));
  EXPECT_EQ(rounded_inputs(fp, OpKind::RoundToFp16), (std::set<std::string>{"x", "w", "h.f32", "s.f32"}));
}

TEST(Autocast, LinearBiasAddRoundsOnceNormsFollowTheirInput) {
  Graph g = parse_graph("graph seq\n" + kLinearTensors + R"(tensor scale f32[5] param
tensor shift f32[5] param
tensor n f32[2,4,5] activation
tensor mean f32[2,4,1] activation
tensor invstd f32[2,4,1] activation
op proj MatMul forward (x, w) -> (m)
op bias_add Add forward (bias, m) -> (a)
op norm LayerNormalization forward (a, scale, shift) -> (n, mean, invstd) {axis=2, epsilon=1e-05}
output n
)");
  autocast(g, DType::bf16);
  verify(g);
  // torch's Linear on 3 dims: MatMul + Add of the bias, one bfloat16 op: the product is not rounded, the bias and
  // the sum are. LayerNorm of a bfloat16 input gives bfloat16; its statistics stay float32.
  EXPECT_EQ(rounded_inputs(g), (std::set<std::string>{"x", "w", "bias", "a.f32", "n.f32"}));
}

TEST(Autocast, KeepsAssignsAndRoundsALinearFeedingPointwiseOps) {
  // BatchNorm's running-statistics updates are assigns of the forward graph (the importer writes them): they must
  // survive the rebuild. A Linear's bias add read by Tanh alone still rounds (torch rounds F.linear's result).
  Graph g = parse_graph("graph bn\n" + kLinearTensors + R"(tensor t f32[2,4,5] activation
tensor running f32[5] param
tensor next f32[5] activation
op proj MatMul forward (x, w) -> (m)
op bias_add Add forward (m, bias) -> (a)
op act Tanh forward (a) -> (t)
op stat ReduceMean forward (t) -> (next) {axes=[0,1], keepdims=0}
output t
assign running <- next
)");
  autocast(g, DType::bf16);
  verify(g);
  ASSERT_EQ(g.assigns.size(), 1u);
  EXPECT_EQ(g.tensor(g.assigns[0].dst).name, "running");
  EXPECT_EQ(g.tensor(g.assigns[0].src).name, "next");
  EXPECT_EQ(rounded_inputs(g), (std::set<std::string>{"x", "w", "bias", "a.f32", "t.f32", "next.f32"}));
}

TEST(Autocast, DropoutThatKeepsEveryElementNeedsNoRounding) {
  Graph g = parse_graph(R"(graph d
tensor x f32[4,3] input
tensor w f32[2,3] param
tensor b f32[2] param
tensor h f32[4,2] activation
tensor d f32[4,2] activation
tensor m bool[4,2] activation
tensor d2 f32[4,2] activation
tensor m2 bool[4,2] activation
op fc Gemm forward (x, w, b) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
op keep Dropout forward (h) -> (d, m) {ratio=0.0, seed=1, training_mode=1}
op drop Dropout forward (d) -> (d2, m2) {ratio=0.5, seed=2, training_mode=1}
output d2
)");
  autocast(g, DType::bf16);
  verify(g);
  // Ratio 0 passes the rounded h on as it is; ratio 0.5 scales by 2, in bfloat16 as torch does, so it rounds.
  EXPECT_EQ(rounded_inputs(g), (std::set<std::string>{"x", "w", "b", "h.f32", "d2.f32"}));
  std::vector<DType> exact = exact_low_types(g);
  EXPECT_EQ(exact[static_cast<size_t>(*g.find_tensor("d"))], DType::bf16);
}

TEST(Autocast, RefusesTrainingGraphs) {
  Graph g = parse_graph(R"(graph t
tensor x f32[2] input
tensor y f32[2] activation
tensor dy f32[2] activation
tensor dx f32[2] activation
op id Identity forward (x) -> (y)
op id.grad Identity backward (dy) -> (dx)
output y
)");
  EXPECT_THROW(autocast(g, DType::bf16), std::exception);
}

/** A graph after autocast and autodiff, as exact_low_types meets it: rounding ops, ops that move or select their
 *  values, and ops that make new values. */
const std::string kExactValues = R"(graph exact
tensor x f32[4,3] input
tensor w f32[3,2] param
tensor cond bool[4,2] input
tensor xr f32[4,3] activation
tensor wr f32[3,2] activation
tensor h f32[4,2] activation
tensor hr f32[4,2] activation
tensor relu_h f32[4,2] activation
tensor relu_hr f32[4,2] activation
tensor t f32[2,4] activation
tensor pad_half f32[4,4] activation
tensor pad_tenth f32[4,4] activation
tensor relu6 f32[4,2] activation
tensor clip_tenth f32[4,2] activation
tensor sum f32[4,2] activation
tensor picked f32[4,2] activation
tensor picked_h f32[4,2] activation
tensor wf f32[3,2] activation
tensor both f32[6,2] activation
tensor pad_fp16_max f32[3,4] activation
tensor pad_fp16_over f32[3,4] activation
tensor pad_fp16_tiny f32[3,4] activation
tensor dy f32[4,2] activation
tensor dh f32[4,2] activation
op x.to_bf16 RoundToBf16 forward (x) -> (xr)
op w.to_bf16 RoundToBf16 forward (w) -> (wr)
op mm MatMul forward (xr, wr) -> (h)
op mm.bf16 RoundToBf16 forward (h) -> (hr)
op relu_h Relu forward (h) -> (relu_h)
op relu_hr Relu forward (hr) -> (relu_hr)
op t Transpose forward (relu_hr) -> (t) {perm=[1,0]}
op pad_half Pad forward (relu_hr) -> (pad_half) {pads=[0,0,0,2], value=0.5}
op pad_tenth Pad forward (relu_hr) -> (pad_tenth) {pads=[0,0,0,2], value=0.1}
op relu6 Clip forward (relu_hr) -> (relu6) {min=0.0, max=6.0}
op clip_tenth Clip forward (relu_hr) -> (clip_tenth) {max=0.1}
op sum Add forward (relu_hr, hr) -> (sum)
op picked Where forward (cond, relu_hr, hr) -> (picked)
op picked_h Where forward (cond, relu_hr, h) -> (picked_h)
op w.to_fp16 RoundToFp16 forward (w) -> (wf)
op both Concat forward (wr, wf) -> (both) {axis=0}
op pad_fp16_max Pad forward (wf) -> (pad_fp16_max) {pads=[0,0,0,2], value=65504.0}
op pad_fp16_over Pad forward (wf) -> (pad_fp16_over) {pads=[0,0,0,2], value=65536.0}
op pad_fp16_tiny Pad forward (wf) -> (pad_fp16_tiny) {pads=[0,0,0,2], value=5.9604644775390625e-08}
op dy RoundToBf16 backward (sum) -> (dy)
op dh ReluGrad backward (dy, h) -> (dh)
output both
)";

TEST(Autocast, ExactLowTypesFollowRoundedValuesThroughMovesAndSelections) {
  Graph g = parse_graph(kExactValues);
  verify(g);
  std::vector<DType> exact = exact_low_types(g);
  auto type = [&](const std::string &name) { return exact[static_cast<size_t>(*g.find_tensor(name))]; };
  // Rounded, and moved, selected or zeroed after rounding (ReluGrad's values are dY's; h is only its mask).
  for (const char *name : {"xr", "wr", "hr", "relu_hr", "t", "pad_half", "relu6", "picked", "dy", "dh"})
    EXPECT_EQ(type(name), DType::bf16) << name;
  for (const char *name : {"wf", "pad_fp16_max", "pad_fp16_tiny"}) EXPECT_EQ(type(name), DType::f16) << name;
  // Never rounded, new values (a sum; constants 0.1 and 65536 are not values of the type), or two types mixed.
  for (const char *name : {"x", "w", "h", "relu_h", "pad_tenth", "clip_tenth", "sum", "picked_h", "both",
                           "pad_fp16_over", "cond"})
    EXPECT_EQ(type(name), DType::f32) << name;
}

}  // namespace
}  // namespace cleave
