#pragma once
// --precision bf16: torch.autocast's mixed precision (dtype bfloat16, as torch 1.13 runs it on CPUs) written into a
// forward graph as RoundToBf16 ops, before autodiff, so that the backward pass, the planners and both backends get
// it from the graph alone. Values stay float32 in memory: what differs from an fp32 run is where they are rounded.
#include "ir/graph.h"

namespace cleave {

/** Rewrites forward graph `g` (no training ops yet) as torch.autocast(dtype=torch.bfloat16) computes it:
 *  - MatMul, Gemm, Conv and ConvTranspose (autocast's lower-precision list) read their float operands rounded to
 *    bfloat16 (weights and biases included: fp32 master weights, rounded where they are used) and give bfloat16;
 *  - an op whose float operands are bfloat16 (or one-element constants, which do not promote) gives bfloat16, as
 *    torch's kernels do on bfloat16 tensors; one with a float32 operand of several elements gives float32 (type
 *    promotion); BatchNormalization, LayerNormalization and InstanceNormalization give their input's type;
 *  - the classification losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) compute in float32 (autocast's
 *    fp32 list);
 *  and every bfloat16 result that an op may not already hold as a bfloat16 value is rounded by a RoundToBf16 op
 *  (`<tensor>.f32` is then the unrounded result): a Linear exported as MatMul + Add of a 1-d bias parameter is one
 *  GEMM (bias rounded, the sum rounded once, as torch's linear); no rounding inside chains of pointwise arithmetic
 *  (Add, Mul, Erf, ... each read by the next alone): those are the pieces of a function torch runs as one kernel
 *  (GELU exports as five ops) and rounds once, where the chain ends. The backward pass follows: RoundToBf16's
 *  gradient is the incoming gradient rounded, as the cast's backward is in torch. Returns the number of RoundToBf16
 *  ops added. */
int autocast_bf16(Graph &g);

}  // namespace cleave
