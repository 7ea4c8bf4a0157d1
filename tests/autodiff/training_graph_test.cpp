// append_gradients structure (accumulation, group tags, pruning) and build_training_graph (loss selection, errors,
// trainable params, optimizer steps checked against torch.optim via optim_reference.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/interp/interpreter.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"
#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

std::string user_error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  return "<no error>";
}

TEST(AppendGradients, AccumulatesATensorUsedTwice) {
  GraphBuilder b(1);
  TensorId x = b.input({2, 3});
  TensorId sq = b.op(OpKind::Mul, {x, x});         // x read twice by one op
  TensorId e = b.op(OpKind::Exp, {x});             // and once more by another
  TensorId y = b.op(OpKind::Add, {sq, e});
  int num_fwd = b.g.num_ops();
  Graph copy = b.g;
  std::map<TensorId, TensorId> grads = append_gradients(copy, y, {x});
  ASSERT_EQ(grads.count(x), 1u);
  const Op &acc = copy.op(copy.tensor(grads[x]).producer);
  EXPECT_EQ(acc.kind, OpKind::Add);
  EXPECT_EQ(acc.phase, Phase::backward);
  // The sum of x's three contributions is tagged with x's first reader.
  EXPECT_EQ(acc.group, copy.tensor(sq).producer);
  int adds = 0;
  for (OpId i = num_fwd; i < copy.num_ops(); ++i) adds += copy.op(i).kind == OpKind::Add;
  EXPECT_EQ(adds, 2);
  check_gradients(b, {y}, {x}, "x*x + exp(x)");
}

TEST(AppendGradients, GroupTagsAndNames) {
  GraphBuilder b(2);
  TensorId x = b.input({1, 2, 5, 5}), w = b.input({3, 2, 3, 3});
  TensorId c = b.op(OpKind::Conv, {x, w},
                    {{"strides", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                     {"dilations", std::vector<int64_t>{1, 1}}, {"group", int64_t{1}}});
  TensorId r = b.op(OpKind::Relu, {c});
  TensorId y = b.op(OpKind::ReduceSum, {r}, {{"axes", std::vector<int64_t>{0, 1, 2, 3}}, {"keepdims", int64_t{0}}});
  OpId conv = b.g.tensor(c).producer, relu = b.g.tensor(r).producer;
  std::map<TensorId, TensorId> grads = append_gradients(b.g, y, {x, w});
  const Graph &g = b.g;
  const Op &dx = g.op(g.tensor(grads.at(x)).producer);
  const Op &dw = g.op(g.tensor(grads.at(w)).producer);
  EXPECT_EQ(dx.kind, OpKind::ConvGradData);
  EXPECT_EQ(dw.kind, OpKind::ConvGradFilter);
  EXPECT_EQ(dx.group, conv);
  EXPECT_EQ(dw.group, conv);
  EXPECT_EQ(dx.name, g.op(conv).name + ".grad");
  EXPECT_EQ(dw.name, g.op(conv).name + ".grad.1");
  EXPECT_EQ(g.tensor(grads.at(x)).name, g.tensor(x).name + ".grad");
  EXPECT_EQ(g.tensor(grads.at(w)).name, g.tensor(w).name + ".grad");
  EXPECT_EQ(g.tensor(grads.at(x)).role, Role::grad);
  bool saw_relu_grad = false;
  for (const Op &op : g.ops())
    if (op.kind == OpKind::ReluGrad) {
      saw_relu_grad = true;
      EXPECT_EQ(op.group, relu);
    }
  EXPECT_TRUE(saw_relu_grad);
}

TEST(AppendGradients, DifferentiatesOnlyWhatIsNeeded) {
  GraphBuilder b(3);
  TensorId a = b.input({3}), c = b.input({3}), unused = b.input({3});
  TensorId idx = b.ints({2}, {0, 2});
  TensorId prod = b.op(OpKind::Mul, {a, c});
  TensorId gathered = b.op(OpKind::Gather, {prod, idx}, {{"axis", int64_t{0}}});
  TensorId y = b.op(OpKind::ReduceSum, {gathered}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}});
  b.op(OpKind::Exp, {unused});
  int num_fwd = b.g.num_ops();
  std::map<TensorId, TensorId> grads = append_gradients(b.g, y, {a, unused, idx});
  EXPECT_EQ(grads.count(a), 1u);
  EXPECT_EQ(grads.count(unused), 0u);  // y does not depend on it
  EXPECT_EQ(grads.count(idx), 0u);     // integer tensors have no gradient
  // c is not an x: its gradient (Mul(dY, a)) must not be built.
  int muls = 0;
  for (OpId i = num_fwd; i < b.g.num_ops(); ++i) muls += b.g.op(i).kind == OpKind::Mul;
  EXPECT_EQ(muls, 1);
  EXPECT_FALSE(b.g.find_tensor(b.g.tensor(c).name + ".grad").has_value());
}

