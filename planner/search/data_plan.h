#pragma once
// The two planners that search nothing: `single` puts every op and tensor on device 0 of `devices`; `data` is data
// parallelism over every device, splitting each op's batch var on a 1-D mesh (the searches start from them too).
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** Per tensor, the dim that carries the batch, or -1: the sample axis of every input and label, propagated through the ops in
 *  order (an op's batch var is a var indexing a batch dim of an operand exactly; the output dims it indexes carry the
 *  batch). */
std::vector<int> batch_dims(const Graph &g);

/** The batch var of `op` (whose primary description is `d`) given `batch` = batch_dims(g): the var indexing a batch dim
 *  of an operand exactly (coefficient 1, no offset, no division, not indirect), operands in slot order; -1 if none. */
int batch_var(const Op &op, const describe::Description &d, const std::vector<int> &batch);

/** Every op on device 0, every tensor replicated there. */
Plan single_plan(const Graph &g, int devices);

/** Data parallelism: each op's batch var split over all `devices` where the op allows it, else replicated; inputs and
 *  labels split on their sample axis. Throws UserError when a batch is not divisible by `devices`. */
Plan data_plan(const Graph &g, int devices);

}  // namespace cleave::plan
