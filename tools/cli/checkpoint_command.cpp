// `cleave checkpoint info CK` and `cleave checkpoint export CK -o model.onnx`: a checkpoint written by the ranks
// (codegen/checkpoint.h) seen whole.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "codegen/bundle_run.h"
#include "codegen/checkpoint.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/types.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {
namespace fs = std::filesystem;

struct CheckpointArgs {
  std::string checkpoint, output, model;
};

codegen::Checkpoint find(const std::string &path) {
  if (!fs::is_directory(path)) CLEAVE_USER_ERROR(path, ": not a directory");
  std::optional<codegen::Checkpoint> ck = codegen::find_checkpoint(path);
  if (!ck) CLEAVE_USER_ERROR(path, ": no complete checkpoint there (step-<k>/manifest.json)");
  return *ck;
}

/** The model `cleave run` recorded beside the checkpoints (CK/source.json, or the parent's for a step directory). */
std::string recorded_model(const std::string &path) {
  for (fs::path dir : {fs::path(path), fs::path(path).parent_path()}) {
    fs::path source = dir / "source.json";
    if (!fs::exists(source)) continue;
    try {
      return nlohmann::json::parse(codegen::read_file(source.string())).at("model").get<std::string>();
    } catch (const nlohmann::json::exception &) {
      CLEAVE_USER_ERROR(source.string(), ": malformed (expected {\"model\": PATH, ...})");
    }
  }
  return "";
}

}  // namespace

Command add_checkpoint_command(CLI::App &app) {
  auto args = std::make_shared<CheckpointArgs>();
  app.require_subcommand(1);
  CLI::App *info = app.add_subcommand("info", "Print a checkpoint's step, ranks and tensors (name, dtype, shape)");
  info->add_option("checkpoint", args->checkpoint, "a checkpoint directory (its newest step) or a step directory")
      ->required();
  CLI::App *out = app.add_subcommand("export", "Write the model with the checkpoint's trained initializers as ONNX");
  out->add_option("checkpoint", args->checkpoint, "a checkpoint directory (its newest step) or a step directory")
      ->required();
  out->add_option("-o,--output", args->output, "the .onnx file to write")->required();
  out->add_option("--model", args->model,
                  "the model the bundle was compiled from (default: the one `cleave run` recorded in CK/source.json)");
  return [args, info, out] {
    codegen::Checkpoint ck = find(args->checkpoint);
    if (info->parsed()) {
      auto whole = codegen::assemble_shards(codegen::checkpoint_files(ck));
      std::printf("checkpoint %s\nstep %lld\nranks %d\n", ck.dir.c_str(), static_cast<long long>(ck.step), ck.ranks);
      for (const auto &[name, t] : whole) std::printf("tensor %s %s %s\n", name.c_str(), t.dtype.c_str(), shape_str(t.shape).c_str());
      return 0;
    }
    (void)out;
    std::string model = args->model.empty() ? recorded_model(args->checkpoint) : args->model;
    if (model.empty())
      CLEAVE_USER_ERROR("checkpoint export: give --model (", args->checkpoint, " has no source.json from cleave run)");
    check_output_file("--output", args->output);
    auto whole = codegen::assemble_shards(codegen::checkpoint_files(ck));
    std::map<std::string, std::vector<uint8_t>> values;
    for (auto &[name, t] : whole) values[name] = std::move(t.bytes);
    save_onnx_with_initializers(model, args->output, std::move(values), "--output", true);
    std::fprintf(stderr, "wrote %s: %s with the tensors of step %lld\n", args->output.c_str(), model.c_str(),
                 static_cast<long long>(ck.step));
    return 0;
  };
}

}  // namespace cleave::cli
