#pragma once
// Measured costs (DESIGN §5; FlexFlow and ParaDL measure, TensorOpt interpolates): the profile `cleave profile`
// writes and `--profile FILE` feeds to the cost model (cost_model.h).
//
// JSON form (keys sorted; unknown keys are errors):
//   {"format": "cleave-profile-1", "backend": "cpu",
//    "compute": {"<op name>": {"<shard key>": seconds, ...}, ...},
//    "collectives": {"<kind>": {"<group size>": [[bytes, seconds], ...], ...}, ...},
//    "statements": {"copy": [[bytes, seconds], ...], "data": [[bytes, seconds], ...]},
//    "rank_scale": [s_0, s_1, ...], "statement_gap": seconds,
//    "plans": [{"name": ..., "devices": N, "step_seconds": median}, ...]}
// - compute: the expected kernel time (a mean: profile_stats.h expected_seconds) of one device's share
//   of an op on a device of the profiled machine's mean speed, keyed by the op's name and shard_key() of that share
//   (what the device computes, not which device: shares of equal extents share a key). Several ops fused into one
//   generated kernel split its time equally.
// - rank_scale (optional; absent = every device 1): how much longer than those times rank r's kernels took (its
//   core's speed: on a shared machine one core may run slower than another for minutes), fitted on the shares that
//   several ranks ran (fit_rank_scale), mean 1 over those ranks; written only when some share ran on two ranks and
//   every rank had a core of its own. A device beyond the list is taken at scale 1. Device d's share of an op costs
//   compute · rank_scale[d], its local statements (copies, data reads: the same core's work) their curve's time ·
//   rank_scale[d].
// - statement_gap (optional; absent = 0): the time of a rank's step spent outside every timed statement, per statement
//   the rank runs (cost_model.h DeviceCost::statements): a GPU idle between tiny kernels while the host launches the
//   next one (the H200 here: 0.3-0.5 ms of a 2 ms Transformer step), a CPU's step loop. The median over the profiled
//   plans' ranks and runs; the cost model adds statement_gap · statements to each device's step.
// - collectives: kind is all_reduce, all_gather, reduce_scatter, all_to_all or send_recv; bytes is the size the
//   cost model prices (CommEvent::count · elem_bytes: the all-reduced buffer, one block of a gather/scatter, one
//   pair's part of an all-to-all, one transfer of a send/recv, whose group size is the number of ranks exchanging
//   with their ring neighbours at once); points sorted by bytes (powers of two), seconds > 0.
// - statements (optional): the expected time of the profiled plans' region copies (copy) and data reads (data) per
//   size in bytes (cost_model.h LocalStatement), points sorted by bytes; priced by interpolate() on the curve.
// - plans: the measured step time of each plan profiled (information; the cost model does not read it).
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"

namespace cleave::plan {

/** The local statements a profile measures (cost_model.h LocalStatement), in its JSON spelling (sorted). */
inline constexpr const char *kProfileStatements[] = {"copy", "data"};

/** The collectives a profile measures, in its JSON spelling (sorted). */
inline constexpr const char *kProfileCollectives[] = {"all_gather", "all_reduce", "all_to_all", "reduce_scatter",
                                                      "send_recv"};

struct ProfiledPlan {
  std::string name;
  int devices = 1;
  double step_seconds = 0;
  bool operator==(const ProfiledPlan &) const = default;
};

/** What the cost model derives from a profile per op (cost_model.cpp: the calibration of its unmeasured shares), kept
 *  beside the profile so that a search pricing thousands of configs derives each op's once. Not part of the profile's
 *  value: a copy starts empty and == ignores it. Thread-safe (the frontier prices and scores on several threads). */
class ProfileMemo {
 public:
  /** Time of an unmeasured share = intercept + slope · its roofline seconds (cost_model.cpp calibration()). */
  struct Line {
    double intercept = 0, slope = 0;
  };
  ProfileMemo() = default;
  ProfileMemo(const ProfileMemo &) {}
  ProfileMemo &operator=(const ProfileMemo &) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.clear();
    return *this;
  }
  bool operator==(const ProfileMemo &) const { return true; }
  /** The line kept for (`op`, `topology`), else `make()`'s, kept. */
  template <class Make>
  std::optional<Line> line(const std::string &op, const std::string &topology, Make make) const {
    std::string key = op + '\n' + topology;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = lines_.find(key); it != lines_.end()) return it->second;
    }
    std::optional<Line> made = make();  // outside the lock: two threads may both make it, and get the same
    std::lock_guard<std::mutex> lock(mu_);
    return lines_.try_emplace(key, made).first->second;
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::optional<Line>> lines_;
};

