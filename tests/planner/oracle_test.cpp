// ParaDL's oracle (planner/search/oracle.h): each strategy's plan splits the vars it names, the pipeline puts contiguous
// stages on single devices, and the cost model's figures for data parallelism equal ParaDL's closed form (every
// device sends 2(p-1)/p of the gradients' bytes: a ring all-reduce), which this test computes from the graph alone.
#include <gtest/gtest.h>

#include <map>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/cost/cost_model.h"
#include "planner/search/oracle.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

Graph training_graph(const std::string &model, int64_t batch = 8) {
  ImportOptions opts;
  opts.batch = batch;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

/** The split var of each forward op of kind `kind` (single-axis plans). */
std::vector<std::string> forward_vars(const Graph &g, const Plan &p, OpKind kind) {
  std::vector<std::string> out;
  for (const OpEntry &e : p.ops) {
    const Op &op = g.op(*g.find_op(e.name));
    if (op.phase == Phase::forward && op.kind == kind) out.push_back(e.config.vars.at(0));
  }
  return out;
}

TEST(Oracle, StrategiesSplitTheirVars) {
  Graph g = training_graph("cnn.onnx");
  int fallback = -1;
  Plan data = strategy_plan(g, {OracleStrategy::data}, {2}, &fallback);
  EXPECT_EQ(plan_problems(g, data), std::vector<std::string>{});
  for (const std::string &v : forward_vars(g, data, OpKind::Conv)) EXPECT_EQ(v, "b");
  for (const std::string &v : forward_vars(g, data, OpKind::Gemm)) EXPECT_EQ(v, "m");
  EXPECT_EQ(fallback, 0);

  Plan filter = strategy_plan(g, {OracleStrategy::filter}, {2});
  for (const std::string &v : forward_vars(g, filter, OpKind::Conv)) EXPECT_EQ(v, "co");
  for (const std::string &v : forward_vars(g, filter, OpKind::Gemm)) EXPECT_EQ(v, "n");

  Plan spatial = strategy_plan(g, {OracleStrategy::spatial}, {2});
  for (const std::string &v : forward_vars(g, spatial, OpKind::Conv)) EXPECT_EQ(v, "y");
  // Fully connected layers have no spatial dim: they split the batch, as ParaDL runs them.
  for (const std::string &v : forward_vars(g, spatial, OpKind::Gemm)) EXPECT_EQ(v, "m");

  Plan channel = strategy_plan(g, {OracleStrategy::channel}, {2}, &fallback);
  std::vector<std::string> conv = forward_vars(g, channel, OpKind::Conv);
  ASSERT_GE(conv.size(), 2u);
  // The first conv reads a 1-channel image: its ci cannot be split in two, so it falls back (and is counted).
  EXPECT_NE(conv[0], "ci");
  for (size_t i = 1; i < conv.size(); ++i) EXPECT_EQ(conv[i], "ci");
  // The classifier's Gemm adds its bias after the sum, so its k cannot be split either: two fallbacks.
  EXPECT_EQ(fallback, 2);

  // A 2-D mesh: the batch on axis 0, the filters on axis 1.
  Plan hybrid = strategy_plan(g, {OracleStrategy::data, OracleStrategy::filter}, {2, 2});
  EXPECT_EQ(plan_problems(g, hybrid), std::vector<std::string>{});
  for (const OpEntry &e : hybrid.ops) {
    const Op &op = g.op(*g.find_op(e.name));
    if (op.phase != Phase::forward || op.kind != OpKind::Conv) continue;
    EXPECT_EQ(e.config.vars, (std::vector<std::string>{"b", "co"})) << e.name;
  }
}

TEST(Oracle, PipelineStagesAreContiguousSingleDevices) {
  Graph g = training_graph("cnn.onnx");
  for (int devices : {2, 3, 4}) {
    SCOPED_TRACE("devices " + std::to_string(devices));
    Plan p = pipeline_plan(g, devices);
    EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
    std::map<std::string, int> device;
    std::vector<int> used(static_cast<size_t>(devices), 0);
    int last = devices;
    for (const OpEntry &e : p.ops) {
      ASSERT_EQ(e.config.devices.size(), 1u) << e.name;
      int d = e.config.devices[0];
      device[e.name] = d;
      ++used[static_cast<size_t>(d)];
      const Op &op = g.op(*g.find_op(e.name));
      if (op.phase == Phase::forward) {
        EXPECT_LE(d, last) << e.name << ": stages run forward on devices p-1, p-2, ..., 0";
        last = d;
      }
    }
    for (int d = 0; d < devices; ++d) EXPECT_GT(used[static_cast<size_t>(d)], 0) << "device " << d << " idle";
    for (const Op &op : g.ops())
      if (op.phase == Phase::backward && op.group != kNoOp)
        EXPECT_EQ(device[op.name], device[g.op(op.group).name]) << op.name << " runs beside its forward op";
    const Op &loss = g.op(g.tensor(g.loss).producer);
    EXPECT_EQ(device[loss.name], 0);
  }
  EXPECT_THROW(pipeline_plan(g, 1000), UserError);
}

TEST(Oracle, DataParallelCommunicationIsParaDLsAllReduce) {
  for (const char *model : {"mlp.onnx", "cnn.onnx"}) {
    Graph g = training_graph(model);
    // BatchNorm's backward kernel sums its scale and bias gradients inside its statistics exchange (a sync event),
    // so those params need no all-reduce of their own; its running statistics are params without gradients.
    int64_t param_bytes = 0;
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(t).role == Role::param)
        param_bytes += num_elements(g.tensor(t).shape) * dtype_size(g.tensor(t).dtype);
    for (const Op &op : g.ops())
      if (op.kind == OpKind::BatchNormalization && op.phase == Phase::forward)
        for (size_t s : {1, 2, 3, 4}) param_bytes -= num_elements(g.tensor(op.inputs[s]).shape) * 4;
    for (int p : {2, 4}) {
      SCOPED_TRACE(std::string(model) + " devices " + std::to_string(p));
      int fallback = -1;
      Plan plan = strategy_plan(g, {OracleStrategy::data}, {p}, &fallback);
      EXPECT_EQ(fallback, 0);
      // Every gradient is all-reduced once over all devices; the only other traffic is the kernels' statistics
      // (BatchNorm sums, the loss's total).
      int64_t grad_bytes = 0, ring_bytes = 0;
      for (const CommEvent &e : derive_communication(g, plan).events) {
        ASSERT_TRUE(e.kind == CommEvent::Kind::all_reduce || e.kind == CommEvent::Kind::sync)
            << comm_kind_name(e.kind) << " of " << g.tensor(e.tensor).name;
        int64_t n = e.count * e.elem_bytes;
        if (e.kind == CommEvent::Kind::all_reduce) {
          EXPECT_EQ(g.tensor(e.tensor).role, Role::grad) << g.tensor(e.tensor).name;
          EXPECT_EQ(static_cast<int>(e.group.size()), p);
          grad_bytes += n;
        }
        // ParaDL's ring all-reduce: each of the group's members sends 2(g-1)/g of the buffer.
        ring_bytes += 2 * (static_cast<int64_t>(e.group.size()) - 1) * n;
      }
      EXPECT_EQ(grad_bytes, param_bytes);
      std::vector<OracleRow> rows = run_oracle(g, {p}, {OracleStrategy::data}, {}, preset_topology("k80x8"));
      ASSERT_EQ(rows.size(), 1u);
      EXPECT_EQ(rows[0].comm_bytes, ring_bytes);
    }
  }
}

TEST(Oracle, TableIsDeterministicAndNamesTheBest) {
  Graph g = training_graph("cnn.onnx");
  std::vector<OracleRow> a = run_oracle(g, {1, 2, 4}, oracle_strategies(), {"data", "tofu"}, preset_topology("k80x8"));
  std::vector<OracleRow> b = run_oracle(g, {1, 2, 4}, oracle_strategies(), {"data", "tofu"}, preset_topology("k80x8"));
  EXPECT_EQ(oracle_table(a), oracle_table(b));
  std::string table = oracle_table(a);
  EXPECT_NE(table.find("# 4 devices: fastest pure strategy"), std::string::npos) << table;
  int best_rows = 0;
  for (const OracleRow &r : a) best_rows += r.strategy.rfind("best:", 0) == 0;
  EXPECT_EQ(best_rows, 3);
  // Hybrids need p1, p2 >= 2.
  for (const OracleRow &r : a)
    if (r.devices == 2 && r.strategy == "data+filter") {
      EXPECT_FALSE(r.applicable);
    }
}

}  // namespace
}  // namespace cleave::plan
