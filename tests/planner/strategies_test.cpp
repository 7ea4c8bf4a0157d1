// Executes every discovered strategy (planner/search/strategies.h) of every op kind's example: each worker evaluates its
// restricted share of the description on inputs cut to exactly the boxes region analysis says it reads (everything
// else poisoned with NaN), the shares are concatenated (output var) or summed (reduction var), and the result must
// equal the reference interpreter's kernel run on the whole op. This checks the descriptions, region analysis and
// the split semantics against the kernels. (The interpreter is the reference every runtime/cpu kernel is tested
// against, and the one reachable from planner tests; synced splits are skipped: their kernels exchange statistics,
// which a restricted description does not.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "ir/describe/description.h"
#include "ir/describe/evaluate.h"
#include "ir/interp/interpreter.h"
#include "planner/plan/region.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Affine;
using describe::Description;
using describe::Expr;
using describe::ExprPtr;
using describe::SplitKind;

/** Inputs valid for the op (as tests/describe/description_vs_interp_test.cpp makes them): indices and labels in
 *  range, positive values where a function needs them, x > 1 for Acosh, the step T = 3. */
interp::Value random_input(const Graph &g, const Op &op, size_t slot, std::mt19937 &rng) {
  const Tensor &t = g.tensor(op.inputs[slot]);
  interp::Value v{t.dtype, t.shape, std::vector<double>(static_cast<size_t>(num_elements(t.shape)))};
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int64_t lo, int64_t hi) {
    return static_cast<double>(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
  };
  for (double &x : v.data) {
    if (t.dtype == DType::boolean) {
      x = integer(0, 1);
    } else if (t.dtype == DType::i64 || t.dtype == DType::i32) {
      if (op.kind == OpKind::Gather || op.kind == OpKind::GatherGrad) {
        int64_t axis = op.attr_int("axis", 0);
        TensorId data = op.kind == OpKind::Gather ? op.inputs[0] : op.outputs[0];
        int64_t dim = g.tensor(data).shape[static_cast<size_t>(axis)];
        x = integer(-dim, dim - 1);
      } else if (t.shape.empty()) {
        x = 3;
      } else if (op.kind == OpKind::Cast || op.kind == OpKind::Equal || op.kind == OpKind::Less ||
                 op.kind == OpKind::Greater || op.kind == OpKind::LessOrEqual || op.kind == OpKind::GreaterOrEqual) {
        x = integer(-2, 2);
      } else {
        int64_t classes = g.tensor(op.inputs[slot == 1 ? 0 : 1]).shape[1];
        x = integer(0, classes - 1);
      }
    } else {
      bool positive = op.kind == OpKind::Log || op.kind == OpKind::Sqrt || op.kind == OpKind::Pow ||
                      op.kind == OpKind::PowGrad || op.kind == OpKind::SqrtGrad ||
                      (op.kind == OpKind::BatchNormalization && slot == 4);
      bool second_moment = (op.kind == OpKind::AdamUpdate && slot == 3) ||
                           ((op.kind == OpKind::Adam || op.kind == OpKind::Adagrad) && t.name.rfind("H", 0) == 0);
      x = positive ? uniform(0.5, 2.0) : second_moment ? uniform(0.0, 1.0) : uniform(-1.0, 1.0);
      if (op.kind == OpKind::Acosh || (op.kind == OpKind::AcoshGrad && slot == 1)) x = uniform(1.1, 3.0);  // x >= 1
      if (t.dtype == DType::f32) x = static_cast<float>(x);
    }
  }
  return v;
}

Affine shifted(const Affine &a, const std::vector<Interval> &ranges) {
  Affine r = a;
  for (const auto &[v, coef] : a.terms) r.constant += coef * ranges[static_cast<size_t>(v)].begin;
  return r;
}

ExprPtr shifted(const ExprPtr &e, const std::vector<Interval> &ranges) {
  if (!e) return e;
  auto out = std::make_shared<Expr>(*e);
  out->affine = shifted(e->affine, ranges);
  for (describe::Index &i : out->index) {
    i.affine = shifted(i.affine, ranges);
    i.indirect = shifted(i.indirect, ranges);
  }
  for (ExprPtr &a : out->args) a = shifted(a, ranges);
  return out;
}

/** `d` with every var restricted to its range: var v iterates [0, size) and stands for v + begin. */
Description restricted(const Description &d, const std::vector<Interval> &ranges) {
  Description r = d;
  for (size_t v = 0; v < r.vars.size(); ++v) r.vars[v].extent = ranges[v].size();
  for (Affine &a : r.output_index) a = shifted(a, ranges);
  r.body = shifted(d.body, ranges);
  r.post = shifted(d.post, ranges);
  return r;
}

bool contains(const Box &outer, const Box &inner) {
  if (box_empty(inner)) return true;
  for (size_t d = 0; d < outer.size(); ++d)
    if (inner[d].begin < outer[d].begin || inner[d].end > outer[d].end) return false;
  return true;
}

/** Input `v` with every element outside `box` poisoned (NaN; 0 for integer data, which indexes). */
std::vector<double> cut(const interp::Value &v, const std::optional<Box> &box) {
  std::vector<double> out = v.data;
  bool integral = v.dtype != DType::f32 && v.dtype != DType::f64;
  double poison = integral ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  std::vector<int64_t> idx(v.shape.size());
  for (size_t flat = 0; flat < out.size(); ++flat) {
    int64_t r = static_cast<int64_t>(flat);
    bool inside = box.has_value();
    for (size_t d = v.shape.size(); d-- > 0;) {
      int64_t i = r % v.shape[d];
      r /= v.shape[d];
      if (inside && (i < (*box)[d].begin || i >= (*box)[d].end)) inside = false;
    }
    if (!inside) out[flat] = poison;
  }
  return out;
}

