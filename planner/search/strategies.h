#pragma once
// Strategy discovery (Tofu §4.2): the basic ways of partitioning one op n ways, read off its description, and what
// each worker then reads; plus the rules the search planners share (which splits codegen lowers, what a plan moves).
//
// A basic strategy splits one loop var of the op's primary description (validate.h) into n even blocks:
//   - an output var: every worker writes its block of the outputs, which concatenate (SplitKind::concat);
//   - a reduction var summed over: every worker writes a partial sum of whole outputs, which are then added
//     (SplitKind::partial);
//   - a synced var: the kernel exchanges statistics, the outputs it indexes are split (SplitKind::synced).
// A var that also shifts a window (Conv's y with kernel taps) makes neighbouring workers read overlapping input boxes:
// the overlap is the halo. The input boxes come from region.h, so what a worker reads here is exactly what codegen
// fetches for it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"

namespace cleave::plan {

struct Strategy {
  /** The split var of the primary description. */
  std::string var;
  describe::SplitKind kind = describe::SplitKind::none;
  /** Some input box of one worker overlaps another's along a dim the split var shifts (a window's halo). */
  bool halo = false;
  /** The config: devices 0..ways-1 on a 1-D mesh, split along `var`. */
  ParallelConfig config;
  /** Per worker, per input slot: the box it reads (nullopt: absent or read nothing of). */
  std::vector<std::vector<std::optional<Box>>> inputs;
  /** Per worker, per output slot: the box it writes (empty Box for an absent output). */
  std::vector<std::vector<Box>> outputs;
};

/** Every basic `ways`-way strategy of `op`, in the primary description's var order: each var whose split passes
 *  validate.h's config_problems (splittable, extent divisible, outputs cut into even blocks). Planning never reads
 *  tensor data: only shapes and attributes. */
std::vector<Strategy> discover_strategies(const Graph &g, const Op &op, int ways);

/** Whether codegen lowers `op` under `config` (which passed config_problems). Mirrors the refusals of codegen
 *  (codegen/lower.cpp: partial outputs only for kinds whose kernel sums shard results, `partial_ok`; an input the
 *  shard does not read but the kernel needs; graph data split on the batch dim only, checked for sources by
 *  source_sharding_supported) and of codegen/kernels*.cpp's check_kernel_split (grouped convs split by co/ci,
 *  MaxPool with Indices, loss gradients split by class, Reshape boxes that are not one contiguous range, Concat,
 *  Split and Slice split along their axis). The planners only emit configs it accepts; plan_compiles tests keep it
 *  honest. */
bool codegen_supports(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                      const ParallelConfig &config);

/** Whether codegen accepts `s` for source tensor `t`: graph inputs and labels are read split on their sample axis only. */
bool source_sharding_supported(const Tensor &t, const Sharding &s);

/** Bytes one training step of plan `p` moves between devices, as codegen derives it (codegen/lower.cpp): a tensor
 *  with partial axes is reduced where its first reader reads it, by one collective per group of members that differ
 *  only along its partial axes: a reduce-scatter ((n-1) blocks per member) when the reader's boxes tile the shard
 *  (f32), each rank then owning its block, else a ring all-reduce (2(n-1)/n of the shard per member); then each op's
 *  device fetches what its input boxes need beyond what it owns, once per step per (device, tensor, box): a box
 *  assembled for one reader is reused by every later reader of that box. Summed over devices (bytes received). It
 *  leaves out what the cost model (cost_model.h) adds: the statistics synced inside kernels (BatchNorm, losses).
 *  Precondition: validate_plan(g, p) passes. */
int64_t plan_comm_bytes(const Graph &g, const Plan &p);

}  // namespace cleave::plan
