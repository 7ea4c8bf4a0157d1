#pragma once
// The `cleave` subcommands. Each registers its flags on a CLI11 app and returns the function that runs it;
// the function returns the process exit code. Machine-readable output goes to stdout, progress to stderr.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ir/autodiff/autodiff.h"
#include "ir/graph.h"
#include "planner/plan/plan.h"
#include "planner/cost/profile.h"
#include "planner/plan/topology.h"
#include "planner/search/make_plan.h"
#include "runtime/include/cleave/schedule.h"

namespace cleave::cli {

using Command = std::function<int()>;

// A positive integer flag value (devices, batch, steps): "must be a positive integer, got 0" rather than CLI11's range.
inline const CLI::Validator kPositive(
    [](std::string &value) -> std::string {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(value, &used);
      } catch (const std::exception &) {
        used = 0;
      }
      if (used != value.size() || v < 1) return "must be a positive integer, got \"" + value + "\"";
      return "";
    },
    "POSITIVE");

/** Flags shared by every subcommand that builds a training graph. */
struct TrainFlags {
  std::string optimizer = "sgd";
  std::optional<double> lr, momentum, beta1, beta2, eps, weight_decay;
  bool nesterov = false;
  std::vector<std::string> freeze;
  std::string loss;
  /** --batch-axis NAME=K items (parse_batch_axes). */
  std::vector<std::string> batch_axis;
  /** --precision: fp32, tf32 (codegen: rt::set_math), bf16 or fp16 (ir/autocast.h, before autodiff; fp16 scales the
   *  loss). */
  std::string precision = "fp32";
  /** --loss-scale, --loss-scale-growth-interval: dynamic loss scaling (Graph::loss_scaling), on with fp16 or either
   *  flag. */
  std::optional<double> loss_scale;
  std::optional<int64_t> loss_scale_growth_interval;

  void add_to(CLI::App &app);
  TrainOptions options() const;
};

/** --batch-axis NAME=K,...: the sample axis of graph input NAME, for models whose batch dim is static or not dim 0
 *  (ImportOptions::batch_axes; IR text: Tensor::sample_axis). */
void add_batch_axis_flag(CLI::App &app, std::vector<std::string> &items);
/** The --batch-axis items as a map; UserError naming the flag for a malformed item or a name given twice. */
std::map<std::string, int> parse_batch_axes(const std::vector<std::string> &items);

/** Appends `flag value` to `args` unless `value` is empty (flags passed on to rank programs). */
void push_flag(std::vector<std::string> &args, const char *flag, const std::string &value);
/** An optional number as such a flag's value: "" when unset, else with 17 significant digits. */
template <typename T>
std::string flag_value(const std::optional<T> &v) {
  if (!v) return "";
  std::ostringstream ss;
  ss.precision(17);
  ss << *v;
  return ss.str();
}

/** The training-run flags `cleave run` (for the ranks' rt::TrainingRun) and `cleave eval` share: the learning-rate
 *  schedule, gradient clipping, accumulation, epochs and shuffling (runtime/include/cleave/schedule.h). */
struct KnobFlags {
  std::string lr_schedule, milestones;
  std::optional<int64_t> warmup_steps, step_size, accumulate, epochs, shuffle, val_every;
  std::optional<double> min_lr, gamma, clip_grad_norm;
  /** --val-data's NAME=FILE items (the command checks and passes on the files: rank_args() leaves them out). */
  std::vector<std::string> val_data;

  /** Adds the flags; --epochs excludes `steps`. */
  void add_to(CLI::App &app, CLI::Option *steps);
  /** The rank programs' flags for the options given. */
  std::vector<std::string> rank_args() const;
  /** The schedule over a run of `total` steps; UserError naming the flag for bad settings. */
  rt::sched::LrSchedule schedule(int64_t total) const;
};

/** How much of the initializers' values a command needs. */
enum class Weights {
  load,            // every value read at load time (eval, run: they compute with them)
  defer_external,  // external data referenced (Tensor::external) and read when needed (compile: one weight at a time)
  shapes_only,     // no float initializer read (plan: a 65 GB model plans in seconds; its data may even be absent)
};

/** Loads a model: `.onnx` through the frontend, anything else as IR text (parsed and verified). */
Graph load_model(const std::string &path, std::optional<int64_t> batch, Weights weights = Weights::load,
                 const std::map<std::string, int> &batch_axes = {});

/** Loads a model and makes it a training graph: a forward model gets autodiff and the optimizer of `flags`; a model
 *  that already describes its training (ONNX TrainingInfoProto: update ops and assigns) is used as it is. */
Graph load_training_graph(const std::string &path, std::optional<int64_t> batch, const TrainFlags &flags,
                          Weights weights = Weights::load);

/** Reads a plan file (planner/plan/plan.h text); UserError naming the file when it cannot be read or parsed. */
plan::Plan read_plan_file(const std::string &path);

/** --planner, checked against the planner registry (planner/search/make_plan.h) less `excluded`; its help lists the
 *  names, then `note`. */
