#pragma once
// The frontier planner's cost graph (frontier.h gives its rules): per op its candidate configs with their time and
// memory, per edge the re-split cost from an input owner's config to the reader's, and the plan of one candidate per
// op. Internal to planner/search: frontier.cpp searches it.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "planner/cost/profile.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"
#include "planner/search/frontier_solve.h"

namespace cleave::plan {

class FrontierGraphBuilder {
 public:
  /** The configs of every op of `g` over `devices` devices of `t`, priced with `profile` where given (may be null). */
  FrontierGraphBuilder(const Graph &g, int devices, const Topology &t, const Profile *profile = nullptr);
  ~FrontierGraphBuilder();
  FrontierGraphBuilder(FrontierGraphBuilder &&) noexcept;

  /** Adds `seed`'s per-op configs to the candidates where the enumeration lacks them. */
  void add_seed(const Plan &seed);
  /** Prices ops' configs and edges ahead, until `stop` (cost_graph prices what is left). */
  void price_ahead(const std::atomic<bool> &stop);
  /** The graph FT solves. */
  ft::CostGraph cost_graph();
  /** The plan of one candidate per op. */
  Plan plan(const std::vector<int> &choice);
  /** Per op, the index of the candidate with the same var ranges on every device as its config in `p`, or -1. */
  std::vector<int> match(const Plan &p);
  int64_t total_configs() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/** Runs `first` on a second thread while `second` runs on this one (one after the other where there is one core),
 *  then rethrows what `first` threw, else what `second` threw. Each writes only its own variables. */
void side_by_side(const std::function<void()> &first, const std::function<void()> &second);

}  // namespace cleave::plan
