#include <iostream>

#include "ir/describe/description.h"
#include "tools/cli/commands.h"

namespace cleave::cli {

Command add_describe_command(CLI::App &app) {
  auto op = std::make_shared<std::string>();
  app.add_option("op", *op, "an op kind (e.g. Conv, Gemm, ConvGradFilter) or an ONNX op that imports as one")
      ->required();
  return [op] {
    std::cout << describe::describe_kind(*op);
    return 0;
  };
}

}  // namespace cleave::cli
