#pragma once
// The reference interpreter: evaluates any IR graph (forward, backward, update) with plain loops, accumulating in
// float64. It is the oracle for every later test, so it is written to be obviously correct, not fast.
//
// Values are held as doubles whatever the dtype; a value of dtype f32 (f16, bf16) is rounded to that precision after
// each op, so the interpreter computes what a float32 (float16, bfloat16) kernel with exact accumulation would.
// Integer results are truncated and wrapped to their width after each op (store_as in ir/float16.h); integer values
// are exact up to 2^53.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace cleave::interp {

struct Value {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<double> data;  // row-major, num_elements(shape) entries
};

struct Context {
  /** The training step, from 1: Adam's bias-correction t and part of Dropout's RNG key. */
  int64_t step = 1;
  /** The learning rate SGDUpdate, MomentumUpdate and AdamUpdate use for their `lr` attribute (a schedule); unset:
   *  the attribute. */
  std::function<double(double)> lr{};
  /** A validation pass (torch's model.eval()): BatchNormalization and Dropout run in inference mode whatever their
   *  training_mode attribute says. */
  bool inference = false;
  double rate(double base) const { return lr ? lr(base) : base; }
};

/** One slot per TensorId; std::nullopt = not computed/fed yet. */
using Values = std::vector<std::optional<Value>>;

/** The value a tensor's data holds (constants, loaded params). Precondition: t.data is set. */
Value value_of(const Tensor &t);
/** Empty Values for `g` with every tensor that carries data (constants, loaded params/state) filled in. */
Values initial_values(const Graph &g);
/** Runs one op: reads its inputs from `values` (all present ones must be set) and sets its outputs. Throws
 *  UserError naming the op for data-dependent errors (e.g. a Gather index out of range). */
void run_op(const Graph &g, OpId op, Values &values, const Context &ctx);
/** Runs every op in order. */
void run_graph(const Graph &g, Values &values, const Context &ctx);
/** Runs `ops` in order, dropping each computed value (an activation or gradient without data) once no later op of
 *  `ops` reads it, unless keep(t) says it is read afterwards: a step then holds its live values, not all of them. */
void run_ops(const Graph &g, const std::vector<OpId> &ops, Values &values, const Context &ctx,
             const std::function<bool(TensorId)> &keep);
/** After a step: every assign's dst (those `which` accepts, when given) takes its src's value. A src computed each step
 *  (an activation or gradient without data) that no other assign reads, and that `keep` (when given) does not ask
 *  to keep, is moved: it has no value afterwards unless it is itself a dst. */
void apply_assigns(const Graph &g, Values &values, const std::function<bool(const Assign &)> &which = {},
                   const std::function<bool(TensorId)> &keep = {});

}  // namespace cleave::interp