/** Runs every strategy of the single op of `g` split `ways` ways; returns how many were executed. */
int check_strategies(const Graph &g, int ways) {
  const Op &op = g.op(0);
  std::mt19937 rng(7);
  interp::Values values = interp::initial_values(g);
  for (size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] != kNoTensor) values[static_cast<size_t>(op.inputs[i])] = random_input(g, op, i, rng);
  interp::Context ctx;
  ctx.step = 3;
  interp::run_op(g, 0, values, ctx);
  std::vector<Description> descs = describe::describe(g, op);
  int executed = 0;
  for (const Strategy &s : discover_strategies(g, op, ways)) {
    SCOPED_TRACE("split " + s.var + " " + std::to_string(ways) + " ways");
    EXPECT_TRUE(config_problems(g, op, descs, s.config, ways).empty());
    if (s.kind == SplitKind::synced) continue;
    for (const Description &d : descs) {
      TensorId out_t = op.output(static_cast<size_t>(d.output_slot));
      if (out_t == kNoTensor || !d.body || !describe::is_evaluable(d)) continue;
      SCOPED_TRACE(to_string(d));
      const interp::Value &want = *values[static_cast<size_t>(out_t)];
      std::vector<double> got(want.data.size(), 0.0);
      std::vector<int> written(want.data.size(), 0);
      bool partial = false;
      for (int w = 0; w < ways; ++w) {
        std::vector<Interval> ranges = var_ranges(d, s.config, w);
        OpRegion region = op_region(d, ranges);
        partial = region.partial;
        EXPECT_EQ(region.output, s.outputs[static_cast<size_t>(w)][static_cast<size_t>(d.output_slot)]);
        std::vector<std::vector<double>> cuts(op.inputs.size());
        std::vector<describe::EvalInput> ins(op.inputs.size());
        for (const OperandRegion &o : region.operands) {
          size_t slot = static_cast<size_t>(o.slot);
          std::optional<Box> box;
          if (!box_empty(o.box)) box = o.box;
          // The worker's fetch (all outputs' hull) covers what this output reads.
          const std::optional<Box> &fetched = s.inputs[static_cast<size_t>(w)][slot];
          if (box) {
            EXPECT_TRUE(fetched && contains(*fetched, *box));
          }
          const interp::Value &v = *values[static_cast<size_t>(op.inputs[slot])];
          if (std::getenv("CLEAVE_TEST_SHRINK") && box && (*box)[0].size() > 1) --(*box)[0].end;  // self-check
          cuts[slot] = cut(v, box);
          ins[slot] = {v.shape, &cuts[slot]};
        }
        std::vector<double> share = describe::evaluate(restricted(d, ranges), ins, ctx.step);
        for (size_t flat = 0; flat < share.size(); ++flat) {
          if (partial) {
            got[flat] += share[flat];
            continue;
          }
          int64_t r = static_cast<int64_t>(flat);
          bool inside = true;
          for (size_t k = want.shape.size(); k-- > 0;) {
            int64_t i = r % want.shape[k];
            r /= want.shape[k];
            if (i < region.output[k].begin || i >= region.output[k].end) inside = false;
          }
          if (!inside) continue;
          got[flat] = share[flat];
          ++written[flat];
        }
      }
      int bad = 0;
      for (size_t i = 0; i < got.size() && bad < 5; ++i) {
        double tol = 1e-6 + 2e-6 * std::abs(want.data[i]);
        if (!partial && written[i] != 1) {
          ADD_FAILURE() << "element " << i << " written by " << written[i] << " workers";
          ++bad;
        } else if (!(std::abs(got[i] - want.data[i]) <= tol)) {
          ADD_FAILURE() << "element " << i << ": split " << got[i] << ", whole " << want.data[i];
          ++bad;
        }
      }
    }
    ++executed;
  }
  return executed;
}

TEST(Strategies, EveryExampleKindSplitTwoAndThreeWays) {
  int executed = 0, kinds = 0;
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    Graph g = describe::example_op(kind);
    int n = check_strategies(g, 2) + check_strategies(g, 3);
    executed += n;
    if (n > 0) ++kinds;
  }
  std::printf("executed %d strategies of %d op kinds\n", executed, kinds);
  EXPECT_GE(kinds, 60);
}

TEST(Strategies, KindsOfSplits) {
  // MatMul: output vars concatenate, the summed var (k = 3) gives partial sums; Conv's spatial split reads a halo.
  Graph matmul = describe::example_op(OpKind::MatMul);
  bool concat = false, partial = false;
  for (int ways : {2, 3})
    for (const Strategy &s : discover_strategies(matmul, matmul.op(0), ways)) {
      concat |= s.kind == SplitKind::concat;
      partial |= s.kind == SplitKind::partial;
    }
  EXPECT_TRUE(concat && partial);
  Graph conv = describe::example_op(OpKind::Conv);
  bool halo = false;
  for (const Strategy &s : discover_strategies(conv, conv.op(0), 2)) halo |= s.halo;
  EXPECT_TRUE(halo);
}

}  // namespace
}  // namespace cleave::plan
