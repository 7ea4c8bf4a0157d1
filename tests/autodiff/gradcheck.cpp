#include "tests/autodiff/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ir/autodiff/autodiff.h"
#include "ir/interp/interpreter.h"
#include "ir/shape_rules.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"

namespace cleave::testing {

TensorId GraphBuilder::input(Shape shape, double lo, double hi, Role role) {
  Tensor t;
  t.name = "x" + std::to_string(counter_++);
  t.dtype = DType::f64;
  t.shape = std::move(shape);
  t.role = role;
  std::vector<double> v(static_cast<size_t>(num_elements(t.shape)));
  for (double &x : v) x = uniform(lo, hi);
  t.data = encode_doubles(DType::f64, v);
  return g.add_tensor(std::move(t));
}

TensorId GraphBuilder::ints(Shape shape, const std::vector<int64_t> &values) {
  Tensor t;
  t.name = "i" + std::to_string(counter_++);
  t.dtype = DType::i64;
  t.shape = std::move(shape);
  t.role = Role::input;
  t.data = encode_ints(DType::i64, values);
  return g.add_tensor(std::move(t));
}

std::vector<TensorId> GraphBuilder::op_multi(OpKind kind, std::vector<TensorId> ins, AttrMap attrs,
                                             std::vector<bool> present) {
  Op op;
  op.name = std::string(op_kind_name(kind)) + "_" + std::to_string(counter_++);
  op.kind = kind;
  op.inputs = std::move(ins);
  op.attrs = std::move(attrs);
  op.outputs.assign(present.size(), kNoTensor);
  std::vector<TensorType> types = infer_output_types(g, op);
  for (size_t i = 0; i < present.size(); ++i)
    if (present[i])
      op.outputs[i] = g.add_tensor(op.name + ".out" + std::to_string(i), types.at(i).dtype, types.at(i).shape,
                                   Role::activation);
  std::vector<TensorId> outs = op.outputs;
  g.add_op(std::move(op));
  return outs;
}

TensorId GraphBuilder::op(OpKind kind, std::vector<TensorId> ins, AttrMap attrs) {
  return op_multi(kind, std::move(ins), std::move(attrs), {true})[0];
}

namespace {

double loss_value(const Graph &g, const interp::Values &base, int num_fwd_ops, TensorId loss, TensorId x,
                  size_t element, double delta) {
  interp::Values v = base;
  v[static_cast<size_t>(x)]->data[element] += delta;
  interp::Context ctx;
  for (OpId i = 0; i < num_fwd_ops; ++i) interp::run_op(g, i, v, ctx);
  return v[static_cast<size_t>(loss)]->data.at(0);
}

}  // namespace

void check_gradients(GraphBuilder &b, const std::vector<TensorId> &outs, const std::vector<TensorId> &xs,
                     const std::string &label, const GradCheckOptions &opts) {
  SCOPED_TRACE(label);
  Graph &g = b.g;
  // loss = sum_i sum(out_i * W_i): random weights make every output element matter with a distinct factor.
  TensorId loss = kNoTensor;
  for (TensorId out : outs) {
    Shape shape = g.tensor(out).shape;
    TensorId w = b.input(shape, -1.0, 1.0, Role::constant);
    TensorId prod = b.op(OpKind::Mul, {out, w});
    TensorId s = prod;
    if (!shape.empty()) {
      std::vector<int64_t> axes(shape.size());
      std::iota(axes.begin(), axes.end(), 0);
      s = b.op(OpKind::ReduceSum, {prod}, {{"axes", axes}, {"keepdims", int64_t{0}}});
    }
    loss = loss == kNoTensor ? s : b.op(OpKind::Add, {loss, s});
  }
  const int num_fwd_ops = g.num_ops();
  std::map<TensorId, TensorId> grads = append_gradients(g, loss, xs);

  // The verifier covers the graph invariants and every new op's shape rule against the shapes autodiff chose.
  for (const std::string &p : verify_problems(g)) ADD_FAILURE() << "verifier: " << p;
  // Tags: every new op is backward and names a forward op as its group; every gradient is a grad tensor.
  for (OpId i = num_fwd_ops; i < g.num_ops(); ++i) {
    const Op &op = g.op(i);
    EXPECT_EQ(op.phase, Phase::backward) << op.name;
    ASSERT_TRUE(op.group >= 0 && op.group < num_fwd_ops) << op.name << " group " << op.group;
    EXPECT_EQ(g.op(op.group).phase, Phase::forward) << op.name;
    for (TensorId t : op.outputs) {
      if (t != kNoTensor) {
        EXPECT_EQ(g.tensor(t).role, Role::grad) << g.tensor(t).name;
      }
    }
  }

  interp::Values base = interp::initial_values(g);
  interp::Values full = base;
  interp::Context ctx;
  interp::run_graph(g, full, ctx);
  double loss0 = full[static_cast<size_t>(loss)]->data.at(0);
  EXPECT_TRUE(std::isfinite(loss0));

  for (TensorId x : xs) {
    const Tensor &xt = g.tensor(x);
    auto it = grads.find(x);
    ASSERT_NE(it, grads.end()) << "no gradient for " << xt.name;
    const interp::Value &gv = *full[static_cast<size_t>(it->second)];
    ASSERT_EQ(gv.shape, xt.shape) << "gradient of " << xt.name;
    size_t n = static_cast<size_t>(num_elements(xt.shape));
    size_t stride = std::max<size_t>(1, n / static_cast<size_t>(opts.max_elements));
    int failures = 0;
    for (size_t j = 0; j < n && failures < 5; j += stride) {
      double plus = loss_value(g, base, num_fwd_ops, loss, x, j, opts.eps);
      double minus = loss_value(g, base, num_fwd_ops, loss, x, j, -opts.eps);
      double numeric = (plus - minus) / (2 * opts.eps);
      double analytic = gv.data[j];
      if (!(std::abs(analytic - numeric) <= opts.atol + opts.rtol * std::abs(numeric))) {
        ++failures;
        ADD_FAILURE() << "d loss / d " << xt.name << "[" << j << "]: autodiff " << analytic << ", finite difference "
                      << numeric;
      }
    }
  }
}

}  // namespace cleave::testing
