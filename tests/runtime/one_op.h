#pragma once
// Differential testing of the runtime's CPU kernels against the reference interpreter, in the style of ggml's
// test-backend-ops: each case has a stable printable name and an error bound; the reference is one IR op run by
// cleave::interp::run_op on the same random float32 inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cleave/rt.h"
#include "ir/graph.h"
#include "ir/interp/interpreter.h"

namespace cleave::rt::testing {

/** A graph holding a single op, its inputs fed, its outputs computed by the interpreter. */
struct OneOp {
  Graph g;
  interp::Values values;
  std::vector<TensorId> ins, outs;

  /** Adds input i (the data is rounded to float, so the kernel under test and the reference see the same values). */
  TensorId in(const Shape &shape, const std::vector<double> &data, DType dtype = DType::f32) {
    TensorId id = g.add_tensor("in" + std::to_string(ins.size()), dtype, shape, Role::input);
    values.resize(static_cast<size_t>(g.num_tensors()));
    values[static_cast<size_t>(id)] = interp::Value{dtype, shape, data};
    ins.push_back(id);
    return id;
  }
  void absent_in() { ins.push_back(kNoTensor); }
  TensorId out(const Shape &shape, DType dtype = DType::f32) {
    TensorId id = g.add_tensor("out" + std::to_string(outs.size()), dtype, shape, Role::activation);
    outs.push_back(id);
    return id;
  }
  void absent_out() { outs.push_back(kNoTensor); }
  /** Runs the op; returns the values of its outputs (empty for absent ones). */
  std::vector<std::vector<double>> run(OpKind kind, AttrMap attrs = {}, int64_t step = 1) {
    Op op;
    op.name = "op";
    op.kind = kind;
    op.inputs = ins;
    op.outputs = outs;
    op.attrs = std::move(attrs);
    OpId id = g.add_op(op);
    values.resize(static_cast<size_t>(g.num_tensors()));
    interp::Context ctx;
    ctx.step = step;
    interp::run_op(g, id, values, ctx);
    std::vector<std::vector<double>> res;
    for (TensorId t : outs) res.push_back(t == kNoTensor ? std::vector<double>{} : values[static_cast<size_t>(t)]->data);
    return res;
  }
};

/** Seeded uniform floats in [lo, hi), returned as doubles holding exact float values. */
inline std::vector<double> random_data(std::mt19937 &rng, int64_t n, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<float> u(static_cast<float>(lo), static_cast<float>(hi));
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v) x = u(rng);
  return v;
}
inline std::vector<float> to_f32(const std::vector<double> &v) { return std::vector<float>(v.begin(), v.end()); }
inline std::vector<int64_t> to_i64(const std::vector<double> &v) { return std::vector<int64_t>(v.begin(), v.end()); }
inline int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

/** Largest |got - want| / (1 + |want|); NaN in exactly one of them counts as infinite. */
inline double max_error(const std::vector<float> &got, const std::vector<double> &want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
      continue;
    }
    err = std::max(err, std::fabs(got[i] - want[i]) / (1 + std::fabs(want[i])));
  }
  return err;
}

/** A test case: stable name, error bound, and a body returning its largest error over every compared output. */
struct KernelCase {
  std::string name;
  double bound = 1e-5;
  std::function<double()> run;
};

/** Runs every case, prints `NAME: OK (err E)` like test-backend-ops, and fails the test naming each bad case. */
inline void run_cases(const std::vector<KernelCase> &cases) {
  for (const KernelCase &c : cases) {
    double err = c.run();
    bool ok = err <= c.bound;
    std::printf("  %s: %s (err %.3g, bound %.3g)\n", c.name.c_str(), ok ? "OK" : "FAIL", err, c.bound);
    EXPECT_TRUE(ok) << c.name << ": error " << err << " exceeds " << c.bound;
  }
}

inline std::string dims_str(const std::vector<int64_t> &d) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < d.size(); ++i) s << (i ? "," : "") << d[i];
  s << ']';
  return s.str();
}

}  // namespace cleave::rt::testing
