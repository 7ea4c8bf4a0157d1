#pragma once
// The communication of one training step, derived once (DESIGN §4, §9): from a plan, every rank's collectives,
// grouped send/recv (which owner sends which box), reductions of partial tensors at their first read and local
// region copies, in program order. Codegen lowers these steps (codegen/lower.cpp); the cost model, the simulator and
// the searches price them (cost_model.h, simulator.h, planner/search/frontier_graph.cpp).
//
// The rules, applied op by op in graph order, then at the end of the step:
//   - a partial tensor is reduced at its first reader, by one collective per group of ranks that differ only along
//     its partial axes: reduce-scatter when it is f32 and the reader's ranks of the group want equal disjoint blocks
//     tiling the group's shard (each member then owns its block), else all-reduce in place; partial tensors nobody
//     reads are all-reduced at the end of the step, in tensor order;
//   - per input slot, for f32 tensors, the ranks lacking their box (not held by their own shard, not assembled
//     earlier this step) all-gather it where the ranks wanting one box own blocks tiling it, else all-to-all where the
//     remaining ranks exchange equal disjoint blocks pairwise;
//   - every other box a rank reads is its own shard, a box assembled earlier this step, a cut of its own shard (one
//     local copy), or assembled from parts by the op's one grouped send/recv: one part per distinct owned block
//     overlapping it, from the rank itself if it holds that block, else from the first owner in sharding order;
//   - at the end of the step each holder of an assign's destination copies its shard of the source.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"
#include "planner/plan/validate.h"

namespace cleave::plan {

/** One step of the derivation, with its boxes (global coordinates): what codegen lowers, in program order. */
struct CommStep {
  enum class Kind : uint8_t {
    all_reduce,      // `tensor`'s shard summed in place over `group`
    reduce_scatter,  // `whole` summed over `group`; member m keeps blocks[m]
    all_gather,      // `group` assembles `whole` from blocks[m], member m's shard
    all_to_all,      // member m sends blocks[m] ∩ wanted[j] to member j and assembles wanted[m]
    fetch,           // `rank` reads `whole` of input `slot` of `op` (from `source`)
    assign,          // `rank` copies its shard of assign `slot`'s source into its shard `whole` of `tensor`
  };
  Kind kind = Kind::fetch;
  /** The op whose input it serves; kNoOp: the end of the step. */
  OpId op = kNoOp;
  TensorId tensor = kNoTensor;
  /** fetch: the op's input slot; assign: the index of the assign in Graph::assigns. */
  int slot = -1;
  /** Collectives: the members, in communicator order. */
  std::vector<int> group;
  /** all_reduce, reduce_scatter: the shard reduced (members[0]'s); all_gather: the box gathered; fetch: the box read;
   *  assign: the box copied. */
  Box whole;
  /** reduce_scatter: each member's block of the sum; all_gather: each member's shard; all_to_all: each member's shard. */
  std::vector<Box> blocks;
  /** all_to_all: each member's box. */
  std::vector<Box> wanted;
  /** reduce_scatter, all_gather: the blocks concatenate `whole` (no copy into or out of place). */
  bool in_order = false;
  /** fetch, assign: the rank. */
  int rank = -1;
  /** fetch: the rank's own shard is the box (read in place); the box was assembled earlier this step; the rank's
   *  shard holds the box (parts[0]: cut out by a local copy); or assembled from `parts`. */
  enum class Source : uint8_t { shard, assembled, cut, parts };
  Source source = Source::parts;
  struct Part {
    int src = -1;
    /** The sender's shard, and the part of it (within `whole`) it gives. */
    Box owned, part;
  };
  /** fetch (cut, parts): src == rank is a local copy, else a transfer of the op's grouped send/recv; assign: the
   *  source's shard on `rank` (none if it holds none). */
  std::vector<Part> parts;
};

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

/** derive_communication with its steps, for codegen: `steps` receives every CommStep of the step in program order
 *  (per op: per input slot its reductions and collectives, then the fetches by rank and slot; then the end of the
 *  step's reductions and assigns). */
Communication derive_communication(const Graph &g, const Plan &p, std::vector<CommStep> &steps);

/** The steps of tensor `t` held as `from` (nothing assembled yet; reduced first if partial) when the ranks of `wants`
 *  read those boxes at one input slot: the derivation's rules for one tensor and one reader alone, for searches that
 *  price a re-split by itself (planner/search/frontier_graph.cpp). */
std::vector<CommStep> resplit_steps(const Graph &g, TensorId t, const Sharding &from, const std::map<int, Box> &wants);

}  // namespace cleave::plan
