#pragma once
// One step of recursive partitioning (Tofu §5.2), shared by `tofu` and the baselines (planner/search/baselines.h).
//
// A plan over k = k1·k2·…·kn devices is built in n steps on one global mesh [k1, …, kn] (row-major: axis 0 is
// the most significant, so with devices numbered node by node the first step splits across the slowest link). Step s
// gives every op one more split var (or none) for mesh axis s, and every source tensor one more axis sharding.
//
// A step is costed on its representative group: the k_s devices whose coordinates on the earlier axes are all 0;
// every group of that step looks alike up to edge halos, so costs are multiplied by the number of groups. Costs are
// the bytes codegen moves (strategies.h plan_comm_bytes, evaluated on the representative group under every axis
// decided so far): what each consumer's input box needs beyond the shard its device owns, once per step per device
// and box (StepModel::Reads: the unrolled timesteps of an RNN read the same weight boxes, which codegen fetches once),
// and a ring all-reduce of every partial output over the product of its partial axes. Planning reads shapes and
// attributes only.
//
// Every op-input pair is an edge from the tensor's owner to the consumer: the owner of a produced tensor is its
// producer; of a source bound by an assign (a param, optimizer state) the producer of the assigned value, since
// codegen needs both on the same boxes; of any other source its first consumer, whose read box decides the source's
// sharding on the new axis (graph inputs and labels split on their sample axis only, as codegen reads them).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/plan/region.h"

namespace cleave::plan {

/** The decisions of the steps taken so far. */
struct PartialPlan {
  std::vector<int64_t> mesh;
  /** Per op, one var per axis of `mesh` ("" = none). */
  std::vector<std::vector<std::string>> op_vars;
  /** Per tensor (used for sources only), one sharding per axis of `mesh`. */
  std::vector<std::vector<AxisSharding>> source_axes;
};

/** An empty PartialPlan for `g` (mesh of rank 0). */
PartialPlan start_partial(const Graph &g);

/** The plan `pp` describes over devices 0..devices-1: `order` gives the device at each row-major mesh position
 *  (a permutation of 0..devices-1; empty: the identity). The result passes validate_plan. */
Plan finish_partial(const Graph &g, int devices, const PartialPlan &pp, const std::vector<int> &order = {});

class StepModel {
 public:
  struct Edge {
    OpId owner = kNoOp;
    OpId consumer = kNoOp;
    TensorId tensor = kNoTensor;
    int slot = -1;
  };

  /** The step adding an axis of size `factor` to `pp`. `partial_splits` = false forbids reduction-var splits (the
   *  icml18 baseline). */
  StepModel(const Graph &g, const std::vector<std::vector<describe::Description>> &descs, const PartialPlan &pp,
            int64_t factor, bool partial_splits);

  /** The choices of op `o` on the new axis: its splittable vars that codegen lowers, in description var order,
   *  then "" (none) last. */
  const std::vector<std::string> &choices(OpId o) const { return choices_[static_cast<size_t>(o)]; }
  /** Index of "" in choices(o). */
  int none_choice(OpId o) const { return static_cast<int>(choices(o).size()) - 1; }
  /** The choices of a planner that partitions every op (Tofu): the splits, or none when there is no split. */
  std::vector<int> partitioning_choices(OpId o) const {
    std::vector<int> r;
    for (int c = 0; c < none_choice(o); ++c) r.push_back(c);
    if (r.empty()) r.push_back(none_choice(o));
    return r;
  }
  /** Edges in consumer op order, then slot order; an edge whose owner is its consumer is folded into unary(). */
  const std::vector<Edge> &edges() const { return edges_; }
  /** Indices into edges() of the edges touching op `o` (as owner or consumer). */
  const std::vector<int> &edges_of(OpId o) const { return edges_of_[static_cast<size_t>(o)]; }
  /** Cost of op `o` alone under choice `c`: all-reduces of its partial outputs and reads of sources it owns. */
  int64_t unary(OpId o, int c);
  /** Cost of edge `e` with its owner under choice `oc` and its consumer under choice `cc`, on its own: the bytes the
   *  consumer's devices fetch, less a reduce-scatter credit. */
  int64_t edge_cost(int e, int oc, int cc);
  /** The greedy planners' cost of op `o` under choice `c` given the ops decided so far: unary(o, c) plus its edges to
   *  the ops whose entry in `choice` (one per op) is not -1, each priced by edge_cost on its own (no box reuse). */
  int64_t cost_given(OpId o, int c, const std::vector<int> &choice);

