// Einsum's ellipsis and diagonals (frontend/translate_lowered.cpp): "..." stands for the dims no letter names,
// right-aligned across operands (the oracle: the same contraction spelled with letters); a letter repeated within an
// operand must name dims of one size (tests/e2e/einsum_vs_torch.py checks diagonals' values against torch).
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::import;
using test::kF32;
using test::ModelBuilder;

/** y = Einsum(equation)(x, w): x [2, 3, 4] is the graph input, w an initializer of `w_dims`; y has rank `y_rank`. */
ModelBuilder einsum_model(const std::string &equation, const std::vector<int64_t> &w_dims, int y_rank) {
  ModelBuilder mb(13);
  mb.input("x", kF32, {2, 3, 4});
  int64_t n = 1;
  for (int64_t d : w_dims) n *= d;
  mb.init_f("w", w_dims, test::random_floats(static_cast<size_t>(n), 7, 1.0f));
  test::set_string(mb.node("Einsum", {"x", "w"}, {"y"}, "/Einsum"), "equation", equation);
  mb.output("y", y_rank);
  return mb;
}

std::vector<double> run(const ModelBuilder &mb, const std::string &tag) {
  Graph g = import(mb, tag);
  return test::run_forward(g, "x", test::random_floats(24, 3, 1.0f), "y");
}

void expect_same(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
}

TEST(EinsumEllipsis, EquationsWithAnEllipsisEqualTheirLetterSpelling) {
  // batched: both operands carry the batch dim
  expect_same(run(einsum_model("...ij,...jk->...ik", {2, 4, 5}, 3), "ellipsis_batched"),
              run(einsum_model("bij,bjk->bik", {2, 4, 5}, 3), "letters_batched"));
  // right-aligned against an operand without one, output implicit (the ellipsis's dims first)
  expect_same(run(einsum_model("...j,jk", {4, 5}, 3), "ellipsis_implicit"),
              run(einsum_model("abj,jk->abk", {4, 5}, 3), "letters_implicit"));
  // summed away (ONNX's checker wants the same ellipsis rank in every operand that has one)
  expect_same(run(einsum_model("...j,...j->j", {2, 3, 4}, 1), "ellipsis_summed"),
              run(einsum_model("abj,abj->j", {2, 3, 4}, 1), "letters_summed"));
}

TEST(EinsumEllipsis, AnOperandWhoseLettersPassItsRankIsAnError) {
  auto [msg, code] = test::import_error(einsum_model("...abcd,jk->jk", {4, 5}, 2), "ellipsis_too_many");
  EXPECT_HAS(msg, "/Einsum");  // (ONNX's shape inference or ours: "does not fit its rank")
  EXPECT_NE(code, 0);
}

TEST(EinsumDiagonal, ARepeatedLetterOverDimsOfTwoSizesIsAnError) {
  auto [msg, code] = test::import_error(einsum_model("bii,jk->bi", {4, 5}, 2), "diagonal_sizes");
  EXPECT_HAS(msg, "node \"/Einsum\" (Einsum, opset 13): label 'i' repeats with sizes 3 and 4");
  EXPECT_EQ(code, 1);
}

}  // namespace
}  // namespace cleave
