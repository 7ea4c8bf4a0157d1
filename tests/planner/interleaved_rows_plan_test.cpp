// The data plan of torch's attention out-projection on time-major activations, trained: imported as a MatMul on
// [T, B, E] (frontend/interleaved_rows.h) and differentiated with the batch kept apart (autodiff's MatMul rule), it
// moves what the same layer on batch-first activations moves: the weights' gradients. The same nodes imported one by
// one fold samples into rows, which the plan must gather.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "planner/search/data_plan.h"
#include "planner/search/strategies.h"
#include "tests/frontend/attention_models.h"

namespace cleave::plan {
namespace {

/** The bytes the data plan over 2 devices of `mb`, trained with SGD, moves per step. */
int64_t data_plan_bytes(const test::ModelBuilder &mb, const std::string &tag) {
  test::TempDir dir(tag);
  Graph g = import_onnx(mb.save(dir / "model.onnx"), ImportOptions{});
  build_training_graph(g, TrainOptions{});
  return plan_comm_bytes(g, data_plan(g, 2));
}

TEST(InterleavedRowsPlan, TimeMajorOutProjectionMovesOnlyGradients) {
  int64_t batch_first = data_plan_bytes(test::out_projection(false, false, true), "rows_batch_first");
  int64_t time_major = data_plan_bytes(test::out_projection(true, false, true), "rows_time_major");
  int64_t plain = data_plan_bytes(test::out_projection(true, true, true), "rows_plain");
  EXPECT_GT(batch_first, 0);
  EXPECT_EQ(time_major, batch_first);
  EXPECT_GT(plain, batch_first);
}

}  // namespace
}  // namespace cleave::plan
