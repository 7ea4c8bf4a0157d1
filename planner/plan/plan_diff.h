#pragma once
// Plan diffs for review and CI (DESIGN §4): what changed between two plans of one graph, and the thresholds on the
// cost model's totals (planner/cost/cost_diff.h compares them) that fail a change making the plan slower or fatter.
#include <string>
#include <vector>

#include "planner/plan/plan.h"

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

/** Growth in percent from a to b (0 when both are 0, +inf when only a is 0). */
double growth_percent(double a, double b);

/** `+12.50%`, `-3.00%`, `+inf%`: a growth as the diff prints it. */
std::string percent_str(double percent);

}  // namespace cleave::plan