TEST(AppendGradients, NoRuleIsAUserError) {
  GraphBuilder b(4);
  TensorId x = b.input({3}), dy = b.input({3});
  TensorId g1 = b.op(OpKind::ReluGrad, {dy, x});
  TensorId y = b.op(OpKind::ReduceSum, {g1}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}});
  std::string op_name = b.g.op(b.g.tensor(g1).producer).name;
  EXPECT_EQ(user_error_of([&] { append_gradients(b.g, y, {dy}); }),
            "op \"" + op_name + "\" (ReluGrad): no gradient rule, but the loss depends on it through a float input");
}

// ---- build_training_graph ----

/** The model of make_optim_reference.py: y = tanh(x @ W + b), loss = sum(y * y), float64. */
Graph reference_model() {
  Graph g;
  auto add = [&](const std::string &name, Shape shape, Role role, std::vector<double> v) {
    Tensor t;
    t.name = name;
    t.dtype = DType::f64;
    t.shape = std::move(shape);
    t.role = role;
    t.data = encode_doubles(DType::f64, v);
    return g.add_tensor(std::move(t));
  };
  std::vector<double> w, bias, x;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) w.push_back(0.5 * std::sin(4 * i + j + 1));
  for (int j = 0; j < 4; ++j) bias.push_back(0.1 * (j - 1.5));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) x.push_back(std::cos(3 * i + j));
  TensorId tw = add("W", {3, 4}, Role::param, w), tb = add("b", {4}, Role::param, bias);
  TensorId tx = add("x", {2, 3}, Role::input, x);
  auto op = [&](const std::string &name, OpKind kind, std::vector<TensorId> ins, Shape out, AttrMap attrs = {}) {
    TensorId o = g.add_tensor(name + "_out", DType::f64, std::move(out), Role::activation);
    Op p;
    p.name = name;
    p.kind = kind;
    p.inputs = std::move(ins);
    p.outputs = {o};
    p.attrs = std::move(attrs);
    g.add_op(std::move(p));
    return o;
  };
  TensorId mm = op("mm", OpKind::MatMul, {tx, tw}, {2, 4});
  TensorId pre = op("add", OpKind::Add, {mm, tb}, {2, 4});
  TensorId y = op("tanh", OpKind::Tanh, {pre}, {2, 4});
  TensorId sq = op("sq", OpKind::Mul, {y, y}, {2, 4});
  TensorId loss = op("loss", OpKind::ReduceSum, {sq}, {}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t{0}}});
  g.outputs = {y, loss};
  return g;
}

std::map<std::string, std::vector<double>> read_reference() {
  std::ifstream in(std::string(CLEAVE_SOURCE_DIR) + "/tests/autodiff/optim_reference.txt");
  EXPECT_TRUE(in.good());
  std::map<std::string, std::vector<double>> ref;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string config, step, param;
    ls >> config >> step >> param;
    std::vector<double> v;
    double d;
    while (ls >> d) v.push_back(d);
    ref[config + " " + step + " " + param] = v;
  }
  return ref;
}

