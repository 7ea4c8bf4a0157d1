// cleave: the command-line driver.
#include <cstdio>
#include <iostream>
#include <map>

#include "ir/error.h"
#include "tools/cli/commands.h"

int main(int argc, char **argv) {
  CLI::App app{"cleave: an ahead-of-time partitioning compiler for DNN training (ONNX in, executables out)"};
  app.require_subcommand(1);
  std::map<CLI::App *, cleave::cli::Command> commands;
  auto add = [&](cleave::cli::Command (*fn)(CLI::App &), const char *name, const char *help) {
    CLI::App *sub = app.add_subcommand(name, help);
    commands[sub] = fn(*sub);
  };
  add(cleave::cli::add_ir_command, "ir", "Print a model's IR (the forward graph, or with --train the training graph)");
  add(cleave::cli::add_eval_command, "eval", "Train a model on the reference interpreter, printing the loss per step");
  add(cleave::cli::add_test_command, "test",
      "Accuracy of a classifier on labelled samples (forward passes on the reference interpreter)");
  add(cleave::cli::add_describe_command, "describe", "Print an op kind's index-expression description");
  add(cleave::cli::add_compile_command, "compile", "Compile a model's training graph under a plan into a bundle of per-rank programs");
  add(cleave::cli::add_run_command, "run", "Build a bundle and train with it under mpirun, printing the loss per step");
  add(cleave::cli::add_checkpoint_command, "checkpoint",
      "Show what a checkpoint of `cleave run --checkpoint-dir` holds, or export its trained model as ONNX");
  add(cleave::cli::add_plan_command, "plan", "Print the plan (sharding of every tensor and op) of a model's training graph");
  add(cleave::cli::add_explain_command, "explain",
      "Print a plan's predicted costs: per-op compute and communication, per-device memory, step time");
  add(cleave::cli::add_diff_command, "diff",
      "Print what changed between two plans and the cost totals' deltas; --fail-on thresholds for CI");
  add(cleave::cli::add_oracle_command, "oracle",
      "Compare ParaDL's parallel strategies (data, spatial, filter, channel, pipeline, hybrids) over device counts");
  add(cleave::cli::add_profile_command, "profile",
      "Measure op kernel times at the plans' shard shapes and collective times on this machine, as a profile");
  add(cleave::cli::add_simulate_command, "simulate",
      "Simulate a plan's training step as a task graph (compute overlapping communication): step time and timeline");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A bad flag or argument: one line naming it (CLI11's messages start with the flag), exit 2 like other usage errors.
    std::fprintf(stderr, "error: %s (see --help)\n", cleave::escape_control(e.what()).c_str());
    return 2;
  }
  try {
    for (auto &[sub, run] : commands)
      if (sub->parsed()) return run();
  } catch (const cleave::UserError &e) {
    std::cout.flush();
    std::fprintf(stderr, "error: %s\n", cleave::escape_control(e.what()).c_str());
    return e.exit_code();
  } catch (const cleave::InternalError &e) {
    std::cout.flush();
    std::fprintf(stderr, "%s\n", cleave::escape_control(e.what()).c_str());
    return 3;
  } catch (const std::exception &e) {
    std::cout.flush();
    std::fprintf(stderr, "internal error: unexpected exception: %s\n", cleave::escape_control(e.what()).c_str());
    return 3;
  }
  return 0;
}
