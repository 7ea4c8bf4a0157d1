#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "frontend/onnx_import.h"
#include "ir/autocast.h"
#include "ir/transpose_motion.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"
#include "planner/search/frontier_modes.h"
#include "tools/cli/commands.h"

namespace cleave::cli {

void TrainFlags::add_to(CLI::App &app) {
  app.add_option("--optimizer", optimizer, "sgd | momentum | adam | adamw (torch.optim semantics)")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adamw"}));
  app.add_option("--lr", lr, "learning rate (default: torch's, sgd/momentum 0.01, adam/adamw 0.001)");
  app.add_option("--momentum", momentum, "momentum factor (momentum; default 0.9)");
  app.add_flag("--nesterov", nesterov, "Nesterov momentum (momentum)");
  app.add_option("--beta1", beta1, "Adam's beta1 (default 0.9)");
  app.add_option("--beta2", beta2, "Adam's beta2 (default 0.999)");
  app.add_option("--eps", eps, "Adam's epsilon (default 1e-8)");
  app.add_option("--weight-decay", weight_decay, "weight decay (default 0; adamw 0.01)");
  app.add_option("--freeze", freeze, "initializers not to train, comma-separated")->delimiter(',');
  app.add_option("--loss", loss, "the loss output (default: the model's only scalar float output)");
  add_batch_axis_flag(app, batch_axis);
  app.add_option("--precision", precision,
                 "fp32 | tf32 | bf16 | fp16: fp32 arithmetic (default); tf32 lets cuBLAS and cuDNN use TF32 tensor "
                 "cores (the cpu backend computes fp32 either way); bf16 and fp16 are torch.autocast's mixed "
                 "precision (bf16 with the CPU's op lists, fp16 with CUDA's), as rounding in the graph (fp32 weights "
                 "and optimizer state); fp16 scales the loss dynamically (--loss-scale)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}));
  app.add_option("--loss-scale", loss_scale,
                 "dynamic loss scaling's first scale (default 65536 with --precision fp16, which turns it on; "
                 "given, it is on at any precision): a step whose gradients overflow is skipped and the scale "
                 "halved, as torch.cuda.amp.GradScaler does");
  app.add_option("--loss-scale-growth-interval", loss_scale_growth_interval,
                 "steps in a row without overflow after which the loss scale doubles (default 2000)");
}

void add_batch_axis_flag(CLI::App &app, std::vector<std::string> &items) {
  app.add_option("--batch-axis", items,
                 "NAME=K,...: graph input NAME's sample axis (default: its symbolic dim, else 0); data files stay "
                 "sample-major")
      ->delimiter(',');
}

std::map<std::string, int> parse_batch_axes(const std::vector<std::string> &items) {
  std::map<std::string, int> out;
  for (const std::string &item : items) {
    size_t eq = item.find('=');
    int axis = -1;
    const char *end = item.data() + item.size();
    if (eq != std::string::npos && eq > 0) {
      auto [stop, ec] = std::from_chars(item.data() + eq + 1, end, axis);
      if (ec != std::errc() || stop != end || eq + 1 == item.size()) axis = -1;
    }
    if (axis < 0) CLEAVE_USER_ERROR("--batch-axis: expected NAME=AXIS (a dim number), got ", quote_excerpt(item));
    if (!out.emplace(item.substr(0, eq), axis).second)
      CLEAVE_USER_ERROR("--batch-axis: input ", quote_excerpt(item.substr(0, eq)), " given twice");
  }
  return out;
}

TrainOptions TrainFlags::options() const {
  TrainOptions o;
  o.optimizer.kind = optimizer;
  o.optimizer.lr = lr;
  o.optimizer.momentum = momentum;
  o.optimizer.beta1 = beta1;
  o.optimizer.beta2 = beta2;
  o.optimizer.eps = eps;
  o.optimizer.weight_decay = weight_decay;
  o.optimizer.nesterov = nesterov;
  o.freeze = freeze;
  o.loss = loss;
  if (precision == "fp16" || loss_scale || loss_scale_growth_interval) {
    o.loss_scale = LossScaleConfig{};
    if (loss_scale) o.loss_scale->init = *loss_scale;
    if (loss_scale_growth_interval) o.loss_scale->growth_interval = *loss_scale_growth_interval;
  }
  return o;
}

Graph load_model(const std::string &path, std::optional<int64_t> batch, Weights weights,
                 const std::map<std::string, int> &batch_axes) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) {
    ImportOptions opts;
    opts.batch = batch;
    opts.batch_axes = batch_axes;
    opts.load_data = weights != Weights::shapes_only;
    opts.defer_external_data = weights == Weights::defer_external;
    return import_onnx(path, opts);
  }
  std::ifstream in(path);
  if (!in) CLEAVE_USER_ERROR(path, ": cannot open model file");
  std::stringstream ss;
  ss << in.rdbuf();
  Graph g = parse_graph(ss.str(), path);
  for (const auto &[name, axis] : batch_axes) {
    std::optional<TensorId> t = g.find_tensor(name);
    if (!t || !is_data(g.tensor(*t)))
      CLEAVE_USER_ERROR("--batch-axis: ", path, " has no input or label ", quote_excerpt(name));
    if (axis >= static_cast<int>(g.tensor(*t).shape.size()))
      CLEAVE_USER_ERROR("--batch-axis: input \"", name, "\" has ", g.tensor(*t).shape.size(), " dims, no axis ", axis);
    g.tensor(*t).sample_axis = axis;
  }
  verify(g);
  if (weights == Weights::load) load_external_data(g);
  return g;
}

