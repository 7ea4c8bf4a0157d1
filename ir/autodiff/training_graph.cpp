// build_training_graph: loss selection, trainable params, backward pass, optimizer update ops and their state.
//
// Order: params are updated in tensor-id order (the order of the model's initializers), so the update ops, their
// state tensors and the assigns come out the same for the same model.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

bool is_scalar(const Tensor &t) { return num_elements(t.shape) == 1; }

std::string describe_outputs(const Graph &g) {
  std::ostringstream os;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Tensor &t = g.tensor(g.outputs[i]);
    os << (i ? ", " : "") << "\"" << t.name << "\" " << dtype_name(t.dtype) << shape_str(t.shape);
  }
  return g.outputs.empty() ? std::string("none") : os.str();
}

TensorId select_loss(const Graph &g, const std::string &name) {
  if (!name.empty()) {
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(),
                           [&](TensorId t) { return g.tensor(t).name == name; });
    if (it == g.outputs.end())
      CLEAVE_USER_ERROR("loss \"", name, "\" is not a graph output (outputs: ", describe_outputs(g), ")");
    const Tensor &t = g.tensor(*it);
    if (!is_float(t.dtype) || !is_scalar(t))
      CLEAVE_USER_ERROR("loss \"", name, "\" must be a float scalar, but is ", dtype_name(t.dtype),
                        shape_str(t.shape));
    return *it;
  }
  std::vector<TensorId> candidates;
  for (TensorId t : g.outputs)
    if (is_float(g.tensor(t).dtype) && is_scalar(g.tensor(t))) candidates.push_back(t);
  if (candidates.size() == 1) return candidates[0];
  if (candidates.empty())
    CLEAVE_USER_ERROR("no float scalar graph output to use as the loss (outputs: ", describe_outputs(g), ")");
  std::string names;
  for (TensorId t : candidates) names += (names.empty() ? "\"" : ", \"") + g.tensor(t).name + "\"";
  CLEAVE_USER_ERROR("several float scalar outputs could be the loss (", names, "): name one with --loss");
}

void check_hyper(const char *what, double v, double lo, bool lo_open, double hi, bool hi_open,
                 const std::string &opt) {
  bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok) CLEAVE_USER_ERROR("optimizer ", opt, ": invalid ", what, " ", v);
}

struct Optimizer {
  OpKind kind;
  AttrMap attrs;
  std::vector<const char *> state;  // names of the state tensors, in operand order
};

Optimizer resolve_optimizer(const OptimizerConfig &c) {
  const std::string &k = c.kind;
  const double inf = 1e300;
  Optimizer o;
  if (k == "sgd" || k == "momentum") {
    double lr = c.lr.value_or(0.01);
    double wd = c.weight_decay.value_or(0.0);
    // torch.optim.SGD: momentum 0 is plain SGD; the momentum optimizer defaults to 0.9.
    double momentum = c.momentum.value_or(k == "momentum" ? 0.9 : 0.0);
    check_hyper("learning rate", lr, 0, false, inf, false, k);
    check_hyper("weight_decay", wd, 0, false, inf, false, k);
    check_hyper("momentum", momentum, 0, false, inf, false, k);
    if (c.nesterov && momentum <= 0) CLEAVE_USER_ERROR("optimizer ", k, ": nesterov momentum requires momentum > 0");
    if (momentum == 0.0) {
      o.kind = OpKind::SGDUpdate;
      o.attrs = {{"lr", lr}, {"weight_decay", wd}};
    } else {
      o.kind = OpKind::MomentumUpdate;
      o.attrs = {{"lr", lr}, {"momentum", momentum}, {"weight_decay", wd}, {"nesterov", int64_t{c.nesterov}}};
      o.state = {"velocity"};
    }
    return o;
  }
  if (k == "adam" || k == "adamw") {
    bool decoupled = k == "adamw";
    double lr = c.lr.value_or(1e-3), b1 = c.beta1.value_or(0.9), b2 = c.beta2.value_or(0.999);
    double eps = c.eps.value_or(1e-8), wd = c.weight_decay.value_or(decoupled ? 0.01 : 0.0);
    check_hyper("learning rate", lr, 0, false, inf, false, k);
    check_hyper("beta1", b1, 0, false, 1, true, k);
    check_hyper("beta2", b2, 0, false, 1, true, k);
    check_hyper("eps", eps, 0, false, inf, false, k);
    check_hyper("weight_decay", wd, 0, false, inf, false, k);
    if (c.nesterov) CLEAVE_USER_ERROR("optimizer ", k, ": nesterov applies to sgd/momentum only");
    o.kind = OpKind::AdamUpdate;
    o.attrs = {{"lr", lr},   {"beta1", b1},         {"beta2", b2},
               {"eps", eps}, {"weight_decay", wd}, {"decoupled", int64_t{decoupled}}};
    o.state = {"m", "v"};
    return o;
  }
  CLEAVE_USER_ERROR("unknown optimizer \"", k, "\" (expected sgd, momentum, adam or adamw)");
}

}  // namespace

