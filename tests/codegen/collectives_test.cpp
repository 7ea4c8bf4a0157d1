// Collective recognition: the box predicates, and which calls lowering picks for small plans whose communication is
// exactly an all-gather, an all-to-all or a reduce-scatter (numerical equality of such plans with the 1-rank run is
// checked end to end by tests/codegen/hand_plans.sh).
#include <gtest/gtest.h>

#include <string>

#include "codegen/lower.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"

namespace cleave::codegen {
namespace {

using plan::all_to_all_pattern;
using plan::axes_groups;
using plan::axis_groups;
using plan::Box;
using plan::concatenates;
using plan::tiles;

Box box(std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  Box b;
  for (auto [lo, hi] : dims) b.push_back({lo, hi});
  return b;
}

TEST(Collectives, Tiles) {
  Box whole = box({{0, 8}, {0, 4}});
  EXPECT_TRUE(tiles({box({{0, 4}, {0, 4}}), box({{4, 8}, {0, 4}})}, whole));
  EXPECT_TRUE(tiles({box({{0, 8}, {2, 4}}), box({{0, 8}, {0, 2}})}, whole));
  EXPECT_FALSE(tiles({box({{0, 4}, {0, 4}}), box({{2, 8}, {0, 4}})}, whole));  // overlap, unequal
  EXPECT_FALSE(tiles({box({{0, 4}, {0, 4}}), box({{0, 4}, {0, 4}})}, whole));  // the same block twice
  EXPECT_FALSE(tiles({box({{0, 4}, {0, 4}})}, whole));                         // one member is no collective
  EXPECT_FALSE(tiles({box({{0, 2}, {0, 4}}), box({{2, 4}, {0, 4}})}, whole));  // does not cover
}

TEST(Collectives, Concatenates) {
  Box whole = box({{0, 8}, {0, 4}});
  EXPECT_TRUE(concatenates({box({{0, 4}, {0, 4}}), box({{4, 8}, {0, 4}})}, whole));
  EXPECT_FALSE(concatenates({box({{4, 8}, {0, 4}}), box({{0, 4}, {0, 4}})}, whole));  // wrong order
  EXPECT_FALSE(concatenates({box({{0, 8}, {0, 2}}), box({{0, 8}, {2, 4}})}, whole));  // column blocks
  // Leading dims of width 1 do not count.
  EXPECT_TRUE(concatenates({box({{3, 4}, {0, 2}}), box({{3, 4}, {2, 4}})}, box({{3, 4}, {0, 4}})));
}

TEST(Collectives, AllToAllPattern) {
  std::vector<Box> rows = {box({{0, 4}, {0, 4}}), box({{4, 8}, {0, 4}})};
  std::vector<Box> cols = {box({{0, 8}, {0, 2}}), box({{0, 8}, {2, 4}})};
  EXPECT_TRUE(all_to_all_pattern(rows, cols));
  EXPECT_FALSE(all_to_all_pattern(rows, rows));  // nobody needs anything of the other
  std::vector<Box> uneven = {box({{0, 8}, {0, 1}}), box({{0, 8}, {1, 4}})};
  EXPECT_FALSE(all_to_all_pattern(rows, uneven));
}

// x -> Relu -> a -> Relu -> b, and x · w -> y (MatMul) -> Relu -> z.
const char *kGraph = R"(graph chain
tensor x f32[8,4] input
tensor w f32[4,6] param
tensor a f32[8,4] activation
tensor b f32[8,4] activation
tensor y f32[8,6] activation
tensor z f32[8,6] activation
op r1 Relu forward (x) -> (a)
op r2 Relu forward (a) -> (b)
op mm MatMul forward (x, w) -> (y)
op r3 Relu forward (y) -> (z)
)";

/** "" = replicated compute. */
std::string op_var(const std::string &v) { return v.empty() ? "-" : v; }

std::string plan_text(const std::string &a, const std::string &r2, const std::string &b, const std::string &mm,
                      const std::string &w, const std::string &y, const std::string &r3, const std::string &z,
                      const std::string &x = "split(0)", const std::string &r1 = "i") {
  return "plan devices=2\n"
         "tensor x devices=[0,1] mesh=[2] [" + x + "]\n"
         "tensor w devices=[0,1] mesh=[2] [" + w + "]\n"
         "tensor a devices=[0,1] mesh=[2] [" + a + "]\n"
         "tensor b devices=[0,1] mesh=[2] [" + b + "]\n"
         "tensor y devices=[0,1] mesh=[2] [" + y + "]\n"
         "tensor z devices=[0,1] mesh=[2] [" + z + "]\n"
         "op r1 devices=[0,1] mesh=[2] [" + op_var(r1) + "]\n"
         "op r2 devices=[0,1] mesh=[2] [" + op_var(r2) + "]\n"
         "op mm devices=[0,1] mesh=[2] [" + op_var(mm) + "]\n"
         "op r3 devices=[0,1] mesh=[2] [" + op_var(r3) + "]\n";
}

/** Rank 0's step as one string. */
std::string rank0_step(const std::string &plan) {
  Graph g = parse_graph(kGraph);
  verify(g);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).role == Role::param) g.tensor(t).data.assign(static_cast<size_t>(4 * 6 * 4), uint8_t{0});
  Lowered l = lower(g, plan::parse_plan(plan));
  std::string s;
  for (const Instr &i : l.ranks[0].step) s += i.code + "\n";
  return s;
}

