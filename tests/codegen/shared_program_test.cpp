// codegen/shared_program.h: rank sources that differ only in literals of host functions merge into one program that
// looks each up by its rank; anything else keeps one program per rank. Text in, text out. That merged bundles train
// like `cleave eval` is checked end to end by every bundle test with a data plan (run_matches_eval.sh,
// training_runs.sh, compile_cli.sh checks which plans merge).
#include <gtest/gtest.h>

#include <string>

#include "codegen/bundle.h"
#include "codegen/shared_program.h"
#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "planner/search/make_plan.h"

namespace cleave::codegen {
namespace {

/** A rank source as emit_rank_source(shared) writes them, with `body` as a step function's statements. */
std::string source(const std::string &body, const std::string &file_scope = "") {
  return "// Every rank of 2\n#include \"cleave/rt.h\"\n\nnamespace {\n\nint rank_index = 0;  // set by main\n" +
         file_scope + "float *b0;\n\nvoid step_0(int64_t step) {\n" + body +
         "}\n\n}  // namespace\n\nint main(int argc, char **argv) {\n  rank_index = ctx.rank;\n  step_0(1);\n}\n";
}

TEST(SharedProgram, LiteralsOfHostFunctionsBecomeTablesByRank) {
  std::string a = source(
      "  run.read_samples(npy_0, (pass - 1) * 32 + 0, 16, b0);  // rows 0-15\n"
      "  run.clip_grads({{b0, 9408, true}, {b0, 64, true}}, step);\n"
      "  rt::fill(b0, 0x1p-4f, 3000000000, \"rank 0\");\n");
  std::string b = source(
      "  run.read_samples(npy_0, (pass - 1) * 32 + 16, 16, b0);  // rows 16-31\n"
      "  run.clip_grads({{b0, 9408, false}, {b0, 64, false}}, step);\n"
      "  rt::fill(b0, 0x1p-3f, 3000000001, \"rank 1\");\n");
  std::optional<std::string> m = merge_rank_sources({a, b});
  ASSERT_TRUE(m);
  // Equal tables are shared (the two flags); the integer too large for int is a long; a hex float with f a float.
  EXPECT_EQ(*m, source("  run.read_samples(npy_0, (pass - 1) * 32 + rank_v0[rank_index], 16, b0);\n"
                       "  run.clip_grads({{b0, 9408, rank_v1[rank_index]}, {b0, 64, rank_v1[rank_index]}}, step);\n"
                       "  rt::fill(b0, rank_v2[rank_index], rank_v3[rank_index], rank_v4[rank_index]);\n",
                       "const int rank_v0[] = {0, 16};\n"
                       "const bool rank_v1[] = {true, false};\n"
                       "const float rank_v2[] = {0x1p-4f, 0x1p-3f};\n"
                       "const long rank_v3[] = {3000000000, 3000000001};\n"
                       "const char *const rank_v4[] = {\"rank 0\", \"rank 1\"};\n"));
  // Identical sources merge into the first, unchanged; so does one source.
  EXPECT_EQ(merge_rank_sources({a, a, a}), a);
  EXPECT_EQ(merge_rank_sources({a}), a);
}

TEST(SharedProgram, AnythingButHostLiteralsKeepsAProgramPerRank) {
  std::string base = source("  rt::map(16, [] CLEAVE_HD (float x0) { return x0 * 0.5f; }, b0, b0);\n");
  // A statement more, another buffer, another operator.
  EXPECT_FALSE(merge_rank_sources({base, source("  rt::log_loss(step, b0);\n")}));
  EXPECT_FALSE(merge_rank_sources({source("  f(b0);\n"), source("  f(b1);\n")}));
  EXPECT_FALSE(merge_rank_sources({source("  f(1 + 2);\n"), source("  f(1 - 2);\n")}));
  // A literal of a device function (CUDA cannot read host tables there), of a file-scope initializer (it runs before
  // main sets rank_index), of mixed kinds, or next to another string literal (concatenation).
  EXPECT_FALSE(merge_rank_sources(
      {base, source("  rt::map(16, [] CLEAVE_HD (float x0) { return x0 * 0.25f; }, b0, b0);\n")}));
  EXPECT_FALSE(merge_rank_sources({source("", "const int sites[] = {1, 2};\n"),
                                   source("", "const int sites[] = {1, 3};\n")}));
  EXPECT_FALSE(merge_rank_sources({source("  f(16);\n"), source("  f(16.0);\n")}));
  EXPECT_FALSE(merge_rank_sources({source("  f(16);\n"), source("  f(16u);\n")}));
  EXPECT_FALSE(merge_rank_sources({source("  f(\"a\" \"b\");\n"), source("  f(\"a\" \"c\");\n")}));
  // In main, before rank_index is set (the rank is not known yet there).
  EXPECT_FALSE(merge_rank_sources({"int rank_index = 0;\nint main() {\n  f(1);\n  rank_index = r;\n}\n",
                                   "int rank_index = 0;\nint main() {\n  f(2);\n  rank_index = r;\n}\n"}));
  EXPECT_EQ(merge_rank_sources({"int rank_index = 0;\nint main() {\n  rank_index = r;\n  f(1);\n}\n",
                                "int rank_index = 0;\nint main() {\n  rank_index = r;\n  f(2);\n}\n"}),
            "int rank_index = 0;\nconst int rank_v0[] = {1, 2};\nint main() {\n  rank_index = r;\n  f(rank_v0[rank_index]);\n}\n");
  // Without the rank variable there is nowhere to put the tables.
  EXPECT_FALSE(merge_rank_sources({"void f() { g(1); }\n", "void f() { g(2); }\n"}));
  // Comments that differ are left out, with their line when nothing else is on it.
  std::optional<std::string> m = merge_rank_sources({source("  // rank 0's rows\n  f(1);  // 0-15\n"),
                                                     source("  // rank 1's rows\n  f(1);  // 16-31\n")});
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, source("  f(1);\n"));
  // A block comment that goes keeps the tokens it separated apart.
  EXPECT_EQ(merge_rank_sources({source("  f(a /*0*/b);\n"), source("  f(a /*1*/b);\n")}), source("  f(a  b);\n"));
}

// Through the bundle writer: a data-parallel plan's ranks merge; a random plan's (other statements per rank) do not.
TEST(SharedProgram, DataPlansShareOneProgram) {
  ImportOptions opts;
  opts.batch = 8;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/mlp.onnx", opts);
  build_training_graph(g, TrainOptions{});
  auto sources = [&](const std::string &planner) {
    Lowered l = lower(g, plan::make_plan(g, planner, 2));
    std::vector<std::string> s;
    for (int r = 0; r < 2; ++r) s.push_back(emit_rank_source(g, l, r, true));
    return s;
  };
  std::optional<std::string> data = merge_rank_sources(sources("data"));
  ASSERT_TRUE(data);
  EXPECT_NE(data->find("rank_v0[rank_index]"), std::string::npos);  // the sample offset
  EXPECT_FALSE(merge_rank_sources(sources("random")));
}

}  // namespace
}  // namespace cleave::codegen