struct Profile {
  std::string backend = "cpu";
  /** op name -> shard key -> seconds. */
  std::map<std::string, std::map<std::string, double>> compute;
  /** kind -> group size -> (bytes, seconds) sorted by bytes. */
  std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> collectives;
  /** kind (copy, data) -> (bytes, seconds) sorted by bytes. */
  std::map<std::string, std::vector<std::pair<double, double>>> statements;
  /** Per rank: its kernels' and local statements' time relative to `compute` and `statements` (empty: all 1). */
  std::vector<double> rank_scale;
  /** Seconds of step time outside the timed statements, per statement a device runs (0: none measured). */
  double statement_gap = 0;
  std::vector<ProfiledPlan> plans;
  /** Derived, not read or written (above). */
  ProfileMemo memo;
  bool operator==(const Profile &) const = default;

  /** The measured time of `op`'s share with `shard_key` on `device` (its rank_scale applied), if measured. */
  std::optional<double> compute_seconds(const std::string &op, const std::string &shard_key, int device) const;
  /** rank_scale[device], or 1 for a device the profile did not measure. */
  double scale(int device) const;
  /** The time of collective `kind` over `group` ranks for `bytes`, interpolated from the measured curve of that group
   *  size (interpolate()); nothing when that kind or group size was not measured. */
  std::optional<double> collective_seconds(const std::string &kind, int group, double bytes) const;
  /** The time of a local statement of `kind` (copy, data) moving `bytes` on `device`, interpolated on its measured
   *  curve (its rank_scale applied); nothing when that kind was not measured. */
  std::optional<double> statement_seconds(const std::string &kind, double bytes, int device) const;
};

/** Piecewise-linear interpolation of (x, y) points sorted by x (at least one): linear between neighbours; below the
 *  first point, the first y (latency dominates small messages: the curve is flat there); above the last, the line
 *  through the last two points, never below the last y (one point: the last y scaled by x / x_last). */
double interpolate(const std::vector<std::pair<double, double>> &points, double x);

/** The key of device `index`'s share of `op` under `config`: the extents of its var ranges in the description of the
 *  op's first present output, "name=extent" joined by commas in the description's var order (e.g. "b=4,i=64,o=10").
 *  Codegen labels each kernel with the same key, so measured and predicted shares match. */
std::string shard_key(const Graph &g, const Op &op, const ParallelConfig &config, int64_t index);
/** The same given the op's descriptions (describe::describe(g, op)), for callers that keep them. */
std::string shard_key(const Op &op, const std::vector<describe::Description> &descs, const ParallelConfig &config,
                      int64_t index);

/** Fits rank_scale to per-rank measurements of the same items (kernel shares): `times[i][r]` is item i's expected
 *  seconds on rank r (0 where rank r did not run it; an item run by one rank says nothing about speeds and is
 *  ignored). The model is t_ir = n_i · s_r, fitted by alternating: each s_r the ratio of rank r's total over its items
 *  to those items' n_i, each n_i the mean over its ranks of t_ir / s_r; the speeds are scaled to mean 1 over the ranks
 *  that ran a shared item (the others stay 1). `ranks` entries; nothing when no item ran on two ranks. */
std::optional<std::vector<double>> fit_rank_scale(const std::vector<std::vector<double>> &times, int ranks);

/** One rank's timings, as a bundle run with CLEAVE_PROFILE=PREFIX writes them to PREFIX.rank_<r>.json (runtime rt.h):
 *  per step its wall seconds, and per timed statement of the step (a site) its seconds in each step. */
struct RankTimings {
  struct Site {
    /** kernel, comm, copy or data. */
    std::string kind;
    /** kernel: its ops (several when fused); comm, copy: the op it runs before (none: the end of the step). */
    std::vector<std::string> ops;
    /** copy, data: the bytes it moves (0 otherwise). */
    int64_t bytes = 0;
    /** One per step, as many as `steps`. */
    std::vector<double> seconds;
  };
  int rank = 0;
  std::vector<double> steps;
  std::vector<Site> sites;
};

/** Parses a rank file's text (`source`: its path, for errors). Errors are UserError `<source>: <field>: <problem>`: not
 *  JSON, a missing or mistyped field, no steps, a negative time, a site of another kind, a kernel without ops, a site
 *  timing another number of steps than the step list. */
RankTimings parse_rank_timings(const std::string &json_text, const std::string &source);

/** Parses the JSON form; errors are UserError `<source>: <field>: <problem>`. */
Profile parse_profile(const std::string &json_text, const std::string &source);
/** Reads and parses a profile file; UserError naming the file when it cannot be read. */
Profile load_profile(const std::string &path);
/** The JSON form, deterministic in form (keys sorted, numbers as "%.6g"-rounded doubles). */
std::string profile_json(const Profile &p);

}  // namespace cleave::plan
