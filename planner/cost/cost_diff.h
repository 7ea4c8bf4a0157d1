#pragma once
// The cost model's totals of two plans side by side, and the thresholds (planner/plan/plan_diff.h) they exceed:
// `cleave diff` prints both, and exits non-zero on a failure for CI.
#include <string>
#include <vector>

#include "planner/cost/cost_model.h"
#include "planner/plan/plan_diff.h"

namespace cleave::plan {

/** The totals' table: `comm_bytes A B +D +P%`, `peak_memory_bytes ...`, `predicted_step_seconds ...`. */
std::string totals_diff(const CostReport &a, const CostReport &b);

/** One line per threshold exceeded (empty = pass): `comm_bytes grew +12.50% (limit +5.00%)`. */
std::vector<std::string> threshold_failures(const CostReport &a, const CostReport &b,
                                            const std::vector<Threshold> &limits);

}  // namespace cleave::plan
