#pragma once
// The task-graph simulator (FlexFlow §5): one training step of a plan as tasks on devices and links, their start and
// end times, and the step's makespan.
//
// Tasks, in program order (the step's data reads first; per op its packing copies, its communication, its unpacking
// copies, then its kernels; the end-of-step communication and the assigns' copies last):
//   - compute: one per device the op runs on, lasting the cost model's seconds for that device's share
//     (cost_model.h op_compute_seconds: roofline, or measured with a profile);
//   - data, copy: one per local statement of derive_communication (cost_model.h LocalStatement), on its rank's
//     compute channel (the CPU runs them), lasting local_seconds;
//   - collective: one per all-reduce, reduce-scatter, all-gather, all-to-all or in-kernel sync that
//     derive_communication (cost_model.h) derives, occupying every member's link for its seconds
//     (comm_event_seconds: α-β, or measured with a profile); with a profile measured on the cpu backend also every
//     member's compute channel (MPI collectives block the CPU, and the cpu backend runs a started all-reduce at its
//     wait: runtime rt.h), so no kernel overlaps it there;
//   - transfer: one per (sender, receiver) pair of a grouped send/recv, occupying the sender's outgoing and the
//     receiver's incoming link for that pair's seconds;
//   - issue: with a profile's statement_gap (below), one per rank taking part in a grouped send/recv, on its compute
//     channel for the gap (the rank issuing the group), before that rank's transfers of the group.
// Every device has three channels, each running its tasks one at a time in program order (FIFO, as the generated
// rank program issues them): compute, send and receive (links are full duplex, as the cost model prices send/recv; a
// collective occupies both directions of each member). Dependencies follow the data: a communication task waits for
// the kernels that produced its tensor on its members (a transfer: for the sender's kernels producing any input of
// the op, and for the issue tasks of its sender and receiver; a sync: for each member's kernels producing the op's
// inputs) and for the packing copies of the op on the ranks taking part, a packing copy for the kernels producing the op's inputs on its rank, an unpacking copy for the
// op's communication its rank takes part in, a kernel for the communication of its op that its device takes part in
// and for the kernels producing its inputs on its device. Data reads wait for nothing (a transfer of input data does
// not wait for its read: not modelled). A task starts when its
// dependencies and the tasks before it on its channels have ended. Compute and communication overlap where the
// dependencies allow: that is what the simulator adds to cost model v1, which sums them per device. With a profile,
// compute, data, copy and collective tasks each last its statement_gap longer (profile.h; kernel launches on a GPU),
// and a grouped send/recv costs each rank taking part one issue task of the gap, as estimate_cost charges one gap per
// rank and event; busy() counts them (issue tasks as communication), so each device's busy seconds grow by the gap
// times DeviceCost::statements. Not modelled:
// contention between concurrent collectives on a shared link (each is priced as cost model v1
// prices it), and a sync running in the middle of its kernel (it runs before it here).
//
// Program order is fixed by the plan, not by the times, so the step is a DAG in that order and a task's times are
// max(ends of its dependencies and channel predecessors) + its seconds. Delta simulation (FlexFlow §5.3): after some
// ops' configs change, the communication of the tensors they read or write is derived again (cost_model.h CommPiece:
// what codegen emits for a tensor depends only on its sharding, its producer's and its readers' configs, but one
// reader's new boxes can change which collective a later reader gets, so each such tensor is replayed whole), the
// segments holding any of it are assembled again, the tasks of every op whose communication, config or producers'
// devices changed are rebuilt, and every task from the first rebuilt one on is timed again in one pass in program
// order. The pass carries each channel's last end, so a task's time costs a few loads; it starts from a checkpoint
// of those ends (one per 16 segments) at or before the first rebuilt segment. Timing only the tasks whose inputs
// changed saved little: a change early in the step moves most later tasks, and the pass is cheaper per task than
// the bookkeeping that would find them. Full and delta simulation compute each time by the same expression over the
// same task graph, so they agree bit for bit (tests/planner/simulator_test.cpp checks it on 1,000 random moves).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/cost/cost_model.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"

namespace cleave::plan {

struct SimTask {
  enum class Kind : uint8_t { compute, collective, transfer, copy, data, issue };
  Kind kind = Kind::compute;
  /** The op whose kernel it is or before whose kernel it communicates; kNoOp: the end of the step. */
  OpId op = kNoOp;
  /** collective, transfer: the CommEvent's kind and tensor (kNoTensor for send/recv and sync). */
  CommEvent::Kind comm = CommEvent::Kind::send_recv;
  TensorId tensor = kNoTensor;
  /** compute, copy, data: the device; transfer: the sender; collective: -1. */
  int device = -1;
  /** transfer: the receiver. */
  int peer = -1;
  /** collective: the members. */
  std::vector<int> members;
  double seconds = 0, start = 0, end = 0;
};

struct DeviceBusy {
  /** Seconds of compute tasks, and of communication tasks the device takes part in. */
  double compute_seconds = 0, comm_seconds = 0;
  /** Seconds of its copy and data tasks. */
  double local_seconds = 0;
};

/** A plan's step as a task graph on a topology, kept up to date under config changes (delta simulation). */
class Simulator {
 public:
  /** Full simulation of `p` (which must pass validate_plan) on `t`; throws UserError if the plan uses more devices
   *  than the topology has. With a `profile`, task seconds are measured where it has them (as estimate_cost takes
   *  them). `g`, `t` and `profile` must outlive the simulator. */
  Simulator(const Graph &g, Plan p, const Topology &t, const Profile *profile = nullptr);
  /** The same with every op's descriptions given (descs[o] = describe::describe(g, g.op(o))), saving describing
   *  them again when simulating many plans of one graph. */
  Simulator(const Graph &g, Plan p, const Topology &t, const std::vector<std::vector<describe::Description>> &descs,
            const Profile *profile = nullptr);