void build_training_graph(Graph &g, const TrainOptions &opts) {
  if (g.loss != kNoTensor) CLEAVE_USER_ERROR("graph \"", g.name, "\" is already a training graph");
  Optimizer optimizer = resolve_optimizer(opts.optimizer);
  TensorId loss = select_loss(g, opts.loss);

  std::vector<std::string> unknown;
  std::vector<TensorId> frozen;
  for (const std::string &name : opts.freeze) {
    std::optional<TensorId> t = g.find_tensor(name);
    if (!t || g.tensor(*t).role != Role::param)
      unknown.push_back(name);
    else
      frozen.push_back(*t);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const std::string &n : unknown) list += (list.empty() ? "\"" : ", \"") + n + "\"";
    CLEAVE_USER_ERROR("--freeze names no initializer: ", list);
  }
  for (TensorId t : frozen) g.tensor(t).role = Role::constant;

  std::vector<TensorId> candidates;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).role == Role::param && is_float(g.tensor(t).dtype)) candidates.push_back(t);
  g.loss = loss;
  TensorId seed = kNoTensor;
  if (opts.loss_scale) {
    const LossScaleConfig &c = *opts.loss_scale;
    if (!(static_cast<float>(c.init) > 0) || !std::isfinite(static_cast<float>(c.init)))
      CLEAVE_USER_ERROR("--loss-scale ", c.init, ": the first loss scale must be a positive float32 number");
    if (c.growth_interval < 1)
      CLEAVE_USER_ERROR("--loss-scale-growth-interval ", c.growth_interval, ": must be at least 1");
    Tensor s;
    s.name = g.fresh_tensor_name("loss_scale");
    s.dtype = DType::f32;
    s.shape = g.tensor(loss).shape;
    s.role = Role::optimizer_state;
    s.data = encode_doubles(DType::f32, std::vector<double>(static_cast<size_t>(num_elements(s.shape)), c.init));
    seed = g.add_tensor(std::move(s));
    g.loss_scaling = {seed, c.growth_interval};
  }
  // A param the loss does not reach gets no entry and is not trained (torch skips params whose grad is None).
  std::map<TensorId, TensorId> grads = append_gradients(g, loss, candidates, seed);

  for (TensorId p : candidates) {
    auto it = grads.find(p);
    if (it == grads.end()) continue;
    const Tensor pt = g.tensor(p);  // copy: add_tensor may move the vector
    Op op;
    op.name = g.fresh_op_name(pt.name + ".update");
    op.kind = optimizer.kind;
    op.attrs = optimizer.attrs;
    op.phase = Phase::update;
    op.inputs = {p, it->second};
    std::vector<TensorId> states;
    for (const char *s : optimizer.state) {
      Tensor st;
      st.name = g.fresh_tensor_name(pt.name + "." + s);
      st.dtype = pt.dtype;
      st.shape = pt.shape;
      st.role = Role::optimizer_state;
      st.zero_init = true;
      states.push_back(g.add_tensor(std::move(st)));
      op.inputs.push_back(states.back());
    }
    TensorId new_p = g.add_tensor(g.fresh_tensor_name(pt.name + ".next"), pt.dtype, pt.shape, Role::activation);
    op.outputs = {new_p};
    g.assigns.push_back({p, new_p});
    for (TensorId s : states) {
      const Tensor &st = g.tensor(s);
      TensorId new_s = g.add_tensor(g.fresh_tensor_name(st.name + ".next"), st.dtype, st.shape, Role::activation);
      op.outputs.push_back(new_s);
      g.assigns.push_back({s, new_s});
    }
    g.add_op(std::move(op));
  }
}

}  // namespace cleave
