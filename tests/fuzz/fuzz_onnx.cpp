// Fuzz target: ONNX bytes -> import -> verify -> training graph -> data plan over 2 devices -> validation. A user
// error (a message about the model) is the expected end of a bad input; anything else that escapes (an internal error,
// a crash, a sanitizer finding) is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "planner/plan/validate.h"
#include "planner/search/data_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // import_onnx reads a file (the model's directory also roots external data): one per process.
  static const std::string path = "/tmp/cleave_fuzz_onnx_" + std::to_string(::getpid()) + ".onnx";
  if (FILE *f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    cleave::ImportOptions opts;
    opts.batch = 2;
    cleave::Graph g = cleave::import_onnx(path, opts);
    cleave::verify(g);
    cleave::build_training_graph(g, {});
    cleave::verify(g);
    cleave::plan::Plan p = cleave::plan::data_plan(g, 2);
    cleave::plan::validate_plan(g, p);
  } catch (const cleave::UserError &) {
  }
  return 0;
}
