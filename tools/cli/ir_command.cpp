#include <iostream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {

struct IrArgs {
  std::string model;
  std::optional<int64_t> batch;
  bool train = false;
  TrainFlags train_flags;
};

}  // namespace

Command add_ir_command(CLI::App &app) {
  auto args = std::make_shared<IrArgs>();
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  app.add_option("--batch", args->batch, "fix a symbolic batch dimension")->check(kPositive);
  app.add_flag("--train", args->train, "print the training graph (forward, backward, optimizer update)");
  args->train_flags.add_to(app);
  return [args] {
    Graph g = args->train ? load_training_graph(args->model, args->batch, args->train_flags)
                          : load_model(args->model, args->batch, Weights::load, parse_batch_axes(args->train_flags.batch_axis));
    verify(g);
    std::cout << print_graph(g);
    return 0;
  };
}

}  // namespace cleave::cli
