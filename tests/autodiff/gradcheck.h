#pragma once
// Finite-difference checking of autodiff rules: build a small f64 graph, weight its outputs with fixed random
// tensors into a scalar loss, differentiate it with append_gradients, run it with the reference interpreter and
// compare every gradient element with a central difference.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave::testing {

/** Builds f64 test graphs with random data. Output shapes come from infer_output_types. */
class GraphBuilder {
 public:
  explicit GraphBuilder(uint64_t seed) : rng_(seed) {}

  /** A float input (role input) with values uniform in [lo, hi). */
  TensorId input(Shape shape, double lo = -1.0, double hi = 1.0, Role role = Role::input);
  /** An i64 input with the given values. */
  TensorId ints(Shape shape, const std::vector<int64_t> &values);
  /** Appends a forward op; `num_outputs` output tensors (a false entry in `present` leaves a slot absent). */
  std::vector<TensorId> op_multi(OpKind kind, std::vector<TensorId> ins, AttrMap attrs, std::vector<bool> present);
  TensorId op(OpKind kind, std::vector<TensorId> ins, AttrMap attrs = {});

  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  Graph g;

 private:
  std::mt19937_64 rng_;
  int counter_ = 0;
};

struct GradCheckOptions {
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
  /** At most this many elements per x are checked (evenly spaced); the rest are skipped. */
  int64_t max_elements = 400;
};

/** Adds loss = sum_i ReduceSum(outs[i] * W_i) (W_i fixed random constants), differentiates it w.r.t. every x,
 *  checks the backward ops' phase/group/role tags and compares each gradient with central differences. Reports
 *  failures through gtest with `label`. */
void check_gradients(GraphBuilder &b, const std::vector<TensorId> &outs, const std::vector<TensorId> &xs,
                     const std::string &label, const GradCheckOptions &opts = {});

}  // namespace cleave::testing
