#pragma once
// The statistics `cleave profile` makes of the times rank programs measure themselves (CLEAVE_PROFILE rank files,
// parse_rank_timings in profile.h): per op share, per local statement size and per rank, over ranks and runs, into a
// Profile. The first step of every run is a warm-up (allocations, caches, communicator set-up): figures are over the
// rest.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "planner/cost/profile.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** The median of `v` (the mean of the middle two when their count is even). `v` is not empty. */
double median(std::vector<double> v);

/** The expected time of one statement from its samples: their mean, without samples over 5x their median (a
 *  descheduled rank, an interrupt). A step's time is the sum of its statements', so the cost model adds expected
 *  times: the sum of per-statement medians came out 8-10 % below the median step (every step has a few slow
 *  statements, a different few each time, which each statement's median drops). `v` is not empty. */
double expected_seconds(const std::vector<double> &v);

/** One run's expected_seconds of a statement on one rank. */
struct ProfileSample {
  int rank = 0;
  double seconds = 0;
};

/** What the runs of every plan measured so far. */
struct ProfileSamples {
  /** Per (op name, shard key): the per-rank, per-run expected_seconds of every plan that ran that share. */
  std::map<std::pair<std::string, std::string>, std::vector<ProfileSample>> compute;
  /** Per local statement kind (copy, data) and bytes: the expected_seconds of every such statement. */
  std::map<std::string, std::map<int64_t, std::vector<ProfileSample>>> statements;
  /** Per rank and run: its median step time outside its timed statements, over the statements it runs. */
  std::vector<double> gaps;
};

/** A rank file as read: where it came from (for messages) and what it holds. */
struct RankFile {
  std::string path;
  RankTimings timings;
};

/** Adds one run of plan `p` (named `plan_name` in messages) of `g` to `samples`: `ranks[r]` is rank r's file. A
 *  fused kernel's time is shared equally among its ops. Returns rank 0's median step seconds after the warm-up.
 *  Throws UserError naming the file when a rank file says another rank, or times an op `p` does not run there. */
double add_profile_run(ProfileSamples &samples, const Graph &g, const Plan &p, const std::string &plan_name,
                       const std::vector<RankFile> &ranks);

/** Profile fields from `samples` of `devices` ranks: each rank's speed (rank_scale, fitted on the shares several ranks
 *  ran) when `fit_rank_speeds`, every op share's and statement size's time brought to the mean speed, and the
 *  statement gap (the median of the ranks' gaps). Times are at least 1e-9 s. */
void summarise_samples(const ProfileSamples &samples, int devices, bool fit_rank_speeds, Profile &profile);

}  // namespace cleave::plan
