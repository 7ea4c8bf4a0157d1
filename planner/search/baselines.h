#pragma once
// The baseline planners of Tofu §7.3, built on the same recursion steps as `tofu` (planner/search/tofu_step.h), so they
// differ from it only in how each step picks a split var per op:
//   owt        Krizhevsky's "one weird trick": data parallelism (the batch var) for every forward op except fully
//              connected layers (MatMul/Gemm reading a param), which split their output features (model
//              parallelism); backward and update ops follow, each taking its cheapest split given the ops before.
//   allrow     every tensor split along its first dim: each op, in op order, takes a split that cuts its first
//              output along dim 0 if it has one, the cheapest such given the ops before it.
//   spartan    Spartan's greedy: ops in descending order of the bytes of their largest tensor (ties: op order),
//              each taking its cheapest split given the ops already decided.
//   equalchop  every op chops its largest remaining var (extent over the splits already made) equally; ties go to
//              the cheaper split, then to description order.
// `icml18` (tofu without reduction splits) is tofu_plan with reduction_splits = false. Like tofu they partition
// every op that has a split codegen lowers. Deterministic; planning reads shapes only.
#include <string>

#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** Plan of baseline `name` (owt, allrow, spartan, equalchop) over `devices` devices, one recursion step per
 *  default_factors(devices). Passes validate_plan. */
Plan baseline_plan(const Graph &g, const std::string &name, int devices);

}  // namespace cleave::plan
