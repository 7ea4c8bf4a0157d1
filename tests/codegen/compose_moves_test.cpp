// codegen/compose_moves.h: a copy reading another copy's result reads that copy's source through one composed view.
// Each case is checked element by element against the two copies done one after the other (explicit loops over the
// box and the permutation, not the pass's own arithmetic); that the bundles still equal `cleave eval` is checked end
// to end by fused_chain.py's attention block and run_matches_eval.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/compose_moves.h"

namespace cleave::codegen {
namespace {

/** The source index of every element a view reads, in row-major order of its shape. */
std::vector<int64_t> reads(const StridedView &v) {
  std::vector<int64_t> out;
  std::vector<int64_t> i(v.shape.size(), 0);
  for (int64_t n = num_elements(v.shape), k = 0; k < n; ++k) {
    int64_t at = v.offset;
    for (size_t d = 0; d < i.size(); ++d) at += i[d] * v.strides[d];
    out.push_back(at);
    for (size_t d = i.size(); d-- > 0;) {
      if (++i[d] < v.shape[d]) break;
      i[d] = 0;
    }
  }
  return out;
}

/** The index into a whole row-major buffer of in_shape of every element Move m copies, by loops over its output. */
std::vector<int64_t> box_reads(const Move &m) {
  size_t r = m.in_shape.size();
  Shape out(r);
  for (size_t d = 0; d < r; ++d) out[d] = m.extent[m.perm.empty() ? d : static_cast<size_t>(m.perm[d])];
  std::vector<int64_t> result, o(r, 0);
  for (int64_t n = num_elements(out), k = 0; k < n; ++k) {
    int64_t at = 0;
    for (size_t e = 0; e < r; ++e) {
      int64_t box_index = 0;
      for (size_t d = 0; d < r; ++d)
        if ((m.perm.empty() ? d : static_cast<size_t>(m.perm[d])) == e) box_index = o[d];
      at = at * m.in_shape[e] + m.start[e] + box_index;
    }
    result.push_back(at);
    for (size_t d = r; d-- > 0;) {
      if (++o[d] < out[d]) break;
      o[d] = 0;
    }
  }
  return result;
}

/** The two copies one after the other: b's reads of a's result, mapped through a's reads. */
std::vector<int64_t> in_two_passes(const StridedView &a, const Move &b) {
  std::vector<int64_t> first = reads(a), out;
  for (int64_t x : box_reads(b)) out.push_back(first[static_cast<size_t>(x)]);
  return out;
}

TEST(ComposeMoves, BoxThenTransposeReadsTheSourceOnce) {
  // Attention in miniature: k cut from a [T=4, B=3, 3E=36] projection (E = 12, H = 3 heads of d = 4), then
  // [T, B*H, d] -> [B*H, T, d] (q, v) or -> [B*H, d, T] (k).
  Move cut = box_move(0, 1, 4, {4, 3, 36}, {0, 0, 12}, {4, 3, 12});
  ASSERT_FALSE(cut.in_shape.empty());
  EXPECT_EQ(reads(cut.view), box_reads(cut));
  for (const std::vector<int64_t> &perm : {std::vector<int64_t>{1, 0, 2}, std::vector<int64_t>{1, 2, 0}}) {
    Move t = box_move(1, 2, 4, {4, 9, 4}, {0, 0, 0}, {4, 9, 4}, perm);
    std::optional<StridedView> v = compose_view(cut.view, t);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(reads(*v), in_two_passes(cut.view, t));
    EXPECT_EQ(v->shape.size(), 4u);  // B*H has no one stride in the projection: b and h stay apart
  }
}

TEST(ComposeMoves, TransposeThenBoxAndChains) {
  // A transpose read again as a box of a reshape of it: the box falls on whole factors.
  Move t = box_move(0, 1, 4, {2, 6, 5}, {0, 0, 0}, {2, 6, 5}, {2, 0, 1});  // -> [5, 2, 6]
  Move cut = box_move(1, 2, 4, {5, 12}, {1, 0}, {3, 12});
  std::optional<StridedView> v = compose_view(t.view, cut);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(reads(*v), in_two_passes(t.view, cut));
  // The composed view read once more, permuted.
  Move again = box_move(2, 3, 4, {3, 2, 6}, {0, 0, 0}, {3, 2, 6}, {2, 1, 0});
  std::optional<StridedView> w = compose_view(*v, again);
  ASSERT_TRUE(w.has_value());
  std::vector<int64_t> first = reads(*v), expected;
  for (int64_t x : box_reads(again)) expected.push_back(first[static_cast<size_t>(x)]);
  EXPECT_EQ(reads(*w), expected);
}

TEST(ComposeMoves, RefusesWhatNoViewExpresses) {
  // A transposed [6, 4] read as [4, 6]: 6 and 4 share no factor that splits both.
  Move t = box_move(0, 1, 4, {4, 6}, {0, 0}, {4, 6}, {1, 0});
  EXPECT_FALSE(compose_view(t.view, box_move(1, 2, 4, {4, 6}, {0, 0}, {4, 6}, {1, 0})).has_value());
  // A box cutting a dim made of two factors with different strides: rows 1..2 of a transposed [2, 3, 2] read as
  // [6, 2].
  Move u = box_move(0, 1, 4, {3, 2, 2}, {0, 0, 0}, {3, 2, 2}, {1, 0, 2});  // -> [2, 3, 2]
  EXPECT_FALSE(compose_view(u.view, box_move(1, 2, 4, {6, 2}, {1, 0}, {2, 2})).has_value());
  // A composed copy has no in_shape: it reads its source through its view only.
  Move composed;
  composed.view = t.view;
  EXPECT_FALSE(compose_view(u.view, composed).has_value());
}

/** A rank program of `n` buffers of float32 with these statements. */
RankProgram program(int n, std::vector<Instr> step) {
  RankProgram prog;
  for (int b = 0; b < n; ++b) prog.buffers.push_back({"b" + std::to_string(b), DType::f32, 24});
  prog.step = std::move(step);
  return prog;
}

TEST(ComposeMoves, ATransposedGradientGoesIntoItsPlaceOfAConcat) {
  // $0$ computed; $1$ = $0$ [2, 3, 4] transposed to [3, 2, 4]; $3$ = Concat($1$ read as [3, 2, 4], $2$) on axis 2.
  Instr make{"// a (Tanh)\nrt::map(...);", {0}};
  Instr t{"// t (Transpose)\nrt::transpose({2, 3, 4}, {1, 0, 2}, $0$, $1$);", {0, 1}};
  t.move = box_move(0, 1, 4, {2, 3, 4}, {0, 0, 0}, {2, 3, 4}, {1, 0, 2});
  Instr cat{"// c (Concat)\nrt::concat(...);", {1, 2, 3}};
  for (int part : {1, 2}) {
    Move m = box_move(part, 3, 4, {3, 2, 4}, {0, 0, 0}, {3, 2, 4});
    m.dst_view = StridedView{{3, 2, 4}, {16, 8, 1}, part == 1 ? 0 : 4};
    cat.concat_parts.push_back(m);
  }
  Instr use{"// u (Relu)\nrt::map(...);", {3, 4}};
  RankProgram prog = program(5, {make, t, cat, use});
  compose_moves(prog);
  ASSERT_EQ(prog.step.size(), 3u);  // the transpose went into the Concat
  EXPECT_EQ(prog.step[1].code,
            "// c (Concat)\n"
            "rt::view_copy($0$, {3, 2, 4}, {4, 12, 1}, 0, $3$, {16, 8, 1}, 0, 4);\n"
            "rt::view_copy($2$, {3, 2, 4}, {8, 4, 1}, 0, $3$, {16, 8, 1}, 4, 4);");
  EXPECT_EQ(prog.step[1].buffers, (std::vector<int>{0, 2, 3}));
  // The transposed buffer has another reader: nothing changes.
  RankProgram kept = program(5, {make, t, cat, use, Instr{"// v (Relu)\nrt::map(...);", {1, 4}}});
  compose_moves(kept);
  EXPECT_EQ(kept.step.size(), 5u);
  EXPECT_EQ(kept.step[2].code, "// c (Concat)\nrt::concat(...);");
}

TEST(ComposeMoves, ABoxThenATransposeIsOneCopyUnlessTheSourceChangesBetween) {
  // $1$ = a box of $0$ [4, 6]; $2$ = $1$ [4, 3] transposed.
  Instr make{"// a (Tanh)\nrt::map(...);", {0}};
  Instr cut{"rt::region_copy(...);", {0, 1}};
  cut.move = box_move(0, 1, 4, {4, 6}, {0, 3}, {4, 3});
  Instr t{"// t (Transpose)\nrt::transpose({4, 3}, {1, 0}, $1$, $2$);", {1, 2}};
  t.move = box_move(1, 2, 4, {4, 3}, {0, 0}, {4, 3}, {1, 0});
  Instr use{"// u (Relu)\nrt::map(...);", {2, 3}};
  RankProgram prog = program(4, {make, cut, t, use});
  compose_moves(prog);
  ASSERT_EQ(prog.step.size(), 3u);
  EXPECT_EQ(prog.step[1].code, "// t (Transpose)\nrt::view_copy($0$, {3, 4}, {1, 6}, 3, $2$, 4);");
  // An all-reduce of $0$ in place between them: the transpose must read the copy made before it.
  Instr reduce{"rt::all_reduce_sum(G0, $0$, $0$, 24);", {0}};
  RankProgram kept = program(4, {make, cut, reduce, t, use});
  compose_moves(kept);
  EXPECT_EQ(kept.step.size(), 5u);
  // A persistent source (a weight) is not read later than the copy either.
  RankProgram weight = program(4, {make, cut, t, use});
  weight.buffers[0].persistent = true;
  compose_moves(weight);
  EXPECT_EQ(weight.step.size(), 4u);
}

}  // namespace
}  // namespace cleave::codegen
