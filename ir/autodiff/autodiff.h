#pragma once
// Reverse-mode autodiff over the IR and the optimizers appended after it (DESIGN §3).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave {

/** Appends backward ops computing d(y)/d(x) for every x in `xs`, seeded with `seed` (a tensor of y's shape), or
 *  with ones if seed is kNoTensor. Backward ops get phase backward and group = the forward op they differentiate;
 *  gradients of a tensor used several times are accumulated with Add. Returns x -> its gradient tensor (role grad)
 *  for every x that y depends on differentiably; an x that y does not depend on gets no entry.
 *  Throws UserError naming the op if an op on the path has no gradient rule for that input. */
std::map<TensorId, TensorId> append_gradients(Graph &g, TensorId y, const std::vector<TensorId> &xs,
                                              TensorId seed = kNoTensor);

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | momentum | adam | adamw
  std::optional<double> lr, momentum, beta1, beta2, eps, weight_decay;  // unset = torch.optim's default
  bool nesterov = false;
};

/** Dynamic loss scaling (Graph::loss_scaling): the first scale and the growth interval, torch's defaults. */
struct LossScaleConfig {
  double init = 65536.0;
  int64_t growth_interval = 2000;
};

struct TrainOptions {
  OptimizerConfig optimizer;
  /** Set: the gradients are computed from the loss times a scale (Graph::loss_scaling). */
  std::optional<LossScaleConfig> loss_scale;
  /** Initializer names not to train. */
  std::vector<std::string> freeze;
  /** The loss output's name; empty = the graph's only scalar float output. */
  std::string loss;
};

/** Turns a forward graph into a training graph: sets g.loss, appends the backward pass for every trainable param
 *  (role param, float, not frozen, reached by the loss) and the optimizer's update ops, with assigns binding the
 *  new values (and the optimizer state, created with role optimizer_state and zero_init: no bytes until needed) to the old ones.
 *  Frozen params become role constant. Update ops (phase update, one per param, named `<param>.update`, outputs
 *  `<param>.next`) come in tensor-id order of the params, i.e. the model's initializer order; assigns follow the
 *  same order (param, then its state). Optimizers: sgd -> SGDUpdate (or MomentumUpdate if a momentum > 0 is given,
 *  as torch.optim.SGD does), momentum -> MomentumUpdate (momentum 0.9 unless given), adam -> AdamUpdate decoupled=0,
 *  adamw -> AdamUpdate decoupled=1 (weight_decay 0.01 unless given); defaults are torch.optim's (sgd lr 0.01).
 *  BatchNormalization's mean/var operands get no gradient (torch keeps them as buffers), so a model that marks them
 *  param does not train them.
 *  Throws UserError for a missing or non-scalar loss, unknown --freeze names and invalid hyper-parameters. */
void build_training_graph(Graph &g, const TrainOptions &opts);

}  // namespace cleave
