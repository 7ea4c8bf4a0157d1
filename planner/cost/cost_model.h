#pragma once
// Cost model v1 (DESIGN §5): what a plan costs on a topology, per device and per op.
//
// Communication is what planner/cost/communication.h derives (codegen/lower.cpp lowers the same derivation;
// tests/planner/cost_model_test.cpp checks every collective and transfer against the lowered programs):
//   - a partial tensor is reduced at its first reader: reduce-scatter when it has one partial axis, is f32, and the
//     reader's ranks of each partial group want disjoint equal blocks tiling the shard; else all-reduce in place;
//     partial tensors nobody reads are all-reduced at the end of the step;
//   - an input box a rank lacks is, for f32 tensors, all-gathered when the ranks wanting one box own blocks tiling
//     it, else all-to-all when the remaining ranks exchange equal disjoint blocks pairwise; everything else is one
//     grouped send/recv per op, one sender per distinct owned block (the receiver itself if it holds one, else the
//     first owner in sharding order); a box assembled once is reused for the rest of the step;
//   - kernels whose synced vars are split exchange statistics inside the kernel (kind sync: BatchNorm's per-channel
//     sums, a loss's total): priced as an all-reduce of those few floats.
// Time (α-β per link level; a group uses the link of the outermost level it spans; a shared level divides its
// bandwidth by the devices sending at once): ring all-reduce 2(p-1)/p·n·β + 2(p-1)α or a binary tree
// 2⌈log2 p⌉(α + nβ), whichever is faster (as NCCL picks); all-gather / reduce-scatter (p-1)/p·n·β + (p-1)α with n the
// gathered size; all-to-all (p-1)(α + mβ) for m bytes per pair; send/recv max(Σ sends, Σ receives) of α + bytes·β
// over each pair's link. Bytes sent count the ring algorithm's (all-reduce: 2(p-1)/p·n per member).
// Compute: a roofline per op and device, max(flops / peak, bytes read and written / memory bandwidth), over the
// descriptions' FLOPs restricted to the device's var ranges.
// Local statements (LocalStatement: data reads, region copies; local_seconds): a copy moves its bytes twice (read and
// write) at the device's memory bandwidth, a data read costs the device's read latency, its read row latency per
// sample and its bytes once at the memory bandwidth; a profile's measured curves replace both.
// Step time: per device, the sum of compute, communication and local statements in program order, and with a profile
// its statement_gap per statement (profile.h: the time no statement covers, kernel launches on a GPU), max over
// devices (v1 models no overlap of compute with communication and no contention between concurrent collectives).
// Memory: per device, the peak of live bytes over program positions (two per op: its communication, then its
// kernel): persistent shards (params, optimizer state, constants) always; every other buffer codegen would hold
// (Communication::buffers) over the positions it holds it: a shard from its producer (step start for data) to its
// last direct use (the end for the loss and assign sources), an assembled input box until the last op reading that
// same box, packing and receive buffers during their op's communication. Codegen's own liveness is per instruction,
// so its max live bytes are at most this estimate (equal on the data plans; tests/planner/cost_model_test.cpp), and
// the bundle's arena (manifest.json's peak_memory_bytes) is at least its max live bytes (64-byte alignment, first-fit
// fragmentation). Not modelled: kernel scratch, and elementwise fusion (a fused intermediate is never stored).
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/cost/communication.h"
#include "planner/cost/profile.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"
#include "planner/plan/topology.h"
#include "planner/plan/validate.h"

