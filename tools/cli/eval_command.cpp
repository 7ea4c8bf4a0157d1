// `cleave eval`: trains a model on the reference interpreter. The step loop here is the specification the
// generated per-device programs must reproduce: step k (from 1) runs K passes (--accumulate; pass p feeds samples
// [(p-1)·B, p·B) of the sample stream, modulo the sample count or through the epoch's permutation, and runs forward
// and backward), averages their gradients and losses, clips, runs the updates at the scheduled rate, prints the
// loss, then applies the graph's assigns.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/interp/interpreter.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"
#include "runtime/common/npy_format.h"
#include "runtime/include/cleave/validation.h"
#include "tools/cli/commands.h"
#include "tools/cli/npy.h"

namespace cleave::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::vector<std::string> data;
  int64_t batch = 0;
  int64_t steps = 1;
  std::string save_model;
  TrainFlags train_flags;
  KnobFlags knobs;
};

/** --data and --batch, as eval and test read them. */
void add_data_flags(CLI::App &app, EvalArgs &args, const char *batch_help) {
  app.add_option("--data", args.data, "graph inputs from .npy files: NAME=FILE,... (first dim = samples)")
      ->required()
      ->delimiter(',');
  app.add_option("--batch", args.batch, batch_help)->required()->check(kPositive);
}

/** name=path pairs of --data, in flag order. */
std::map<std::string, std::string> parse_data_flag(const std::vector<std::string> &items,
                                                   const std::string &flag = "--data") {
  std::map<std::string, std::string> out;
  for (const auto &item : items) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      CLEAVE_USER_ERROR(flag, ": expected NAME=FILE.npy, got \"", item, "\"");
    if (!out.emplace(item.substr(0, eq), item.substr(eq + 1)).second)
      CLEAVE_USER_ERROR(flag, ": input \"", item.substr(0, eq), "\" given twice");
  }
  return out;
}

struct Feed {
  TensorId tensor;
  NpyArray array;
  int64_t sample_size;
};

/** Binds each graph input (role input/label) to its .npy array, checking shapes. */
std::vector<Feed> bind_data(const Graph &g, const std::map<std::string, std::string> &files, int64_t batch,
                            const std::string &flag = "--data") {
  std::vector<Feed> feeds;
  std::vector<std::string> missing;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    if (!is_data(tensor)) continue;
    auto it = files.find(tensor.name);
    if (it == files.end()) {
      missing.push_back("\"" + tensor.name + "\"");
      continue;
    }
    NpyArray header = read_npy_header(it->second);  // refuse a bad file before reading all of it
    check_npy_feeds(header, it->second, !is_float(tensor.dtype));
    Feed f{t, read_npy(it->second), 0};
    const Shape &want = tensor.shape;
    if (want.empty() || want[static_cast<size_t>(tensor.sample_axis)] != batch)
      CLEAVE_USER_ERROR("input \"", tensor.name, "\" has shape ", shape_str(want), ", whose sample axis (",
                        tensor.sample_axis, ") is not the batch ", batch);
    Shape sample = sample_shape(tensor);
    Shape have(f.array.shape.begin() + (f.array.shape.empty() ? 0 : 1), f.array.shape.end());
    if (f.array.shape.empty() || f.array.shape[0] == 0 || have != sample)
      CLEAVE_USER_ERROR(it->second, ": array of shape ", shape_str(f.array.shape), " cannot feed input \"", tensor.name,
                        "\" (needs [samples", sample.empty() ? "" : ",", shape_str(sample).substr(1), ")");
    f.sample_size = num_elements(sample);
    feeds.push_back(std::move(f));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto &m : missing) list += (list.empty() ? "" : ", ") + m;
    CLEAVE_USER_ERROR(flag, ": no data for input", missing.size() > 1 ? "s " : " ", list);
  }
  for (const auto &[name, path] : files) {
    auto id = g.find_tensor(name);
    if (!id || !is_data(g.tensor(*id)))
      CLEAVE_USER_ERROR(flag, ": the model has no input \"", name, "\"");
  }
  for (const Feed &f : feeds)
    if (f.array.shape[0] != feeds.front().array.shape[0]) {
      const std::string &a = g.tensor(feeds.front().tensor).name, &b = g.tensor(f.tensor).name;
      CLEAVE_USER_ERROR(flag, ": \"", a, "\" has ", feeds.front().array.shape[0], " samples (", files.at(a), ") but \"", b,
                        "\" has ", f.array.shape[0], " (", files.at(b), "); every input needs the same number");
    }
  return feeds;
}