Graph load_training_graph(const std::string &path, std::optional<int64_t> batch, const TrainFlags &flags,
                          Weights weights) {
  Graph g = load_model(path, batch, weights, parse_batch_axes(flags.batch_axis));
  bool has_update = false;
  for (const Op &op : g.ops()) has_update = has_update || op.phase == Phase::update;
  bool mixed = flags.precision == "bf16" || flags.precision == "fp16";
  if (has_update && mixed)
    CLEAVE_USER_ERROR(path, ": --precision ", flags.precision, " rewrites a forward model before its gradients; this "
                      "model brings its own training algorithm");
  if (has_update && (flags.loss_scale || flags.loss_scale_growth_interval))
    CLEAVE_USER_ERROR(path, ": --loss-scale seeds the gradients Cleave derives; this model brings its own training "
                      "algorithm");
  bool f64 = std::any_of(g.tensors().begin(), g.tensors().end(), [](const Tensor &t) { return t.dtype == DType::f64; });
  if (f64 && flags.precision != "fp32")
    CLEAVE_USER_ERROR(path, ": --precision ", flags.precision, " applies to float32 models; this model is float64, and ",
                      "trains in float64");
  if (f64 && (flags.loss_scale || flags.loss_scale_growth_interval))
    CLEAVE_USER_ERROR(path, ": --loss-scale applies to float32 models; this model is float64");
  if (!has_update) {
    move_transposes(g);
    if (mixed) autocast(g, flags.precision == "bf16" ? DType::bf16 : DType::f16);
    build_training_graph(g, flags.options());
  } else if (g.loss == kNoTensor) {
    CLEAVE_USER_ERROR(path, ": the model's training algorithm has no Gradient node, so it has no loss to report");
  }
  verify(g);
  return g;
}

std::vector<int> parse_device_counts(const std::string &flag, const std::string &text) {
  auto count = [&](const std::string &s) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (s.empty() || used != s.size() || v < 1 || v > 1 << 20)
      CLEAVE_USER_ERROR(flag, ": \"", text, "\" is not a device count N, a list a,b,c or a range A..B");
    return static_cast<int>(v);
  };
  std::vector<int> out;
  size_t dots = text.find("..");
  if (dots != std::string::npos) {
    int lo = count(text.substr(0, dots)), hi = count(text.substr(dots + 2));
    if (lo > hi) CLEAVE_USER_ERROR(flag, ": range \"", text, "\" is empty (", lo, " > ", hi, ")");
    return plan::device_count_range(lo, hi);
  }
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(count(item));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) count("");
  return out;
}

}  // namespace cleave::cli

