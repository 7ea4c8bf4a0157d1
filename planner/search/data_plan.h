#pragma once
// The two planners that search nothing: `single` puts every op and tensor on device 0 of `devices`; `data` is data
// parallelism over every device, splitting each op's batch var on a 1-D mesh (the searches start from them too).
#include <vector>

#include "ir/describe/batch_dims.h"
#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

// The batch dims data-parallel splits follow (ir/describe/batch_dims.h).
using describe::batch_dims;
using describe::batch_var;

/** Every op on device 0, every tensor replicated there. */
Plan single_plan(const Graph &g, int devices);

/** Data parallelism: each op's batch var split over all `devices` where the op allows it, else replicated; inputs and
 *  labels split on their sample axis. Throws UserError when a batch is not divisible by `devices`. */
Plan data_plan(const Graph &g, int devices);

}  // namespace cleave::plan