TEST(BuildTrainingGraph, OptimizerStepsMatchTorch) {
  struct Config {
    std::string name;
    OptimizerConfig opt;
  };
  std::vector<Config> configs(8);
  configs[0] = {"sgd_default", {}};
  configs[1].name = "sgd_wd";
  configs[1].opt.lr = 0.1;
  configs[1].opt.weight_decay = 0.01;
  configs[2].name = "momentum_default";
  configs[2].opt.kind = "momentum";
  configs[3].name = "momentum_nesterov_wd";
  configs[3].opt.kind = "momentum";
  configs[3].opt.lr = 0.05;
  configs[3].opt.momentum = 0.8;
  configs[3].opt.nesterov = true;
  configs[3].opt.weight_decay = 0.001;
  configs[4].name = "adam_default";
  configs[4].opt.kind = "adam";
  configs[5].name = "adam_custom";
  configs[5].opt.kind = "adam";
  configs[5].opt.lr = 0.01;
  configs[5].opt.beta1 = 0.8;
  configs[5].opt.beta2 = 0.99;
  configs[5].opt.eps = 1e-6;
  configs[5].opt.weight_decay = 0.01;
  configs[6].name = "adamw_default";
  configs[6].opt.kind = "adamw";
  configs[7].name = "adamw_custom";
  configs[7].opt.kind = "adamw";
  configs[7].opt.lr = 0.01;
  configs[7].opt.weight_decay = 0.1;

  std::map<std::string, std::vector<double>> ref = read_reference();
  ASSERT_EQ(ref.size(), 32u);
  for (const Config &c : configs) {
    SCOPED_TRACE(c.name);
    Graph g = reference_model();
    TrainOptions opts;
    opts.optimizer = c.opt;
    build_training_graph(g, opts);
    EXPECT_EQ(verify_problems(g), std::vector<std::string>{});
    EXPECT_EQ(g.tensor(g.loss).name, "loss_out");
    interp::Values values = interp::initial_values(g);
    for (int64_t step = 1; step <= 2; ++step) {
      interp::Context ctx;
      ctx.step = step;
      interp::run_graph(g, values, ctx);
      interp::apply_assigns(g, values);
      for (const char *p : {"W", "b"}) {
        const std::vector<double> &want = ref.at(c.name + " " + std::to_string(step) + " " + p);
        const std::vector<double> &got = values[static_cast<size_t>(*g.find_tensor(p))]->data;
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR(got[i], want[i], 1e-12 + 1e-10 * std::abs(want[i])) << p << "[" << i << "] step " << step;
      }
      // Keep only the state the assigns carry: the next step recomputes everything else.
      interp::Values next = interp::initial_values(g);
      for (const Assign &a : g.assigns) next[static_cast<size_t>(a.dst)] = values[static_cast<size_t>(a.dst)];
      values = std::move(next);
    }
  }
}

TEST(BuildTrainingGraph, UpdateOpsStateAndOrder) {
  Graph g = reference_model();
  TrainOptions opts;
  opts.optimizer.kind = "adamw";
  build_training_graph(g, opts);
  std::vector<const Op *> updates;
  for (const Op &op : g.ops())
    if (op.phase == Phase::update) updates.push_back(&op);
  ASSERT_EQ(updates.size(), 2u);
  // Tensor-id order: W (declared first) before b.
  EXPECT_EQ(g.tensor(updates[0]->inputs[0]).name, "W");
  EXPECT_EQ(g.tensor(updates[1]->inputs[0]).name, "b");
  const Op &u = *updates[0];
  EXPECT_EQ(u.kind, OpKind::AdamUpdate);
  EXPECT_EQ(u.attr_int("decoupled"), 1);
  EXPECT_DOUBLE_EQ(u.attr_float("weight_decay"), 0.01);
  EXPECT_DOUBLE_EQ(u.attr_float("lr"), 1e-3);
  EXPECT_DOUBLE_EQ(u.attr_float("beta1"), 0.9);
  EXPECT_DOUBLE_EQ(u.attr_float("beta2"), 0.999);
  EXPECT_DOUBLE_EQ(u.attr_float("eps"), 1e-8);
  ASSERT_EQ(u.inputs.size(), 4u);
  ASSERT_EQ(u.outputs.size(), 3u);
  for (size_t i = 2; i < 4; ++i) {
    const Tensor &s = g.tensor(u.inputs[i]);
    EXPECT_EQ(s.role, Role::optimizer_state);
    EXPECT_EQ(s.shape, (Shape{3, 4}));
    std::vector<double> zeros(12, 0.0);
    EXPECT_TRUE(s.zero_init);
    EXPECT_TRUE(s.data.empty()) << "optimizer state must not allocate its bytes when the graph is built";
    EXPECT_EQ(data_as_doubles(s), zeros);
  }
  EXPECT_EQ(g.tensor(u.inputs[1]).role, Role::grad);
  ASSERT_EQ(g.assigns.size(), 6u);
  EXPECT_EQ(g.assigns[0].dst, u.inputs[0]);
  EXPECT_EQ(g.assigns[0].src, u.outputs[0]);
  EXPECT_EQ(g.assigns[1].dst, u.inputs[2]);
  EXPECT_EQ(g.assigns[2].dst, u.inputs[3]);
}