namespace cleave::cli {

void KnobFlags::add_to(CLI::App &app, CLI::Option *steps) {
  app.add_option("--lr-schedule", lr_schedule, "learning-rate schedule (torch.optim.lr_scheduler semantics)")
      ->check(CLI::IsMember({"constant", "step", "multistep", "cosine", "linear", "onecycle"}));
  app.add_option("--warmup-steps", warmup_steps, "linear warm-up steps before the schedule")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-lr", min_lr, "cosine, linear: the final learning rate (default 0)");
  app.add_option("--step-size", step_size, "step: steps between decays")->check(kPositive);
  app.add_option("--milestones", milestones, "multistep: steps A,B,... at which to decay");
  app.add_option("--gamma", gamma, "step, multistep: the decay factor (default 0.1)");
  app.add_option("--clip-grad-norm", clip_grad_norm,
                 "clip the gradients' global 2-norm to X (torch.nn.utils.clip_grad_norm_)")
      ->check(CLI::PositiveNumber);
  app.add_option("--accumulate", accumulate,
                 "K forward/backward passes per step (K batches), the update with their mean gradient")
      ->check(kPositive);
  app.add_option("--epochs", epochs, "train E passes over the data (instead of --steps)")
      ->check(kPositive)
      ->excludes(steps);
  app.add_option("--shuffle", shuffle, "read each epoch in a permutation drawn from SEED (the same for every plan)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--val-data", val_data,
                 "validation samples from .npy files: NAME=FILE,... (every graph input; a classifier's loss)")
      ->delimiter(',');
  app.add_option("--val-every", val_every, "validate after every N steps (and after the last)")
      ->check(kPositive)
      ->needs("--val-data");
}

void push_flag(std::vector<std::string> &args, const char *flag, const std::string &value) {
  if (value.empty()) return;
  args.push_back(flag);
  args.push_back(value);
}

std::vector<std::string> KnobFlags::rank_args() const {
  std::vector<std::string> out;
  push_flag(out, "--lr-schedule", lr_schedule);
  push_flag(out, "--warmup-steps", flag_value(warmup_steps));
  push_flag(out, "--min-lr", flag_value(min_lr));
  push_flag(out, "--step-size", flag_value(step_size));
  push_flag(out, "--milestones", milestones);
  push_flag(out, "--gamma", flag_value(gamma));
  push_flag(out, "--clip-grad-norm", flag_value(clip_grad_norm));
  push_flag(out, "--accumulate", flag_value(accumulate));
  push_flag(out, "--epochs", flag_value(epochs));
  push_flag(out, "--shuffle", flag_value(shuffle));
  push_flag(out, "--val-every", flag_value(val_every));
  return out;
}

rt::sched::LrSchedule KnobFlags::schedule(int64_t total) const {
  rt::sched::LrSchedule s;
  if (!lr_schedule.empty()) s.kind = lr_schedule;
  s.warmup = warmup_steps.value_or(0);
  s.step_size = step_size.value_or(1);
  s.gamma = gamma.value_or(0.1);
  s.min_lr = min_lr.value_or(0);
  s.total = total;
  for (std::stringstream ss(milestones); ss.good();) {
    std::string m;
    std::getline(ss, m, ',');
    if (m.empty()) continue;
    try {
      size_t used = 0;
      long long v = std::stoll(m, &used);
      if (used != m.size() || v < 1) throw std::invalid_argument(m);
      s.milestones.push_back(v);
    } catch (const std::exception &) {
      CLEAVE_USER_ERROR("--milestones: expected positive integers A,B,..., got \"", milestones, "\"");
    }
  }
  if (std::string why = s.problem(); !why.empty()) CLEAVE_USER_ERROR(why);
  return s;
}

}  // namespace cleave::cli