template <typename T>
CLI::Option *add_planner_option(CLI::App &app, T &planner, const std::string &note,
                                const std::vector<std::string> &excluded = {}) {
  std::vector<std::string> names;
  for (const std::string &n : plan::planner_names())
    if (std::find(excluded.begin(), excluded.end(), n) == excluded.end()) names.push_back(n);
  std::string list;
  for (const std::string &n : names) list += (list.empty() ? "" : " | ") + n;
  return app.add_option("--planner", planner, list + " " + note)->check(CLI::IsMember(names));
}

/** Device counts as `flag` gives them: `N`; `a,b,c` (ascending, without repeats); or `A..B`: A, the powers of two
 *  between, and B (`3..12` is 3, 4, 8, 12). Throws UserError naming `flag` for anything else. */
std::vector<int> parse_device_counts(const std::string &flag, const std::string &text);

/** Flags of the search planners: --seed (random, flexflow), --iterations and --budget (flexflow: planner/search/flexflow.h). */
struct SearchFlags {
  uint64_t seed = 0;
  int64_t iterations = 2000;
  double budget = 0;
  /** The command's --profile, loaded (may be null): flexflow and frontier search with its measured times. */
  const plan::Profile *profile = nullptr;
  CLI::Option *seed_opt = nullptr, *iterations_opt = nullptr, *budget_opt = nullptr;
  void add_to(CLI::App &app);
  /** UserError naming a flag given for a planner that does not take it. */
  void check(const std::string &planner) const;
};

/** plan::make_plan with the search flags (flexflow's run here); prints the random plan's or the flexflow search's
 *  one-line summary to stderr. */
plan::Plan make_plan_with(const Graph &g, const std::string &planner, int devices, const plan::Topology *topology,
                          const SearchFlags &flags);

/** Where a command's plan comes from: a --plan file or a --planner over --devices. */
/** A plan file for `g` as compile takes it: parsed, its device count checked against --devices (unless that is 1),
 *  the lines of produced tensors it leaves out completed from their producers' configs, and validated. */
plan::Plan read_plan_for(const Graph &g, const std::string &path, int devices);

struct PlanSource {
  std::string plan_file, planner;
  int devices = 1;
  SearchFlags search;
  /** The machine the planner plans for (set by the command before make; may stay null). */
  const plan::Topology *topology = nullptr;
  /** The plan for `g`, validated against it. A plan file is read by read_plan_for and lowered by codegen as compile
   *  lowers it, so explain and simulate refuse exactly the plans compile refuses. */
  plan::Plan make(const Graph &g) const;
};
void add_plan_source_options(CLI::App &app, PlanSource &src);
/** --topology NAME|FILE (planner/plan/topology.h); `topology`'s value on entry is the default (empty: none). */
void add_topology_option(CLI::App &app, std::string &topology);

Command add_ir_command(CLI::App &app);
Command add_eval_command(CLI::App &app);
/** `cleave test`: forward passes only, the classifier's accuracy on labelled samples. */
Command add_test_command(CLI::App &app);
Command add_describe_command(CLI::App &app);
Command add_plan_command(CLI::App &app);

/** `cleave plan --planner frontier`'s flags (tools/cli/frontier_plan.cpp, planner/search/frontier.h). */
struct FrontierFlags {
  std::string mode = "mini-time";
  std::optional<int64_t> memory_limit;
  std::string table, svg, baselines;
  void add_to(CLI::App &app);
};
/** Runs the frontier search of `cleave plan`: `devices` is N, or A..B for --mode profile; `profile` (may be null):
 *  measured times for the search and the baselines. Writes the table and SVG files; returns the chosen plan
 *  (mini-time, mini-parallelism), or nullopt after printing the profile table to stdout (profile). */
std::optional<plan::Plan> frontier_plan_command(const Graph &g, const std::string &devices, const std::string &topology,
                                                const FrontierFlags &flags, const plan::Profile *profile = nullptr);
Command add_compile_command(CLI::App &app);
Command add_run_command(CLI::App &app);
/** `cleave checkpoint info|export`: what a checkpoint holds; its trained model as ONNX. */
Command add_checkpoint_command(CLI::App &app);
/** `cleave explain`: the cost model's per-op table and totals for a plan. */
Command add_explain_command(CLI::App &app);
/** `cleave diff`: what changed between two plans and the cost totals' deltas, with --fail-on thresholds. */
Command add_diff_command(CLI::App &app);
/** `cleave oracle`: ParaDL's strategies over device counts, priced by the cost model. */
Command add_oracle_command(CLI::App &app);
/** `cleave profile`: measured kernel and collective times on this machine, as a profile for --profile. */
Command add_profile_command(CLI::App &app);
/** --profile FILE (planner/cost/profile.h, written by `cleave profile`): measured times for the cost model. */
void add_profile_option(CLI::App &app, std::string &profile);
/** `cleave simulate`: a plan's step on the task-graph simulator, with its timeline as text and SVG. */
Command add_simulate_command(CLI::App &app);

}  // namespace cleave::cli