  /** The cost of a set of edges with reuse (Reads::add): codegen assembles a box of a tensor once per step on a
   *  device and hands it to every later reader of that box, so a read of a box already fetched by an edge of the
   *  set, or read by the tensor's owner itself (unary()), costs nothing more. Edges of one tensor added to one set
   *  must have their owner under one choice. */
  class Reads {
   public:
    explicit Reads(StepModel &m) : m_(m) {}
    /** Adds edge `e` (owner under `oc`, consumer under `cc`); returns what it costs beyond the edges added before. */
    int64_t add(int e, int oc, int cc);

   private:
    StepModel &m_;
    /** (tensor, device index, box id) fetched or owned-and-read already. */
    std::set<std::tuple<TensorId, int64_t, int>> seen_;
    std::set<TensorId> seeded_;
  };
  /** What the device at `index` (0..factor-1) of the representative group reads of each input of op `o` under
   *  choice `c`. */
  const std::vector<std::optional<Box>> &need(OpId o, int c, int64_t index);
  /** An id of need(o, c, index)[slot], equal for equal boxes of one model (-1 for nullopt). */
  int need_id(OpId o, int c, int64_t index, size_t slot);
  /** The box of tensor `t` the device at `index` of the representative group holds with its owner under choice
   *  `oc` (partial axes resolved). */
  const Box &own(TensorId t, int oc, int64_t index);
  /** The op owning tensor `t` (tofu_step.h header), or kNoOp for an unread source. */
  OpId owner(TensorId t) const { return owner_[static_cast<size_t>(t)]; }
  int64_t factor() const { return factor_; }

  /** Appends the chosen axis (choice per op) to `pp`, the PartialPlan this model was made from; the model is spent
   *  afterwards. */
  void commit(const std::vector<int> &choice, PartialPlan &pp);

 private:
  ParallelConfig config(OpId o, const std::string &var) const;
  /** Per device of the representative group, the elements edge `e`'s consumer fetches (owner under `oc`, consumer
   *  under `cc`). */
  const std::vector<int64_t> &fetch(int e, int oc, int cc);
  /** What a reduce-scatter into the reader's blocks saves over the all-reduce unary() charges, when codegen would
   *  use one (strategies.h plan_comm_bytes) and the tensor has no other reader. */
  int64_t reduce_scatter_credit(const Edge &edge, int oc, int cc);
  /** The sharding of tensor `t` with its owner under choice `oc` (every axis, partial axes resolved to replicate). */
  Sharding owned_sharding(TensorId t, int oc);

  const Graph &g_;
  const std::vector<std::vector<describe::Description>> &descs_;
  const PartialPlan &pp_;
  int64_t factor_ = 1, groups_ = 1, group_size_ = 1;
  std::vector<int> devices_;
  std::vector<int64_t> mesh_;
  std::vector<std::vector<std::string>> choices_;
  /** Per tensor: its owner op, and for an assign dst the tensor whose sharding it takes. */
  std::vector<OpId> owner_;
  std::vector<TensorId> owner_tensor_;
  std::vector<OpId> sole_reader_;
  /** Per tensor, its (op, input slot) reads. */
  std::vector<int> reads_;
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> edges_of_;
  struct Need {
    /** Per device of the representative group, per input slot: the box read, and its id (need_id). */
    std::vector<std::vector<std::optional<Box>>> boxes;
    std::vector<std::vector<int>> ids;
  };
  /** Per op, per choice (empty: not computed yet). */
  std::vector<std::vector<Need>> need_;
  const Need &need_entry(OpId o, int c);
  /** The ids given to boxes so far. */
  std::map<std::vector<std::pair<int64_t, int64_t>>, int> box_ids_;
  /** Per edge and choice pair, per device of the representative group: the elements its consumer fetches. */
  std::vector<std::vector<std::vector<int64_t>>> fetch_;
  /** Per tensor, per owner choice: the boxes held (empty: not computed yet). */
  std::vector<std::vector<std::vector<Box>>> own_;
  /** Memos (tofu_step.cpp kUnknown: not computed yet). */
  std::vector<std::vector<int64_t>> edge_cost_;  // per edge: [owner choice * consumer choices + consumer choice]
  std::vector<std::vector<int64_t>> unary_;      // per op: [choice]
};

/** Prime factors of `devices`, largest first (8 -> [2, 2, 2], 12 -> [3, 2, 2]); [] for 1. */
std::vector<int64_t> default_factors(int devices);

}  // namespace cleave::plan
