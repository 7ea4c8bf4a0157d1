#pragma once
// Cost model v1 (DESIGN §5): what a plan costs on a topology, per device and per op.
//
// Communication is derived exactly as codegen/lower.cpp derives it (derive_communication below mirrors its rules;
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
#include "planner/plan/plan.h"
#include "planner/cost/profile.h"
#include "planner/plan/region.h"
#include "planner/plan/topology.h"
#include "planner/plan/validate.h"

namespace cleave::plan {

struct CommEvent {
  enum class Kind : uint8_t { all_reduce, reduce_scatter, all_gather, all_to_all, send_recv, sync };
  Kind kind = Kind::send_recv;
  /** The op before whose kernel it runs (for sync: inside it); kNoOp: the end of the step. */
  OpId op = kNoOp;
  TensorId tensor = kNoTensor;
  /** Collectives: the members, in the order codegen creates the communicator. */
  std::vector<int> group;
  /** Collectives: the count codegen passes (all-reduce: the buffer; reduce-scatter, all-gather: one block; all-to-all:
   *  one pair's part), in elements of `elem_bytes`. */
  int64_t count = 0;
  int elem_bytes = 4;
  struct Transfer {
    int src = 0, dst = 0;
    int64_t bytes = 0;
    bool operator==(const Transfer &) const = default;
  };
  /** send_recv: every transfer of the op, in codegen's order per receiving rank and input slot. */
  std::vector<Transfer> transfers;
};

std::string_view comm_kind_name(CommEvent::Kind k);

/** A buffer of one rank's step other than persistent state (a tensor's shard, an assembled input box, a packing or
 *  receive buffer), live over program positions [at, until]: op o's communication is position 2o, its kernel 2o+1,
 *  the end of the step 2·(op count). */
struct StepBuffer {
  int rank = 0;
  int at = 0, until = 0;
  int64_t bytes = 0;
};

/** A statement of one rank's step that neither computes an op nor communicates, as codegen emits it: a read of the
 *  rank's shard of an input or label from .npy at the start of the step (data), or a region copy (copy) packing part
 *  of a shard before a send or an all-to-all, unpacking a received or locally held part into an assembled box,
 *  reordering the blocks of a gather or scatter, or copying an update into its tensor (an assign, at the end). */
struct LocalStatement {
  enum class Kind : uint8_t { copy, data };
  Kind kind = Kind::copy;
  int rank = 0;
  /** copy: the op whose communication it belongs to (kNoOp: the end of the step); data: kNoOp. */
  OpId op = kNoOp;
  /** copy: after that communication (unpacking, assigns) rather than before it (packing). */
  bool after = false;
  /** copy: bytes copied; data: bytes of the shard read. */
  int64_t bytes = 0;
  /** data: the samples read (the runtime reads each run of consecutive samples at once, and converts each value). */
  int64_t rows = 0;
  bool operator==(const LocalStatement &) const = default;
};

struct Communication {
  std::vector<CommEvent> events;  // program order
  /** Every data read and region copy of the step, in program order per rank (tests/planner/cost_model_test.cpp
   *  checks them against codegen's copy and data statements). */
  std::vector<LocalStatement> local;
  /** Every non-persistent buffer the replayed program holds, with codegen's lifetimes: a tensor's shard lives from
   *  its producer to its last direct use (read in place, or as the source of a copy, collective or send), not to
   *  its last reader, which may read an assembled copy instead. */
  std::vector<StepBuffer> buffers;
};

/** One exchange of statistics inside a synced kernel (CommEvent::Kind::sync): its group and f32 count. */
struct SyncExchange {
  std::vector<int> group;
  int64_t count = 0;
};
/** The sync exchanges of `op` under `config` (none unless it splits a synced var), in program order. */
std::vector<SyncExchange> sync_exchanges(const Graph &g, const Op &op, const std::vector<describe::Description> &descs,
                                         const ParallelConfig &config);

/** What derive_communication computes from an op and its config alone (its descriptions, each device's input boxes),
 *  kept between calls by searches that change one op's config at a time (planner/cost/simulator.h) or score many plans
 *  (planner/search/frontier.cpp). Starts empty; one graph's only. */
struct CommCache {
  std::vector<std::vector<describe::Description>> descs;
  std::vector<ParallelConfig> config;
  std::vector<std::vector<std::vector<std::optional<Box>>>> needs;  // per op, per device index, per input slot
  /** Per op, per device index: the FLOPs and bytes of its share (estimate_cost fills it; emptied with `needs`). */
  std::vector<std::vector<std::pair<int64_t, int64_t>>> work;
  /** An op's earlier config with its needs and work, taken back when a plan returns to it (frontier candidates and
   *  MCMC moves revisit a few configs per op). */
  struct Kept {
    ParallelConfig config;
    std::vector<std::vector<std::optional<Box>>> needs;
    std::vector<std::pair<int64_t, int64_t>> work;
  };
  static constexpr size_t kKeptPerOp = 8;
  std::vector<std::vector<Kept>> kept;  // per op, at most kKeptPerOp, least recently left first
  /** The configs estimate_cost's validation passed (validate.h). */
  ValidConfigs valid;
};

/** The box predicates derive_communication decides collectives by (as codegen/collectives.h defines them), for
 *  searches that price one tensor's re-split the same way (planner/search/frontier.cpp). `outer` holds `inner`; `blocks`
 *  (two or more, equal, disjoint) tile `whole`, and `concatenates` it when laid end to end in order (no copies into
 *  place); each `owned` block (disjoint) gives an equal part to each `wanted`
 *  box, the parts covering it; the groups of `devices` on `mesh` whose coordinates differ only along `axes`. */
bool contains(const Box &outer, const Box &inner);
bool tiles(const std::vector<Box> &blocks, const Box &whole);
bool concatenates(const std::vector<Box> &blocks, const Box &whole);
bool all_to_all_pattern(const std::vector<Box> &owned, const std::vector<Box> &wanted);
std::vector<std::vector<int>> axes_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          const std::vector<size_t> &axes);

