#pragma once
// ParaDL's oracle (§4): the parallel strategies of a CNN, each written as a plan and priced by the one cost model
// (planner/cost/cost_model.h), over a range of device counts, next to the best plan the search planners find.
//
// A strategy says, for each forward op, which loop var of its description a mesh axis splits, by the role of the
// dims that var indexes (the op's primary output: the batch dim (data_plan.h batch_dims); the feature dim, dim 1 of
// a rank-2 or rank-4+ tensor and the last dim of a rank-3 one; the spatial dim, dim 2 of a rank-4+ tensor):
//   data      the batch var (every op);
//   spatial   the var of the output's first spatial dim (conv, pool, BatchNorm, elementwise on NCHW maps): workers
//             exchange halos; ops without spatial dims (fully connected layers, the loss) split the batch, as ParaDL
//             runs them;
//   filter    the output-feature var (conv's co, Gemm's n; the channel var of ops between them): activations
//             all-gathered before each layer;
//   channel   a layer that reads a param splits the reduction var over its input's feature dim (conv's ci, Gemm's
//             k; partial outputs, then all-reduced or reduce-scattered); other ops split their feature var;
//   pipeline  consecutive forward ops (with their backward and update ops) on one device each, cut where the FLOPs
//             balance; without micro-batching the stages run one after another;
//   data+filter, data+spatial   a 2-D mesh [p1, p2], the batch on p1 and the other strategy on p2, every p1·p2 = p
//             with p1, p2 >= 2 tried and the fastest kept.
// Backward and update ops take, per mesh axis, the split that moves the fewest bytes given the forward ops (as the
// owt baseline does: planner/search/baselines.h). A forward op whose preferred var cannot be split (indivisible extent, no
// such dim, a split codegen does not lower) takes its cheapest split instead: counted in `fallback_ops`, so a
// strategy that did not apply says so.
//
// Step time: the task-graph simulator's makespan (planner/cost/simulator.h: dependencies between devices, communication
// overlapping compute), which is what ranks the strategies; beside it cost model v1's (compute roofline + α-β
// communication summed per device, max over devices), which ignores that a pipeline stage waits for the one before.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/cost/cost_model.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

enum class OracleStrategy : uint8_t { data, spatial, filter, channel, pipeline, data_filter, data_spatial };

/** "data", "spatial", "filter", "channel", "pipeline", "data+filter", "data+spatial". */
std::string_view oracle_strategy_name(OracleStrategy s);
/** Every strategy, in the order above. */
std::vector<OracleStrategy> oracle_strategies();

struct OracleRow {
  int devices = 1;
  /** A strategy name, or "best:<planner>" for the best search planner's plan. */
  std::string strategy;
  /** The mesh, "8" or "2x4"; for pipeline the stage count. */
  std::string mesh;
  /** False when no plan of this strategy exists (e.g. batch smaller than the devices); `note` says why. */
  bool applicable = true;
  std::string note;
  int fallback_ops = 0;
  /** The slowest device's compute and communication seconds (cost model v1). */
  double compute_seconds = 0, comm_seconds = 0;
  /** Cost model v1's step, and the simulator's (the one rows are ranked by). */
  double v1_step_seconds = 0, step_seconds = 0;
  int64_t comm_bytes = 0, peak_memory_bytes = 0;
  /** The plan priced (applicable rows). */
  Plan plan;
};

/** The plan of strategy `s` (not a hybrid, nor pipeline) on a mesh whose axes are `kinds[i]` (data, spatial, filter
 *  or channel) of `sizes[i]` devices; `fallback_ops` gets the count of forward ops that could not take their
 *  preferred split. */
Plan strategy_plan(const Graph &g, const std::vector<OracleStrategy> &kinds, const std::vector<int64_t> &sizes,
                   int *fallback_ops = nullptr);

/** The pipeline plan over `devices` stages (stage s on device devices-1-s, so that the loss is on device 0). */
Plan pipeline_plan(const Graph &g, int devices);

/** The oracle's rows for each device count (ascending), strategies in oracle_strategies() order, then one
 *  "best:<planner>" row per device count: the fastest of `planners` (make_plan names) under the cost model.
 *  Deterministic. */
std::vector<OracleRow> run_oracle(const Graph &g, const std::vector<int> &device_counts,
                                  const std::vector<OracleStrategy> &strategies,
                                  const std::vector<std::string> &planners, const Topology &t);

/** The rows as a fixed-width table, one line per row, ending with each device count's fastest strategy. */
std::string oracle_table(const std::vector<OracleRow> &rows);

}  // namespace cleave::plan
