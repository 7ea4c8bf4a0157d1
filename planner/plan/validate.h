#pragma once
// Checks a plan against its graph (rules in plan.h) and derives the shardings an op's config implies.
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** The output slot whose description names an op's split vars: 0, or the first present output if 0 is absent. */
size_t primary_output(const Op &op);

/** Why var `name` cannot be split in description `d` (empty if it can): opaque, internal, a reduction that is not a
 *  sum, or a sum whose post-processing is not linear in the sum (bias added after the reduction). A synced var
 *  (ir/describe/description.h) can always be split: its kernel synchronises the shards. */
std::string split_obstacle(const describe::Description &d, const std::string &name);

/** The sharding of output `slot` of `op` under `config` (descs = describe(g, op)). Precondition: the config passed
 *  config_problems. */
Sharding implied_sharding(const Op &op, const std::vector<describe::Description> &descs, const ParallelConfig &config,
                          size_t slot);

/** Everything config_problems and codegen_supports (strategies.h) read of an op: its kind, attributes, and operand and
 *  result types. Ops with equal keys accept the same configs, so planners check a config once per key. */
std::string config_check_key(const Graph &g, const Op &op);

/** Problems of an op's config on its own (arity, unknown or unsplittable vars, divisibility, outputs not split into
 *  even blocks), one line each, naming the op. */
std::vector<std::string> config_problems(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                         const ParallelConfig &config, int devices);

/** Adds the entry of every produced tensor that `p` leaves out: the sharding its producer's config implies (when that
 *  op has an entry whose config is valid on its own). If anything was added, the tensor entries are put in IR id
 *  order (names unknown to `g` stay last, for plan_problems to report). Lets a hand-written plan give only its op
 *  lines and its source tensors (inputs, labels, params, optimizer state, constants). A present entry is never
 *  changed: if it contradicts its producer, plan_problems says so. */
void complete_plan(const Graph &g, Plan &p);

/** The op configs that passed config_problems, per op, for one graph and device count: a caller validating many plans
 *  that share most configs (the frontier re-scoring its candidates) checks each config once. Starts empty. */
struct ValidConfigs {
  int devices = 0;
  std::vector<std::vector<ParallelConfig>> per_op;
};

/** Every problem of `p` against `g`, one line each, in plan order then graph order (empty = valid). With `valid`, a
 *  config found there is not checked again, and each config that passes is added: the lines are the same. */
std::vector<std::string> plan_problems(const Graph &g, const Plan &p, ValidConfigs *valid = nullptr);
/** Throws UserError with the first problem (and the count of the others) if the plan is invalid. */
void validate_plan(const Graph &g, const Plan &p, ValidConfigs *valid = nullptr);

}  // namespace cleave::plan