int count(const std::string &s, const std::string &what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Collectives, LoweringPicksAllGatherForAReplicatedReader) {
  std::string s = rank0_step(plan_text("split(0)", "", "replicate", "", "replicate", "replicate", "", "replicate"));
  EXPECT_EQ(count(s, "rt::all_gather("), 2) << s;  // a for r2, x for mm
  EXPECT_EQ(count(s, "rt::send_recv("), 0) << s;
  // Column blocks are gathered through a staging buffer and copied into place.
  s = rank0_step(plan_text("split(1)", "", "replicate", "", "replicate", "replicate", "", "replicate", "replicate", "j"));
  EXPECT_EQ(count(s, "rt::all_gather("), 1) << s;  // a only: x is replicated
  EXPECT_EQ(count(s, "rt::region_copy(($"), 1) << s;  // the second block, from the staging buffer
}

TEST(Collectives, LoweringPicksAllToAllForAResplit) {
  std::string s = rank0_step(plan_text("split(0)", "j", "split(1)", "m", "replicate", "split(0)", "i", "split(0)"));
  EXPECT_EQ(count(s, "rt::all_to_all("), 1) << s;
  EXPECT_EQ(count(s, "rt::send_recv("), 0) << s;
}

TEST(Collectives, LoweringReduceScattersAPartialReadInBlocks) {
  std::string s =
      rank0_step(plan_text("split(0)", "i", "split(0)", "k", "split(0)", "partial", "i", "split(0)", "replicate"));
  EXPECT_EQ(count(s, "rt::reduce_scatter_sum("), 1) << s;
  EXPECT_EQ(count(s, "rt::all_reduce_sum"), 0) << s;
  // Read whole, the same partial is all-reduced instead (started and waited for, codegen/overlap.h).
  s = rank0_step(plan_text("split(0)", "i", "split(0)", "k", "split(0)", "partial", "", "replicate", "replicate"));
  EXPECT_EQ(count(s, "rt::all_reduce_sum_start("), 1) << s;
  EXPECT_EQ(count(s, "rt::reduce_scatter_sum("), 0) << s;
}

TEST(Collectives, AxesGroupsSpanTheProductOfTheAxes) {
  // 8 devices on a [2, 2, 2] mesh (row-major: device = 4 a0 + 2 a1 + a2).
  std::vector<int> devices = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(axes_groups(devices, {2, 2, 2}, {0, 2}), (std::vector<std::vector<int>>{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(axes_groups(devices, {2, 2, 2}, {1}), axis_groups(devices, {2, 2, 2}, 1));
  EXPECT_EQ(axes_groups(devices, {2, 2, 2}, {0, 1, 2}), (std::vector<std::vector<int>>{devices}));
}

/** The members of the communicator of rank 0's `call`s, one list per call, in program order; a started call
 * (`rt::Pending p = call_start(G..`) counts as the call. */
std::vector<std::vector<int>> call_groups(const std::string &plan, const std::string &call) {
  Graph g = parse_graph(kGraph);
  verify(g);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).role == Role::param) g.tensor(t).data.assign(static_cast<size_t>(4 * 6 * 4), uint8_t{0});
  Lowered l = lower(g, plan::parse_plan(plan));
  std::vector<std::vector<int>> out;
  for (const Instr &i : l.ranks[0].step)
    for (const std::string &form : {call + "(G", call + "_start(G"}) {
      size_t at = i.code.find(form);
      if (at != std::string::npos) out.push_back(l.groups.at(std::stoul(i.code.substr(at + form.size()))));
    }
  return out;
}

TEST(Collectives, LoweringReducesAPartialOnTwoAxesOverTheirProduct) {
  // mm splits its summed var k along both axes of a 2x2 mesh: y is partial on both, and is reduced by one collective
  // over all 4 ranks (not one per axis): all-reduced when r3 reads it whole, reduce-scattered when r3 reads it in 4
  // row blocks.
  auto plan = [](const std::string &r3, const std::string &z) {
    std::string s = "plan devices=4\n";
    for (const char *t : {"x", "a", "b"}) s += std::string("tensor ") + t + " devices=[0,1,2,3] mesh=[2,2] [replicate,replicate]\n";
    s += "tensor w devices=[0,1,2,3] mesh=[2,2] [split(0),split(0)]\n"
         "tensor y devices=[0,1,2,3] mesh=[2,2] [partial,partial]\n"
         "tensor z devices=[0,1,2,3] mesh=[2,2] [" + z + "]\n";
    for (const char *o : {"r1", "r2"}) s += std::string("op ") + o + " devices=[0,1,2,3] mesh=[2,2] [-,-]\n";
    return s + "op mm devices=[0,1,2,3] mesh=[2,2] [k,k]\nop r3 devices=[0,1,2,3] mesh=[2,2] [" + r3 + "]\n";
  };
  std::vector<std::vector<int>> all4 = {{0, 1, 2, 3}};
  EXPECT_EQ(call_groups(plan("-,-", "replicate,replicate"), "rt::all_reduce_sum"), all4);
  EXPECT_EQ(call_groups(plan("-,-", "replicate,replicate"), "rt::reduce_scatter_sum"), std::vector<std::vector<int>>{});
  EXPECT_EQ(call_groups(plan("i,i", "split(0),split(0)"), "rt::reduce_scatter_sum"), all4);
  EXPECT_EQ(call_groups(plan("i,i", "split(0),split(0)"), "rt::all_reduce_sum"), std::vector<std::vector<int>>{});
}

}  // namespace
}  // namespace cleave::codegen
