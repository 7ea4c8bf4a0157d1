#pragma once
// Which dim of each tensor carries the batch: the sample axis of every input and label, followed through the ops'
// descriptions. Data-parallel splits follow it (planner/search/data_plan.h), and so does the importer where a
// rewrite would cut the batch out of a dim (frontend/transposed_weights.h).
#include <vector>

#include "ir/describe/description.h"
#include "ir/graph.h"

namespace cleave::describe {

/** Graph data with a sample axis: where batch dims start. */
inline bool is_batch_source(const Tensor &t) { return is_data(t) && !t.shape.empty(); }

/** The batch var of `op` (whose primary description is `d`) given `batch` = batch_dims(g): the var indexing a batch dim
 *  of an operand exactly (coefficient 1, no offset, no division, not indirect), operands in slot order; else the
 *  outermost factor of a batch dim an operand reads flattened (`b * T + t`, the other terms spanning less than the
 *  factor's coefficient); -1 if none. */
int batch_var(const Op &op, const Description &d, const std::vector<int> &batch);

/** Per tensor, the dim that carries the batch, or -1, computed op by op as a graph grows (the importer's): update()
 *  takes in the ops added since its last call. */
class BatchDims {
 public:
  const std::vector<int> &update(const Graph &g);

 private:
  std::vector<int> batch_;
  int tensors_seen_ = 0, ops_seen_ = 0;
};

/** Per tensor, the dim that carries the batch, or -1: the sample axis of every input and label, propagated through the
 *  ops in order (an op's batch var is a var indexing a batch dim of an operand exactly; the output dims it indexes
 *  carry the batch). */
std::vector<int> batch_dims(const Graph &g);

}  // namespace cleave::describe
