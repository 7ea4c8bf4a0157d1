#pragma once
// torch's attention out-projection as its exporter writes it, for the frontend's and the planner's tests of
// frontend/interleaved_rows.h.
#include "tests/frontend/model_builder.h"

namespace cleave::test {

inline constexpr int64_t B = 2, T = 3, E = 4, F = 5;

/** x [B, T, E] -> (Transpose to [T, B, E] when `time_major`) -> Reshape [T*B, E] -> Gemm(W [F, E], transB, bias) ->
 *  Reshape [T, B, F] (or [B, T, F]) -> y, named as torch names its out-projection. `gemm_out` also outputs the Gemm's
 *  result, which leaves the chain to be imported node by node. `loss`: the model's output is ReduceMean(y) instead
 *  of y, a loss to train. `out_shape`: the last Reshape's shape instead of [T, B, -1] (or [B, T, -1]). */
inline ModelBuilder out_projection(bool time_major, bool gemm_out, bool loss = false,
                                   const std::vector<int64_t> &out_shape = {}) {
  ModelBuilder mb(14);
  mb.input("x", kF32, {B, T, E});
  mb.init_f("out_proj.weight", {F, E}, random_floats(F * E, 1, 1.0f));
  mb.init_f("out_proj.bias", {F}, random_floats(F, 2, 1.0f));
  mb.init_i64("rows_shape", {2}, {T * B, E});
  std::vector<int64_t> shape = out_shape;
  if (shape.empty()) shape = {time_major ? T : B, time_major ? B : T, -1};
  mb.init_i64("out_shape", {static_cast<int64_t>(shape.size())}, shape);
  std::string x = "x";
  if (time_major) {
    set_ints(mb.node("Transpose", {"x"}, {"xt"}, "/attn/Transpose"), "perm", {1, 0, 2});
    x = "xt";
  }
  mb.node("Reshape", {x, "rows_shape"}, {"rows"}, "/attn/Reshape_3");
  set_int(mb.node("Gemm", {"rows", "out_proj.weight", "out_proj.bias"}, {"proj"}, "/attn/Gemm"), "transB", 1);
  mb.node("Reshape", {"proj", "out_shape"}, {"y"}, "/attn/Reshape_4");
  if (loss) {
    set_int(mb.node("ReduceMean", {"y"}, {"loss"}, "/ReduceMean"), "keepdims", 0);
    mb.output("loss", 0);
  } else {
    mb.output("y", static_cast<int>(shape.size()));
  }
  if (gemm_out) mb.output("proj", 2);
  return mb;
}

}  // namespace cleave::test