namespace cleave::plan {

struct OpCost {
  OpId op = kNoOp;
  /** FLOPs summed over the devices of the op's group (replicated compute counts once per device). */
  int64_t flops = 0;
  /** Slowest device of the group. */
  double compute_seconds = 0;
  /** Bytes sent by all devices for the communication that runs before this op's kernel. */
  int64_t comm_bytes = 0;
  /** Slowest device. */
  double comm_seconds = 0;
};

struct DeviceCost {
  int64_t flops = 0;
  double compute_seconds = 0, comm_seconds = 0;
  /** Local statements (LocalStatement): region copies, and reads of data shards. */
  double copy_seconds = 0, data_seconds = 0;
  /** Bytes this device sends, in all and per topology level. */
  int64_t comm_bytes = 0;
  std::vector<int64_t> comm_bytes_per_level;
  int64_t peak_memory_bytes = 0;
  /** Params, optimizer state and constants held for the whole run. */
  int64_t persistent_bytes = 0;
  /** What the device runs per step: its op shares, the communication events it takes part in and its local
   *  statements; with a profile, each costs the profile's statement_gap on top (gap_seconds). */
  int64_t statements = 0;
  double gap_seconds = 0;
  double step_seconds = 0;
};

struct CostReport {
  std::string topology;
  std::vector<std::string> level_names;
  std::vector<OpCost> ops;  // one per graph op, in op order
  /** Communication at the end of the step (partial tensors nobody read). */
  int64_t end_comm_bytes = 0;
  double end_comm_seconds = 0;
  std::vector<DeviceCost> devices;
  int64_t flops = 0;
  int64_t comm_bytes = 0;
  std::vector<int64_t> comm_bytes_per_level;
  /** Max over devices. */
  int64_t peak_memory_bytes = 0;
  double predicted_step_seconds = 0;
  /** With a profile: how many (op, device) shares took their compute time from it (the rest: roofline, of which
   *  `calibrated_shares` scaled by their op's measured / roofline ratio), and how many communication events took
   *  theirs from its measured curves (the rest: α-β). */
  int64_t measured_shares = 0, roofline_shares = 0, calibrated_shares = 0, measured_comm = 0, modelled_comm = 0;
  /** With a profile: how many local statements took their time from its curves (the rest: modelled). */
  int64_t measured_local = 0, modelled_local = 0;
};

/** The costs of `p` (validated here) on `t`. Throws UserError if the plan uses more devices than the topology has.
 *  With a `profile` (profile.h), an op share's compute time is the measured one where the profile has its (op name,
 *  shard_key), times the device's rank_scale; a share it did not measure of an op it measured at other shares is
 *  its roofline on the op's calibration line (cost_model.cpp calibration(): fitted to the measured shares' seconds
 *  against their rooflines; times the rank_scale); any other share is the roofline. A collective's time is interpolated from
 *  the measured curve of its kind and group size (sync events as all-reduces; each send/recv transfer from the curve
 *  of the op's number of exchanging ranks) and α-β where there is none; each device's step adds the profile's
 *  statement_gap per statement it runs (DeviceCost::statements). A `cache` (kept by a caller scoring many
 *  plans that share op configs) only saves work: the report is the same. */
CostReport estimate_cost(const Graph &g, const Plan &p, const Topology &t, const Profile *profile = nullptr,
                         CommCache *cache = nullptr);

/** The ranks taking part in `e` (its group's members and its transfers' ends), ascending and distinct: each runs it as
 *  one statement (a grouped send/recv is one per rank, not one per transfer). */
std::vector<int> event_ranks(const CommEvent &e);

/** Per device of `p`, the statements it runs per step (DeviceCost::statements): one per op share it computes, per
 *  communication event of `comm` (derive_communication's for `p`) it takes part in, and per local statement. */
std::vector<int64_t> device_statements(const Plan &p, const Communication &comm);

/** α-β seconds of one collective of `n` bytes per member over `p` members on link (bandwidth, latency). */
double all_reduce_seconds(double n, int p, double bandwidth, double latency);
double all_gather_seconds(double n, int p, double bandwidth, double latency);
/** α-β seconds of an all-to-all over `p` members moving `m` bytes per pair: (p-1)(α + mβ). */
double all_to_all_seconds(double m, int p, double bandwidth, double latency);

/** The link a collective over `group` uses (the outermost level it spans; on a shared level its bandwidth divided
 *  among the group), as estimate_cost prices it. */
struct GroupLink {
  double bandwidth = 0, latency = 0;
};
GroupLink group_link(const Topology &t, const std::vector<int> &group);

/** Roofline seconds of `op` under `config` on `t`'s devices: its slowest device, as estimate_cost's
 *  OpCost::compute_seconds (descs = describe(g, op)). */
double op_slowest_compute_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                          const ParallelConfig &config, const Topology &t);

/** Seconds of each device's share of `op` under `config` (descs = describe::describe(g, op)), in the config's device
 *  order: what estimate_cost charges each device for the op's kernel. The roofline, or with a `profile` the measured
 *  time where it has the share's (op name, shard_key), or the roofline calibrated on the op's measured shares (as
 *  estimate_cost), times the device's rank_scale. */
std::vector<double> op_compute_seconds(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                       const ParallelConfig &config, const Topology &t,
                                       const Profile *profile = nullptr);

/** Seconds of one CommEvent on `t`, as estimate_cost charges them: a collective's (or sync's) time, the same for every
 *  member; for send_recv, per transfer (in event order). α-β: a collective by its formula over its group's link, a
 *  transfer α + bytes·β over its pair's link, a shared level's bandwidth divided among the event's senders over that
 *  level. With a `profile`, a collective is interpolated on the measured curve of its kind and group size (sync as an
 *  all-reduce) and each transfer on the send_recv curve of the event's number of exchanging ranks, where measured
 *  (`measured` says whether any time was). */
struct CommSeconds {
  double collective = 0;
  std::vector<double> transfers;
  bool measured = false;
};
CommSeconds comm_event_seconds(const CommEvent &e, const Topology &t, const Profile *profile = nullptr);

/** Seconds of one local statement on `t`'s devices: with a `profile` that measured statements of its kind, interpolated
 *  on that curve times its rank's rank_scale (`*measured` set true); else a copy 2·bytes / memory bandwidth (read
 *  and written), a data read the device's read_latency + rows · read_row_latency + bytes / memory bandwidth. */
double local_seconds(const LocalStatement &s, const Topology &t, const Profile *profile = nullptr,
                     bool *measured = nullptr);

}  // namespace cleave::plan