/** Every communication of one training step under `p` (which must pass validate_plan), in program order. `cache`
 *  (optional, for one graph) saves describing each op and its devices' input boxes again while its config is
 *  unchanged; the result is the same with or without it. */
Communication derive_communication(const Graph &g, const Plan &p, CommCache *cache = nullptr);

/** One tensor's part of derive_communication's output at one place of the step: what replaying that tensor emits
 *  there. Every collective, send/recv transfer and local statement comes from one tensor (an op's send/recv event
 *  gathers the transfers of all its inputs; its sync exchanges belong to the op itself), and
 *  what a tensor emits depends only on its own producer's config, its readers' configs and its sharding, so a
 *  search that changes a few ops' configs re-derives only the tensors they read or write (planner/cost/simulator.cpp). */
struct CommPiece {
  enum class At : uint8_t { data, input, end };
  /** data: the step's data reads (before op 0); input: at an input slot of `op`; end: the end of the step. */
  At at = At::input;
  OpId op = kNoOp;  // input: the reading op
  /** input: the op's input slot; end: -1 resolving a partial tensor nobody read, else the index of the assign. */
  int slot = -1;
  /** input: -1 before the op's grouped send/recv (partial resolution, collectives), else the rank whose input box
   *  this part of the send/recv assembles. */
  int rank = -1;
  std::vector<CommEvent> events;                 // rank -1
  std::vector<CommEvent::Transfer> transfers;    // rank >= 0: the send/recv's transfers
  std::vector<LocalStatement> local;
};

/** Re-derives the pieces of the tensors flagged in `tensors` (pieces[t] replaced; the others are kept): the same
 *  replay as derive_communication over those tensors alone (its buffers are replayed too, and dropped). `pieces` has
 *  one list per tensor. */
void derive_pieces(const Graph &g, const Plan &p, const std::vector<char> &tensors,
                   std::vector<std::vector<CommPiece>> &pieces, CommCache *cache = nullptr);

/** The events and local statements derive_communication gives to segment `s` of the step (op s, the data reads
 *  included for op 0; s = op count: the end of the step), in its order, from every tensor's pieces. `config` and
 *  `descs` are op s's config and descriptions (for its send/recv's rank order and its sync exchanges); at the end of
 *  the step `config` is null and `descs` unused. */
void segment_communication(const Graph &g, int s, const ParallelConfig *config,
                           const std::vector<describe::Description> &descs,
                           const std::vector<std::vector<CommPiece>> &pieces, std::vector<CommEvent> &events,
                           std::vector<LocalStatement> &local);

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
