// codegen/overlap.h: in-place all-reduces with statements between them and their buffer's last earlier use become
// start/wait pairs; the collective-order check catches ranks that would start a group's collectives in different
// orders (a deadlock). That such programs still train like `cleave eval` is checked end to end by every bundle test
// with a data plan (tests/codegen/run_matches_eval.sh, search_planners.sh, random_plans.sh).
#include <gtest/gtest.h>

#include <string>

#include "codegen/overlap.h"
#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/search/make_plan.h"

namespace cleave::codegen {
namespace {

RankProgram program(std::vector<Instr> step) {
  RankProgram p;
  p.buffers.resize(4);
  p.step = std::move(step);
  return p;
}

TEST(Overlap, SplitsAnAllReduceWithWorkBeforeIt) {
  RankProgram p = program({{"kernel_a($0$, $1$);", {0, 1}},
                           {"kernel_b($2$, $3$);", {2, 3}},
                           {"rt::all_reduce_sum(G0, $1$, $1$, 40);", {1}},
                           {"kernel_c($1$);", {1}}});
  overlap_reductions(p);
  ASSERT_EQ(p.step.size(), 5u);
  EXPECT_EQ(p.step[1].code, "rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 40);");
  EXPECT_EQ(p.step[1].buffers, std::vector<int>{1});
  EXPECT_EQ(p.step[2].code, "kernel_b($2$, $3$);");
  EXPECT_EQ(p.step[3].code, "rt::wait(pending_0);");
  EXPECT_EQ(p.step[4].code, "kernel_c($1$);");
}

TEST(Overlap, PairsAllReducesWithNothingToOverlapBackToBack) {
  // Right after its producer, and a source's (never written in the step): a start and its wait back to back (another
  // member may start the same all-reduce early, and MPI does not match a blocking all-reduce with a started one).
  // One that is not in place stays as it is.
  RankProgram p = program({{"kernel_a($0$, $1$);", {0, 1}},
                           {"rt::all_reduce_sum(G0, $1$, $1$, 40);", {1}},
                           {"rt::all_reduce_sum(G0, $2$, $2$, 8);", {2}},
                           {"kernel_b($3$);", {3}},
                           {"rt::all_reduce_sum(G0, $0$, $3$, 8);", {0, 3}}});
  overlap_reductions(p);
  std::vector<std::string> want = {"kernel_a($0$, $1$);",
                                   "rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 40);",
                                   "rt::wait(pending_0);",
                                   "rt::Pending pending_1 = rt::all_reduce_sum_start(G0, $2$, 8);",
                                   "rt::wait(pending_1);",
                                   "kernel_b($3$);",
                                   "rt::all_reduce_sum(G0, $0$, $3$, 8);"};
  ASSERT_EQ(p.step.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(p.step[i].code, want[i]);
}

TEST(Overlap, StartsNeverMovePastCommunication) {
  // The producer of $1$ lies before an all-gather and a transfer: the start goes right after the transfer, so this
  // rank issues the all-gather, the transfer and the all-reduce in their original order.
  RankProgram p = program({{"kernel_a($1$);", {1}},
                           {"rt::all_gather(G1, $2$, $3$, 4);", {2, 3}},
                           {"rt::send_recv({});", {}},
                           {"kernel_b($0$);", {0}},
                           {"rt::all_reduce_sum(G0, $1$, $1$, 4);", {1}}});
  overlap_reductions(p);
  ASSERT_EQ(p.step.size(), 6u);
  EXPECT_EQ(p.step[2].code, "rt::send_recv({});");
  EXPECT_EQ(p.step[3].code, "rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);");
  EXPECT_EQ(p.step[4].code, "kernel_b($0$);");
}

/** check_collective_order's message, or "(no error)". */
std::string order_error(const Lowered &l) {
  try {
    check_collective_order(l);
  } catch (const InternalError &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Overlap, OrderCheckReadsStartedCollectivesOnce) {
  // A start statement names its collective once ("rt::Pending x = rt::all_reduce_sum_start(G0, ...)"): the same
  // sequence as a member that starts it elsewhere.
  Lowered l;
  l.groups = {{0, 1}};
  l.ranks.resize(2);
  l.ranks[0].step = {{"kernel($1$);", {1}},
                     {"rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);", {1}},
                     {"rt::wait(pending_0);", {}}};
  l.ranks[1].step = {{"rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);", {1}},
                     {"kernel($1$);", {1}},
                     {"rt::wait(pending_0);", {}}};
  check_collective_order(l);
  l.ranks[1].step[0].code = "rt::all_reduce_sum(G0, $1$, $1$, 4);";  // blocking on one member, started on the other
  l.ranks[1].step.pop_back();
  EXPECT_NE(order_error(l).find("start the collectives of group 0 in different orders"), std::string::npos)
      << order_error(l);
}

TEST(Overlap, OrderCheckCatchesDivergentWaits) {
  // Started in the same order, waited for in different orders: the cpu backend reduces at the waits.
  Lowered l;
  l.groups = {{0, 1}};
  l.ranks.resize(2);
  l.ranks[0].step = {{"rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);", {1}},
                     {"rt::Pending pending_1 = rt::all_reduce_sum_start(G0, $2$, 4);", {2}},
                     {"rt::wait(pending_0);", {}},
                     {"rt::wait(pending_1);", {}}};
  l.ranks[1].step = l.ranks[0].step;
  check_collective_order(l);
  auto fails_with = [&](const char *message) {
    EXPECT_NE(order_error(l).find(message), std::string::npos) << order_error(l);
  };
  std::swap(l.ranks[1].step[2], l.ranks[1].step[3]);
  fails_with("complete the collectives of group 0 in different orders");
  // The same started sequence, but a blocking all-reduce between one member's waits and after the other's.
  l.ranks[1].step = l.ranks[0].step;
  l.ranks[0].step.insert(l.ranks[0].step.begin() + 3, Instr{"rt::all_reduce_sum(G0, $3$, $3$, 4);", {3}});
  l.ranks[1].step.push_back(Instr{"rt::all_reduce_sum(G0, $3$, $3$, 4);", {3}});
  fails_with("complete the collectives of group 0 in different orders");
  // A wait without its start, a start without its wait.
  l.ranks[1].step = {{"rt::wait(pending_0);", {}}};
  fails_with("waits for pending_0, which it did not start");
  l.ranks[1].step = {{"rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);", {1}}};
  fails_with("never waits for pending_0");
}

TEST(Overlap, StartsKeepTheirOrderAtOnePoint) {
  RankProgram p = program({{"kernel_a($0$, $1$);", {0, 1}},
                           {"kernel_b($3$);", {3}},
                           {"rt::all_reduce_sum(G0, $1$, $1$, 4);", {1}},
                           {"rt::all_reduce_sum(G1, $0$, $0$, 4);", {0}}});
  overlap_reductions(p);
  ASSERT_EQ(p.step.size(), 6u);
  EXPECT_EQ(p.step[1].code, "rt::Pending pending_0 = rt::all_reduce_sum_start(G0, $1$, 4);");
  EXPECT_EQ(p.step[2].code, "rt::Pending pending_1 = rt::all_reduce_sum_start(G1, $0$, 4);");
}

TEST(Overlap, OrderCheckCatchesDivergentRanks) {
  Lowered l;
  l.groups = {{0, 1}, {0, 1}};
  l.ranks.resize(2);
  l.ranks[0].step = {{"rt::all_gather(G0, $0$, $1$, 4);", {0, 1}}, {"rt::all_reduce_sum(G0, $1$, $1$, 4);", {1}}};
  l.ranks[1].step = l.ranks[0].step;
  check_collective_order(l);  // the same sequence: fine
  l.ranks[1].step = {{"rt::all_reduce_sum(G0, $1$, $1$, 4);", {1}}, {"rt::all_gather(G0, $0$, $1$, 4);", {0, 1}}};
  EXPECT_THROW(check_collective_order(l), InternalError);
}

TEST(Overlap, DataParallelGradientsOverlapTheBackwardPass) {
  ImportOptions opts;
  opts.batch = 16;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/mlp.onnx", opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  Lowered l = lower(g, plan::make_plan(g, "data", 2));
  for (const RankProgram &prog : l.ranks) {
    int starts = 0, waits = 0, grads = 0;
    size_t first_start = prog.step.size(), last_wait = 0;
    for (size_t i = 0; i < prog.step.size(); ++i) {
      const std::string &c = prog.step[i].code;
      if (c.find("rt::all_reduce_sum_start(") != std::string::npos) {
        ++starts;
        first_start = std::min(first_start, i);
      }
      if (c.rfind("rt::wait(", 0) == 0) {
        ++waits;
        last_wait = i;
      }
    }
    for (const Tensor &t : g.tensors())
      grads += t.role == Role::param && g.find_tensor(t.name + ".grad").has_value();
    // Every parameter gradient's all-reduce starts early; the first starts before the last wait (they overlap).
    EXPECT_EQ(starts, grads) << "rank " << prog.rank;
    EXPECT_EQ(waits, starts);
    EXPECT_LT(first_start, last_wait);
  }
}

}  // namespace
}  // namespace cleave::codegen
