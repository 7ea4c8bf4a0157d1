#pragma once
// TensorOpt's modes on top of frontier_search (frontier.h): which device counts are searched, which frontier plan a
// user gets, and how other planners' points stand against a frontier. `cleave plan --planner frontier --mode M`
// (tools/cli/frontier_plan.cpp) validates its flags, calls these and prints or writes their text.
//   mini-time         one search over N devices; the fastest frontier plan whose peak fits the memory limit.
//   mini-parallelism  one search per count of device_count_range(1, N); the fewest devices whose fastest fitting
//                     step is within kMiniParallelismSlack of the best of all counts, then that count's mini-time plan.
//   profile           one search per count of a range; per count the fastest frontier point, whatever its memory.
// Every choice is a function of the FrontierResults alone (tests/planner/frontier_modes_test.cpp checks them against
// brute force over those results), so a mode is as deterministic as frontier_search.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "planner/cost/profile.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"
#include "planner/search/frontier.h"

namespace cleave::plan {

enum class FrontierMode { mini_time, mini_parallelism, profile };

/** The mode's --mode spelling: "mini-time", "mini-parallelism", "profile". */
const char *frontier_mode_name(FrontierMode mode);
/** The mode spelled `name` (frontier_mode_name's spellings), or nullopt. */
std::optional<FrontierMode> parse_frontier_mode(const std::string &name);

/** mini-parallelism accepts a device count whose fastest fitting step is at most this factor of the best one. */
inline constexpr double kMiniParallelismSlack = 1.05;

/** The device counts a range A..B stands for: `lo`, the powers of two strictly between `lo` and `hi`, and `hi` (once
 *  when lo == hi), increasing. Precondition: 1 <= lo <= hi. */
std::vector<int> device_count_range(int lo, int hi);

/** The step seconds of `r`'s fastest frontier plan whose peak fits `memory_limit` bytes; nullopt when none fits. */
std::optional<double> fastest_fitting_seconds(const FrontierResult &r, int64_t memory_limit);

/** mini-parallelism's choice among `results` (one per device count, fewest devices first, not empty): the index of the
 *  first whose fastest fitting step is at most kMiniParallelismSlack times the least fastest fitting step of all.
 *  UserError naming --memory-limit (fastest_fitting's, on the last result) when no result has a plan that fits. */
size_t fewest_devices_within_slack(const std::vector<FrontierResult> &results, int64_t memory_limit);

/** Called after each search of a mode with its result and wall seconds (for progress lines: people, not machines). */
using FrontierProgress = std::function<void(const FrontierResult &r, double seconds)>;

/** What mini-time or mini-parallelism chose. */
struct FrontierChoice {
  FrontierMode mode = FrontierMode::mini_time;
  int64_t memory_limit = 0;
  /** One search per device count, fewest devices first (mini-time: the one count asked for). */
  std::vector<FrontierResult> results;
  /** results[chosen] is the frontier chosen; its frontier[point] the plan (fastest_fitting's). */
  size_t chosen = 0, point = 0;
  const FrontierResult &result() const { return results[chosen]; }
  const FrontierPlan &pick() const { return results[chosen].frontier[point]; }
};

/** Runs `mode` (mini-time or mini-parallelism; profile is frontier_profile's) for at most `devices` devices of `t`,
 *  searching with `profile`'s times where given; `on_search` (may be empty) after each search. UserError naming
 *  --memory-limit when no plan fits `memory_limit` bytes (fastest_fitting's). */
FrontierChoice frontier_choose(const Graph &g, FrontierMode mode, int devices, const Topology &t, int64_t memory_limit,
                               const Profile *profile = nullptr, const FrontierProgress &on_search = {});

/** A row of the profile mode: a device count's fastest frontier point and the frontier's size. */
struct FrontierProfileRow {
  int devices = 0;
  double step_seconds = 0;
  int64_t peak_memory_bytes = 0;
  size_t points = 0;
};

/** profile: a search over each of `counts` devices of `t` (each at most t.devices()), one row each in that order;
 *  `on_search` (may be empty) after each search. */
std::vector<FrontierProfileRow> frontier_profile(const Graph &g, const std::vector<int> &counts, const Topology &t,
                                                 const Profile *profile = nullptr,
                                                 const FrontierProgress &on_search = {});

/** The profile mode's output (deterministic): a header naming the topology, then per row `devices
 *  best_step_seconds peak_memory_bytes points`. */
std::string frontier_profile_table(const std::vector<FrontierProfileRow> &rows, const std::string &topology);

/** How a point (step seconds, peak bytes) stands against a frontier. */
enum class BaselineStanding {
  /** At least as good as some frontier point in both and better in one: a failure of the search. */
  dominates_a_frontier_point,
  /** Not that, and some frontier point is at least as good in both. */
  dominated,
  /** Neither: the frontier does not reach that far along the other axis. */
  beside,
};
BaselineStanding baseline_standing(const FrontierResult &r, double step_seconds, int64_t peak_memory_bytes);
/** "dominates-a-frontier-point", "dominated", "beside". */
const char *baseline_standing_name(BaselineStanding s);

/** Another planner's plan beside a frontier. */
struct FrontierBaseline {
  /** Labelled with the planner's name; estimate_cost's step seconds and peak bytes. */
  LabelledPoint point;
  BaselineStanding standing = BaselineStanding::beside;
  /** The search's own model of the plan (frontier_model_costs). */
  ModelledPlan model;
};

/** Each of `planners` (make_plan's names, seed 0) over r.devices devices of `t`, priced by estimate_cost and by the
 *  search's model with `profile` where given, and its standing against `r`'s frontier; in the order given. */
std::vector<FrontierBaseline> frontier_baselines(const Graph &g, const FrontierResult &r,
                                                 const std::vector<std::string> &planners, const Topology &t,
                                                 const Profile *profile = nullptr);

/** The table of a choice (deterministic): frontier_table of the chosen frontier, then per baseline `# baseline NAME
 *  SECONDS BYTES STANDING`, per baseline `# baseline-model NAME ft_seconds=.. ft_memory_bytes=..
 *  ops_among_candidates=M/ops`, and `# chosen MODE devices=.. step_seconds=.. peak_memory_bytes=.. limit=..`. */
std::string frontier_choice_table(const FrontierChoice &c, const std::vector<FrontierBaseline> &baselines,
                                  const std::string &topology, int ops);

}  // namespace cleave::plan