interp::Value batch_value(const Tensor &t, const Feed &f, int64_t step, int64_t batch,
                          rt::sched::SampleOrder *order = nullptr) {
  interp::Value v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.data.resize(static_cast<size_t>(batch * f.sample_size));
  int64_t samples = f.array.shape[0];
  for (int64_t i = 0; i < batch; ++i) {
    int64_t at = (step - 1) * batch + i;
    int64_t s = order ? order->sample(at, samples) : at % samples;
    std::copy_n(f.array.data.begin() + s * f.sample_size, f.sample_size, v.data.begin() + i * f.sample_size);
  }
  if (int64_t outer = num_elements(Shape(t.shape.begin(), t.shape.begin() + t.sample_axis)); outer > 1) {
    std::vector<double> file_order = std::move(v.data);
    v.data.resize(file_order.size());
    rt::npy::to_sample_axis(file_order.data(), batch, outer, f.sample_size / outer, v.data.data());
  }
  if (t.dtype == DType::f32)
    for (double &x : v.data) x = static_cast<float>(x);
  return v;
}

/** A validation pass after step `step` (rt::TrainingRun's, rt.h): the forward ops in inference mode over every
 *  validation sample in batches, the last wrapping around to the first samples but counting only new ones, and the
 *  classifier's loss and accuracy over them (rt/validation.h), printed as `val <k> loss <v> accuracy <a>`. */
void validate(const Graph &g, const std::vector<Feed> &feeds, int64_t batch, int64_t step, interp::Values &values) {
  std::vector<OpId> losses;
  for (OpId o = 0; o < g.num_ops(); ++o)
    if (g.op(o).kind == OpKind::SoftmaxCrossEntropyLoss || g.op(o).kind == OpKind::NegativeLogLikelihoodLoss)
      losses.push_back(o);
  int64_t samples = feeds.front().array.shape[0];
  rt::val::Sums sums;
  for (int64_t vb = 0; vb * batch < samples; ++vb) {
    for (const Feed &f : feeds) values[f.tensor] = batch_value(g.tensor(f.tensor), f, vb + 1, batch);
    interp::Context ctx{step};
    ctx.inference = true;
    for (OpId o = 0; o < g.num_ops(); ++o)
      if (g.op(o).phase == Phase::forward) interp::run_op(g, o, values, ctx);
    for (OpId o : losses) {
      const Op &op = g.op(o);
      const Shape &s = g.tensor(op.inputs[0]).shape;  // [n, c, d...]
      int64_t c = s.size() > 1 ? s[1] : 1, d = num_elements(s) / (s[0] * c);
      rt::val::LossKind kind{op.kind == OpKind::NegativeLogLikelihoodLoss, op.has_attr("ignore_index"),
                             op.attr_int("ignore_index", -100)};
      const std::vector<double> *weights = op.input(2) == kNoTensor ? nullptr : &values[op.inputs[2]]->data;
      int64_t bad = rt::val::add_classified(sums, kind, s[0], c, d, values[op.inputs[0]]->data.data(),
                                            values[op.inputs[1]]->data.data(), weights ? weights->data() : nullptr,
                                            samples - vb * batch);
      if (bad >= 0) CLEAVE_USER_ERROR("--val-data: sample ", vb * batch + bad, " has a label outside [0, ", c, ")");
    }
  }
  std::printf("%s\n", rt::val::line(step, sums).c_str());
  std::fflush(stdout);
}

}  // namespace