  /** Op `o` takes `config` (which must pass config_problems); its outputs take the shardings it implies, and a
   *  source bound by an assign to one of them takes that sharding with partial axes replicated (codegen copies the
   *  update shard to shard). Then delta simulation. */
  void set_config(OpId o, const ParallelConfig &config);
  /** Several ops' configs at once (in order; one derivation of the communication, one delta simulation). */
  void set_configs(const std::vector<std::pair<OpId, ParallelConfig>> &changes);

  /** Restores the state before the last set_config(s) (its plan, tasks and times; once): the old tasks come back
   *  without being derived again, and are re-timed from the first of them. */
  void undo();

  const Plan &plan() const { return p_; }
  /** The predicted step time: the latest end of any task. */
  double makespan() const { return makespan_; }
  /** Every task, in program order. */
  std::vector<SimTask> tasks() const;
  /** Per device of the plan. */
  std::vector<DeviceBusy> busy() const;
  /** Tasks re-timed by the last set_config(s) or undo (for tests and tuning: how local delta simulation was). */
  int64_t last_recomputed() const { return recomputed_; }

 private:
  struct Task : SimTask {
    /** Kernels it waits for: (op, device). */
    std::vector<std::pair<OpId, int>> producers;
    /** Tasks of its own segment it waits for (indices into the segment, all before it). */
    std::vector<int> local;
    /** Channels it occupies (device * 3 + 0 compute, 1 send, 2 receive); at least one. */
    std::vector<int> channels;
  };
  /** One op's tasks (the last segment: the end of the step), communication first. */
  struct Segment {
    std::vector<Task> tasks;
    std::vector<CommEvent> events;
    std::vector<LocalStatement> local;
    /** Per device, the index of its compute task or -1. */
    std::vector<int> compute_of;
  };

  /** Segment s's communication, assembled from pieces_. */
  void merge(int s, std::vector<CommEvent> &events, std::vector<LocalStatement> &local) const;
  Segment build(int s, std::vector<CommEvent> events, std::vector<LocalStatement> local);
  /** Times every task from segment `from` (or the checkpoint before it) to the end of the step, and the makespan. */
  void sweep(int from);
  /** Full simulation: derives the communication, builds every segment, times them all. */
  void start();

  /** What set_config changed, for undo. */
  struct Undo {
    bool valid = false;
    std::vector<std::pair<size_t, ParallelConfig>> ops;
    std::vector<std::pair<size_t, Sharding>> tensors;
    std::vector<std::pair<int, Segment>> segments;
    std::vector<std::pair<TensorId, std::vector<CommPiece>>> pieces;
  };

  const Graph &g_;
  const Topology &t_;
  const Profile *profile_ = nullptr;
  /** Measured on the cpu backend: collectives hold their members' compute channels too (build()). */
  bool blocking_collectives_ = false;
  Plan p_;
  CommCache comm_cache_;
  /** Per tensor, its part of the step's communication (cost_model.h derive_pieces). */
  std::vector<std::vector<CommPiece>> pieces_;
  /** Per op, the config its kernels' seconds were computed for, and those seconds. */
  std::vector<ParallelConfig> compute_config_;
  std::vector<std::vector<double>> compute_seconds_;
  Undo undo_;
  std::vector<std::vector<describe::Description>> descs_;
  std::vector<size_t> op_entry_, tensor_entry_;
  /** Per op, the ops reading its outputs (the end segment is not listed). */
  std::vector<std::vector<OpId>> readers_;
  /** Per tensor, the ops reading it, ascending. */
  std::vector<std::vector<OpId>> tensor_readers_;
  std::vector<Segment> segs_;
  /** Segments between two checkpoints: a sweep starts at most this many segments before the first changed one. */
  static constexpr size_t kCheckpointEvery = 16;
  /** Per checkpoint (segment c * kCheckpointEvery), per channel, the end of its last task in the segments before. */
  std::vector<std::vector<double>> checkpoints_;
  double makespan_ = 0;
  int64_t recomputed_ = 0;
};

/** Full simulation of `p` on `t` (with measured times from `profile` where it has them). */
inline Simulator simulate(const Graph &g, const Plan &p, const Topology &t, const Profile *profile = nullptr) {
  return Simulator(g, p, t, profile);
}

/** The timeline as text, one task per line in program order (deterministic: fixed-format numbers):
 *  `<start_s> <end_s> <where> <kind> <name>` after a header line with the makespan; `where` is `d<N>` for a kernel,
 *  `d<S>->d<R>` for a transfer, `d<A>+d<B>+...` for a collective. */
std::string timeline_text(const Graph &g, const Simulator &sim);
/** The timeline as SVG: rows per device (compute, send, receive), one box per task on each row it occupies. */
std::string timeline_svg(const Graph &g, const Simulator &sim);

}  // namespace cleave::plan