TEST(BuildTrainingGraph, FrozenAndUnreachedParamsAreNotTrained) {
  Graph g = reference_model();
  Tensor extra;
  extra.name = "unused_param";
  extra.dtype = DType::f64;
  extra.shape = {2};
  extra.role = Role::param;
  extra.data = encode_doubles(DType::f64, {1.0, 2.0});
  g.add_tensor(extra);
  TrainOptions opts;
  opts.freeze = {"b"};
  build_training_graph(g, opts);
  EXPECT_EQ(verify_problems(g), std::vector<std::string>{});
  EXPECT_EQ(g.tensor(*g.find_tensor("b")).role, Role::constant);
  int updates = 0;
  for (const Op &op : g.ops())
    if (op.phase == Phase::update) {
      ++updates;
      EXPECT_EQ(g.tensor(op.inputs[0]).name, "W");
      EXPECT_EQ(op.kind, OpKind::SGDUpdate);
      EXPECT_DOUBLE_EQ(op.attr_float("lr"), 0.01);
    }
  EXPECT_EQ(updates, 1);
  EXPECT_FALSE(g.find_tensor("b.grad").has_value());
}

TEST(BuildTrainingGraph, Errors) {
  {
    Graph g = reference_model();
    TrainOptions opts;
    opts.loss = "tanh_out";
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, opts); }),
              "loss \"tanh_out\" must be a float scalar, but is f64[2,4]");
  }
  {
    Graph g = reference_model();
    TrainOptions opts;
    opts.loss = "nope";
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, opts); }),
              "loss \"nope\" is not a graph output (outputs: \"tanh_out\" f64[2,4], \"loss_out\" f64[])");
  }
  {
    Graph g = reference_model();
    g.outputs = {g.outputs[0]};
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, {}); }),
              "no float scalar graph output to use as the loss (outputs: \"tanh_out\" f64[2,4])");
  }
  {
    Graph g = reference_model();
    TensorId mean = g.add_tensor("mean_out", DType::f64, {}, Role::activation);
    Op op;
    op.name = "mean";
    op.kind = OpKind::ReduceMean;
    op.inputs = {*g.find_tensor("tanh_out")};
    op.outputs = {mean};
    op.attrs = {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t{0}}};
    g.add_op(op);
    g.outputs.push_back(mean);
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, {}); }),
              "several float scalar outputs could be the loss (\"loss_out\", \"mean_out\"): name one with --loss");
    // Naming one resolves it.
    TrainOptions opts;
    opts.loss = "mean_out";
    build_training_graph(g, opts);
    EXPECT_EQ(g.loss, mean);
  }
  {
    Graph g = reference_model();
    TrainOptions opts;
    opts.freeze = {"W", "x", "missing"};
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, opts); }),
              "--freeze names no initializer: \"x\", \"missing\"");
  }
  {
    Graph g = reference_model();
    TrainOptions opts;
    opts.optimizer.kind = "rmsprop";
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, opts); }),
              "unknown optimizer \"rmsprop\" (expected sgd, momentum, adam or adamw)");
  }
  {
    Graph g = reference_model();
    TrainOptions opts;
    opts.optimizer.kind = "adam";
    opts.optimizer.beta1 = 1.0;
    EXPECT_EQ(user_error_of([&] { build_training_graph(g, opts); }), "optimizer adam: invalid beta1 1");
  }
}

}  // namespace
}  // namespace cleave::testing