Command add_eval_command(CLI::App &app) {
  auto args = std::make_shared<EvalArgs>();
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  add_data_flags(app, *args, "samples per step (also fixes a symbolic batch dimension)");
  CLI::Option *steps = app.add_option("--steps", args->steps, "training steps")->check(kPositive);
  app.add_option("--save-model", args->save_model, "write the model with the trained initializers to this .onnx file");
  args->train_flags.add_to(app);
  args->knobs.add_to(app, steps);
  return [args] {
    if (!args->save_model.empty() &&
        (args->model.size() < 5 || args->model.compare(args->model.size() - 5, 5, ".onnx") != 0))
      CLEAVE_USER_ERROR("--save-model needs an .onnx model, got ", args->model);
    if (!args->save_model.empty()) check_output_file("--save-model", args->save_model);  // before training
    Graph g = load_training_graph(args->model, args->batch, args->train_flags);
    std::vector<Feed> feeds = bind_data(g, parse_data_flag(args->data), args->batch);
    std::vector<Feed> val_feeds;
    if (!args->knobs.val_data.empty()) {
      for (const Tensor &t : g.tensors())
        if (is_data(t) && t.sample_axis != 0)  // the metrics count samples along dim 0 of the loss's scores
          CLEAVE_USER_ERROR("--val-data: validation needs sample-major inputs, and input \"", t.name,
                            "\" has its samples in dim ", t.sample_axis);
      if (std::none_of(g.ops().begin(), g.ops().end(), [](const Op &op) {
            return op.kind == OpKind::SoftmaxCrossEntropyLoss || op.kind == OpKind::NegativeLogLikelihoodLoss;
          }))
        CLEAVE_USER_ERROR("--val-data: the model's loss is not a classifier's (SoftmaxCrossEntropyLoss or "
                          "NegativeLogLikelihoodLoss)");
      val_feeds = bind_data(g, parse_data_flag(args->knobs.val_data, "--val-data"), args->batch, "--val-data");
    }

    interp::Values values = interp::initial_values(g);
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      const Tensor &tensor = g.tensor(t);
      if ((tensor.role == Role::param || tensor.role == Role::optimizer_state) && !values[t])
        CLEAVE_USER_ERROR("tensor \"", tensor.name, "\" has no initial value");
    }
    // The values hold the weights from here on; the graph's copy would double a large model's memory.
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(t).role == Role::param) std::vector<uint8_t>().swap(g.tensor(t).data);
    // The runs' knobs as rt::TrainingRun does them: a step is K passes (data, forward, backward) whose gradients and
    // losses are averaged, then clipping, then the updates at the scheduled rate.
    const KnobFlags &knobs = args->knobs;
    int64_t passes = knobs.accumulate.value_or(1), samples = feeds.front().array.shape[0];
    int64_t steps = knobs.epochs ? std::max<int64_t>(1, *knobs.epochs * samples / (args->batch * passes)) : args->steps;
    rt::sched::LrSchedule schedule = knobs.schedule(steps);
    rt::sched::SampleOrder order(knobs.shuffle.has_value(), static_cast<uint64_t>(knobs.shuffle.value_or(0)));
    std::vector<OpId> pass_ops, update_ops;
    std::vector<TensorId> grads;  // what SGDUpdate/MomentumUpdate/AdamUpdate read as their gradient
    for (OpId o = 0; o < g.num_ops(); ++o) {
      const Op &op = g.op(o);
      (op.phase == Phase::update ? update_ops : pass_ops).push_back(o);
      if (op.kind == OpKind::SGDUpdate || op.kind == OpKind::MomentumUpdate || op.kind == OpKind::AdamUpdate)
        grads.push_back(op.inputs[1]);
    }
    // What outlives a pass (the loss, what the step loop and the updates read, what the assigns store) and what
    // outlives the updates (what the assigns store); run_ops drops every other value after its last reader.
    std::vector<bool> after_pass(static_cast<size_t>(g.num_tensors())), after_update(after_pass.size());
    after_pass[static_cast<size_t>(g.loss)] = true;
    for (TensorId t : grads) after_pass[static_cast<size_t>(t)] = true;
    for (OpId o : update_ops)
      for (TensorId t : g.op(o).inputs)
        if (t != kNoTensor) after_pass[static_cast<size_t>(t)] = true;
    for (const Assign &a : g.assigns) after_pass[static_cast<size_t>(a.src)] = after_update[static_cast<size_t>(a.src)] =
        true;
    auto forward_made = [&g](const Assign &a) {
      OpId producer = g.tensor(a.src).producer;
      return producer != kNoOp && g.op(producer).phase == Phase::forward;
    };
    auto kept = [](const std::vector<bool> &set) {
      return [&set](TensorId t) { return bool(set[static_cast<size_t>(t)]); };
    };
    // What the runtime rounds to float32 (averaged gradients, the scheduled rate, clipping) stays double in a float64
    // model, as its bundle's runtime computes in double (rt::real; codegen::real_dtype).
    auto has = [&g](DType d) {
      return std::any_of(g.tensors().begin(), g.tensors().end(), [d](const Tensor &t) { return t.dtype == d; });
    };
    const bool f64 = has(DType::f64) && !has(DType::f32);
    auto to_float = [f64](double v) { return f64 ? v : static_cast<double>(static_cast<float>(v)); };
    // Loss scaling (Graph::loss_scaling): the scale, steps in a row without overflow, steps skipped.
    const LossScaling &scaling = g.loss_scaling;
    const bool scaled = scaling.scale != kNoTensor;
    double scale = scaled ? values[scaling.scale]->data.at(0) : 0;
    int64_t scale_tracker = 0, skipped_steps = 0;
    for (int64_t step = 1; step <= steps; ++step) {
      std::vector<std::vector<double>> sums(grads.size());
      double loss = 0;
      // Each pass seeds its backward with scale / passes (torch's recipe scales loss / K), and the passes' gradients
      // are summed, as rt::TrainingRun does it.
      if (scaled) values[scaling.scale]->data.assign(values[scaling.scale]->data.size(), to_float(scale / passes));
      for (int64_t micro = 0; micro < passes; ++micro) {
        int64_t pass = (step - 1) * passes + micro + 1;
        for (const Feed &f : feeds)
          values[f.tensor] = batch_value(g.tensor(f.tensor), f, pass, args->batch, &order);
        interp::Context ctx{pass};
        interp::run_ops(g, pass_ops, values, ctx, kept(after_pass));
        // What the forward computed for the next pass (BatchNorm's running statistics) is stored after every pass.
        // (Copied, not moved: the rest of the step reads the loss and what the updates read.)
        if (passes > 1) interp::apply_assigns(g, values, forward_made, kept(after_pass));
        loss += values[g.loss]->data.at(0);
        for (size_t i = 0; i < grads.size(); ++i) {
          const std::vector<double> &gv = values[grads[i]]->data;
          sums[i].resize(gv.size(), 0.0);
          for (size_t e = 0; e < gv.size(); ++e) sums[i][e] += gv[e];
        }
      }
      if (passes > 1) {
        for (size_t i = 0; i < grads.size(); ++i)
          for (size_t e = 0; e < sums[i].size(); ++e)
            values[grads[i]]->data[e] = to_float(scaled ? sums[i][e] : sums[i][e] / passes);
        loss = to_float(loss / passes);
      }
      // Dynamic loss scaling (Graph::loss_scaling), as rt::TrainingRun::unscale_grads does it: a step whose gradients
      // are not all finite is skipped (BatchNorm's statistics, stored after each pass, still move, as in torch).
      bool skip = false;
      double scale_used = scale;
      if (scaled) {
        for (TensorId t : grads)
          for (double v : values[t]->data) skip = skip || !std::isfinite(v);
        if (skip) {
          scale = to_float(scale * 0.5);
          scale_tracker = 0;
          ++skipped_steps;
          if (scale == 0) CLEAVE_USER_ERROR("step ", step, ": the loss scale fell to 0: every step overflowed");
        } else {
          float inv = static_cast<float>(1.0 / scale);  // torch: the reciprocal in double, rounded to float
          for (TensorId t : grads)
            for (double &v : values[t]->data) v = static_cast<float>(static_cast<float>(v) * inv);
          if (++scale_tracker >= scaling.growth_interval) {
            if (std::isfinite(static_cast<float>(scale * 2))) scale = to_float(scale * 2);
            scale_tracker = 0;
          }
        }
      }
      if (knobs.clip_grad_norm && !skip) {  // torch.nn.utils.clip_grad_norm_: the norm and its coefficient in float32
        double squares = 0;
        for (TensorId t : grads)
          for (double v : values[t]->data) squares += v * v;
        double norm = to_float(std::sqrt(squares));
        if (!std::isfinite(norm)) CLEAVE_USER_ERROR("step ", step, ": the gradient norm is ", norm);
        double coef = std::min(to_float(to_float(*knobs.clip_grad_norm) / to_float(norm + to_float(1e-6))), 1.0);
        if (coef < 1.0)
          for (TensorId t : grads)
            for (double &v : values[t]->data) v = to_float(to_float(v) * coef);
      }
      interp::Context ctx{step - skipped_steps};  // Adam counts the updates it made
      ctx.lr = [&](double base) { return to_float(schedule.lr(to_float(base), step)); };
      if (!skip)
        interp::run_ops(g, update_ops, values, ctx, kept(after_update));
      std::printf("step %lld loss %.9g", static_cast<long long>(step), loss);
      if (scaled) std::printf(" loss_scale %.9g%s", scale_used, skip ? " skipped" : "");
      std::printf("\n");
      std::fflush(stdout);
      // Only what the forward passes computed is stored after a skipped step; with several passes, that was stored
      // after each.
      if (passes == 1)
        interp::apply_assigns(g, values, skip ? forward_made : std::function<bool(const Assign &)>{});
      else if (!skip)
        interp::apply_assigns(g, values, [&](const Assign &a) { return !forward_made(a); });
      if (!val_feeds.empty() && ((args->knobs.val_every && step % *args->knobs.val_every == 0) || step == steps))
        validate(g, val_feeds, args->batch, step, values);
    }

    if (!args->save_model.empty()) {
      std::map<std::string, std::vector<uint8_t>> trained;
      for (const Assign &a : g.assigns) {
        const Tensor &dst = g.tensor(a.dst);
        // Optimizer state is ours, not the model's; everything else assigned is an initializer of the model.
        if (dst.role != Role::optimizer_state) trained[dst.name] = encode_doubles(dst.dtype, values[a.dst]->data);
        values[a.dst].reset();
      }
      size_t saved = trained.size();
      save_onnx_with_initializers(args->model, args->save_model, std::move(trained));
      std::fprintf(stderr, "saved %zu trained initializers to %s\n", saved, args->save_model.c_str());
    }
    return 0;
  };
}

