// The random planner (planner/search/random_plan.h): valid, deterministic per seed, different across seeds, and over a few
// seeds it reaches every corner of the plan form it promises (device subsets, permuted orders, 2-D meshes, reduction
// splits). Whether its plans train like one device is tests/codegen/random_plans.py's job.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/verifier.h"
#include "planner/search/make_plan.h"
#include "planner/search/random_plan.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

Graph training_graph(const std::string &model) {
  ImportOptions opts;
  opts.batch = 8;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

TEST(RandomPlan, ValidAndDeterministicPerSeed) {
  for (const char *model : {"mlp.onnx", "cnn.onnx"}) {
    Graph g = training_graph(model);
    for (int devices : {1, 2, 3, 4, 8})
      for (uint64_t seed : {0, 1, 2}) {
        SCOPED_TRACE(std::string(model) + " devices " + std::to_string(devices) + " seed " + std::to_string(seed));
        Plan a = make_plan(g, "random", devices, nullptr, seed);
        EXPECT_EQ(plan_problems(g, a), std::vector<std::string>{});
        EXPECT_EQ(print_plan(a), print_plan(random_plan(training_graph(model), devices, seed)));
      }
    EXPECT_NE(print_plan(random_plan(g, 4, 1)), print_plan(random_plan(g, 4, 2))) << model;
  }
}

TEST(RandomPlan, ReachesSubsetsPermutationsMeshesAndReductionSplits) {
  Graph g = training_graph("cnn.onnx");
  int subset = 0, permuted = 0, mesh2 = 0, partial = 0, loss_on_zero = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Plan p = random_plan(g, 8, seed);
    for (const OpEntry &e : p.ops) {
      subset += e.config.devices.size() < 8;
      permuted += !std::is_sorted(e.config.devices.begin(), e.config.devices.end());
      mesh2 += e.config.mesh.size() > 1;
      const Op &op = g.op(*g.find_op(e.name));
      if (std::find(op.outputs.begin(), op.outputs.end(), g.loss) != op.outputs.end())
        loss_on_zero += std::count(e.config.devices.begin(), e.config.devices.end(), 0) == 1;
    }
    for (const TensorEntry &t : p.tensors)
      for (const AxisSharding &a : t.sharding.axes) partial += a.kind == AxisSharding::Kind::partial;
  }
  EXPECT_GT(subset, 0);
  EXPECT_GT(permuted, 0);
  EXPECT_GT(mesh2, 0);
  EXPECT_GT(partial, 0);
  // Rank 0 logs the loss, so the op computing it always runs there.
  EXPECT_EQ(loss_on_zero, 4);
}

}  // namespace
}  // namespace cleave::plan
