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
//     (comm_event_seconds: α-β, or measured with a profile);
//   - transfer: one per (sender, receiver) pair of a grouped send/recv, occupying the sender's outgoing and the
//     receiver's incoming link for that pair's seconds.
// Every device has three channels, each running its tasks one at a time in program order (FIFO, as the generated
// rank program issues them): compute, send and receive (links are full duplex, as the cost model prices send/recv; a
// collective occupies both directions of each member). Dependencies follow the data: a communication task waits for
// the kernels that produced its tensor on its members (a transfer: for the sender's kernels producing any input of
// the op; a sync: for each member's kernels producing the op's inputs) and for the packing copies of the op on the
// ranks taking part, a packing copy for the kernels producing the op's inputs on its rank, an unpacking copy for the
// op's communication its rank takes part in, a kernel for the communication of its op that its device takes part in
// and for the kernels producing its inputs on its device. Data reads wait for nothing (a transfer of input data does
// not wait for its read: not modelled). A task starts when its
// dependencies and the tasks before it on its channels have ended. Compute and communication overlap where the
// dependencies allow: that is what the simulator adds to cost model v1, which sums them per device. Not modelled:
// kernel launch costs, contention between concurrent collectives on a shared link (each is priced as cost model v1
// prices it), and a sync running in the middle of its kernel (it runs before it here).
//
// Program order is fixed by the plan, not by the times, so the step is a DAG in that order and a task's times are
// max(ends of its dependencies and channel predecessors) + its seconds. Delta simulation (FlexFlow §5.3): after one
// op's config changes, the communication is derived again (a global replay mirroring codegen: one op's new boxes can
// change which collective a later reader gets), the tasks of every op whose communication, config or producers'
// devices changed are rebuilt, and times are re-propagated in program order from the rebuilt tasks only as far as
// some end time changes. Full and delta simulation compute each time by the same expression over the same task
// graph, so they agree bit for bit (tests/planner/simulator_test.cpp checks it on 1,000 random moves).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/cost_model.h"
#include "planner/plan.h"
#include "planner/topology.h"

namespace cleave::plan {

struct SimTask {
  enum class Kind : uint8_t { compute, collective, transfer, copy, data };
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

  /** Restores the state before the last set_config(s) (its plan, tasks and times) without simulating again; once. */
  void undo();

  const Plan &plan() const { return p_; }
  /** The predicted step time: the latest end of any task. */
  double makespan() const { return makespan_; }
  /** Every task, in program order. */
  std::vector<SimTask> tasks() const;
  /** Per device of the plan. */
  std::vector<DeviceBusy> busy() const;
  /** Tasks recomputed by the last set_config (for tests and tuning: how local delta simulation was). */
  int64_t last_recomputed() const { return recomputed_; }

 private:
  struct Task : SimTask {
    /** Kernels it waits for: (op, device). */
    std::vector<std::pair<OpId, int>> producers;
    /** Tasks of its own segment it waits for (indices into the segment). */
    std::vector<int> local;
    /** Channels it occupies (device * 3 + 0 compute, 1 send, 2 receive). */
    std::vector<int> channels;
  };
  /** One op's tasks (the last segment: the end of the step), communication first. */
  struct Segment {
    std::vector<Task> tasks;
    std::vector<CommEvent> events;
    std::vector<LocalStatement> local;
    /** Per device, the index of its compute task or -1. */
    std::vector<int> compute_of;
    /** The tasks waiting for each kernel (op, device) they list in `producers`, ascending. */
    std::map<std::pair<OpId, int>, std::vector<int>> waiting;
    /** Per task, the tasks of this segment that list it in `local`, ascending. */
    std::vector<std::vector<int>> local_waiting;
  };
  using Key = std::pair<int, int>;  // (segment, task index): program order

  Segment build(int s, std::vector<CommEvent> events, std::vector<LocalStatement> local);
  void insert(int s);
  void erase(int s);
  /** Recomputes the times of task `k`; true if its end changed. */
  bool time(const Key &k);
  void propagate(std::vector<Key> seeds);
  /** propagate's scratch: per segment, per task, whether it is in the work heap (all 0 between calls). */
  std::vector<std::vector<char>> queued_;
  void finish();
  void start();

  /** What set_config changed, for undo. */
  struct Undo {
    bool valid = false;
    std::vector<std::pair<size_t, ParallelConfig>> ops;
    std::vector<std::pair<size_t, Sharding>> tensors;
    std::vector<std::pair<int, Segment>> segments;
    std::vector<std::pair<Key, std::pair<double, double>>> times;
    double makespan = 0;
  };

  const Graph &g_;
  const Topology &t_;
  const Profile *profile_ = nullptr;
  Plan p_;
  CommCache comm_cache_;
  /** Per op, the config its kernels' seconds were computed for, and those seconds. */
  std::vector<ParallelConfig> compute_config_;
  std::vector<std::vector<double>> compute_seconds_;
  Undo undo_;
  std::vector<std::vector<describe::Description>> descs_;
  std::vector<size_t> op_entry_, tensor_entry_;
  /** Per op, the ops reading its outputs (the end segment is not listed). */
  std::vector<std::vector<OpId>> readers_;
  std::vector<Segment> segs_;
  std::vector<std::vector<Key>> channels_;  // per channel, its tasks in program order (sorted)
  double makespan_ = 0;
  int64_t recomputed_ = 0;
  bool recording_ = false;
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
