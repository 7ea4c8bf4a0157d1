#pragma once
// --precision bf16 and fp16: torch.autocast's mixed precision written into a forward graph as rounding ops
// (RoundToBf16, RoundToFp16), before autodiff, so that the backward pass, the planners and both backends get it from
// the graph alone. Values stay float32 in memory: what differs from an fp32 run is where they are rounded.
//   bf16 follows torch.autocast(device_type="cpu", dtype=torch.bfloat16) as torch 1.13 runs it on CPUs;
//   fp16 follows torch.autocast(device_type="cuda", dtype=torch.float16), whose op lists differ (below).
#include <vector>

#include "ir/graph.h"

namespace cleave {

/** Rewrites forward graph `g` (no training ops yet) as torch.autocast with dtype `low` (DType::bf16 or DType::f16)
 *  computes it:
 *  - MatMul, Gemm, Conv and ConvTranspose (autocast's lower-precision list; for fp16 also PRelu) read their float
 *    operands rounded to `low` (weights and biases included: fp32 master weights, rounded where they are used) and
 *    give `low`;
 *  - an op whose float operands are `low` (or one-element constants, which do not promote) gives `low`, as torch's
 *    kernels do on such tensors; one with a float32 operand of several elements gives float32 (type promotion);
 *    BatchNormalization and InstanceNormalization (and for bf16 LayerNormalization) give their input's type;
 *  - autocast's fp32 list computes in float32 and gives float32: the classification losses (SoftmaxCrossEntropyLoss,
 *    NegativeLogLikelihoodLoss) for both; for fp16 also Exp, Log, Pow, Reciprocal, Softplus, Tan, Asin, Acos, Sinh,
 *    Cosh, LayerNormalization, Softmax, LogSoftmax, ReduceSum and CumSum (CUDA's fp32 and fp32_set_opt_dtype lists;
 *    Sin, Cos, Atan, Asinh, Acosh and Atanh are on none, so they follow their input, as all eleven trigonometric and
 *    hyperbolic functions do for bf16). Not torch's: GroupNorm, exported as InstanceNormalization between Reshapes,
 *    follows its input here, where CUDA autocast computes group_norm in float32 (the graph no longer says it was a
 *    GroupNorm);
 *  and every `low` result that an op may not already hold as a `low` value is rounded by a rounding op
 *  (`<tensor>.f32` is then the unrounded result): a Linear exported as MatMul + Add of a 1-d bias parameter is one
 *  GEMM (bias rounded, the sum rounded once, as torch's linear); no rounding inside chains of pointwise arithmetic
 *  (Add, Mul, Erf, ... each read by the next alone): those are the pieces of a function torch runs as one kernel
 *  (a GELU the importer could not fuse into one Gelu op is five) and rounds once, where the chain ends; a Dropout
 *  that keeps every element (ratio 0, or not training) passes a rounded input on as it is. The backward pass follows: a rounding op's
 *  gradient is the incoming gradient rounded, as the cast's backward is in torch. Returns the number of rounding
 *  ops added. */
int autocast(Graph &g, DType low);

/** Per tensor of `g`: the type (DType::bf16 or DType::f16) whose values it is known to hold exactly, else DType::f32.
 *  Such tensors are the results of RoundToBf16 / RoundToFp16 and of ops that only move, select or zero the values of
 *  such tensors (Reshape, Transpose, Slice and its gradient, Concat, Relu and its gradient, MaxPool, Gather, ...).
 *  A GEMM or convolution whose two multiplied operands both hold one such type's values loses nothing when it
 *  multiplies in that type and accumulates in float32, as torch.autocast's kernels do; codegen tells the runtime so
 *  (rt::Operands), and the CUDA backend then uses bf16 or fp16 tensor cores. */
std::vector<DType> exact_low_types(const Graph &g);

}  // namespace cleave
