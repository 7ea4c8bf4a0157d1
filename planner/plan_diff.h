#pragma once
// Plan diffs for review and CI (DESIGN §4): what changed between two plans of one graph, and the cost model's
// totals before and after, with thresholds that fail a change that makes the plan slower or fatter.
#include <string>
#include <vector>

#include "planner/cost_model.h"
#include "planner/plan.h"

namespace cleave::plan {

/** One line per tensor and op whose sharding/config differs, is only in `a` (`-`) or only in `b` (`+`), in b's
 *  order then a's leftovers: `tensor W: devices=[0,1] mesh=[2] [replicate] -> devices=[0,1] mesh=[2] [split(0)]`. */
std::vector<std::string> plan_changes(const Plan &a, const Plan &b);

/** A limit on how much a total may grow: `comm=+5%` is {"comm", 5}. */
struct Threshold {
  std::string metric;  // comm | memory | time
  double percent = 0;
};

/** Parses `comm=+5%,memory=+0%,time=+5%` (sign optional, `%` required). Throws UserError naming the bad item. */
std::vector<Threshold> parse_thresholds(const std::string &spec);

/** The totals' table: `comm_bytes A B +D +P%`, `peak_memory_bytes ...`, `predicted_step_seconds ...`. */
std::string totals_diff(const CostReport &a, const CostReport &b);

/** Growth in percent from a to b (0 when both are 0, +inf when only a is 0). */
double growth_percent(double a, double b);

/** One line per threshold exceeded (empty = pass): `comm_bytes grew +12.50% (limit +5.00%)`. */
std::vector<std::string> threshold_failures(const CostReport &a, const CostReport &b,
                                            const std::vector<Threshold> &limits);

}  // namespace cleave::plan