Command add_test_command(CLI::App &app) {
  auto args = std::make_shared<EvalArgs>();
  app.add_option("model", args->model, "model file (.onnx, e.g. one written by --save-model)")->required();
  add_data_flags(app, *args, "samples per forward pass (also fixes a symbolic batch dimension)");
  add_batch_axis_flag(app, args->train_flags.batch_axis);
  return [args] {
    Graph g = load_model(args->model, args->batch, Weights::load, parse_batch_axes(args->train_flags.batch_axis));
    // The classifier's scores are what its loss op reads: input 0 of the (only) SCE or NLL loss.
    TensorId scores = kNoTensor, labels = kNoTensor;
    for (const Op &op : g.ops()) {
      if (op.kind != OpKind::SoftmaxCrossEntropyLoss && op.kind != OpKind::NegativeLogLikelihoodLoss) continue;
      if (scores != kNoTensor) CLEAVE_USER_ERROR(args->model, ": several loss ops; cannot tell which scores to test");
      scores = op.inputs[0];
      labels = op.inputs[1];
    }
    if (scores == kNoTensor)
      CLEAVE_USER_ERROR(args->model, ": no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss op to read scores from");
    const Shape &s = g.tensor(scores).shape;
    if (s.size() != 2) CLEAVE_USER_ERROR(args->model, ": scores \"", g.tensor(scores).name, "\" are not [batch, classes]");
    std::vector<Feed> feeds = bind_data(g, parse_data_flag(args->data), args->batch);
    int64_t samples = feeds.front().array.shape[0];
    int64_t batches = (samples + args->batch - 1) / args->batch, correct = 0;
    interp::Values values = interp::initial_values(g);
    for (int64_t step = 1; step <= batches; ++step) {
      for (const Feed &f : feeds) values[f.tensor] = batch_value(g.tensor(f.tensor), f, step, args->batch);
      interp::run_graph(g, values, interp::Context{step});
      const std::vector<double> &sc = values[scores]->data, &lab = values[labels]->data;
      // The last batch wraps around to the first samples to stay full; only the samples not seen yet count.
      int64_t fresh = std::min(args->batch, samples - (step - 1) * args->batch);
      for (int64_t i = 0; i < fresh; ++i) {
        auto row = sc.begin() + i * s[1];
        correct += std::max_element(row, row + s[1]) - row == static_cast<int64_t>(lab[i]);
      }
    }
    std::printf("accuracy %.6f (%lld of %lld)\n", static_cast<double>(correct) / samples, static_cast<long long>(correct),
                static_cast<long long>(samples));
    return 0;
  };
}

}  // namespace cleave::cli
