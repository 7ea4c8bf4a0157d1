// `cleave run`: builds a bundle (cmake + Ninja, in DIR/build) and trains with it under mpirun, passing on rank 0's
// `step k loss v` lines (flushed by the rank after the first step, then at most once a second); --save-model gathers
// the trained parameter shards into an .onnx file. mpirun's and the ranks' stderr go to DIR/build/run.log; a failed
// job ends with one `error: ...` line naming its cause (codegen/run_failure.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>

#include "codegen/bundle_run.h"
#include "codegen/checkpoint.h"
#include "codegen/run_failure.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "tools/cli/commands.h"
#include "tools/cli/npy.h"

namespace cleave::cli {
namespace {
namespace fs = std::filesystem;

struct RunArgs {
  std::string bundle;
  std::vector<std::string> data;
  int64_t steps = 1;
  std::string save_model;
  std::string runtime_dir;
  std::string build_type = "Release";
  // Checkpoints and resume.
  std::string checkpoint_dir, resume;
  std::optional<int64_t> checkpoint_every, keep;
  std::string log_json;
  KnobFlags knobs;
};

/** The files of --data (or --val-data) by input name, as absolute paths: every input of the bundle once, each a
 *  readable .npy with the input's per-sample shape, all with the same number of samples. */
std::map<std::string, std::string> data_files(const codegen::Bundle &bundle, const std::vector<std::string> &items,
                                              const std::string &flag) {
  std::map<std::string, std::string> files;
  for (const auto &item : items) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      CLEAVE_USER_ERROR(flag, ": expected NAME=FILE.npy, got \"", item, "\"");
    if (!files.emplace(item.substr(0, eq), fs::absolute(item.substr(eq + 1)).string()).second)
      CLEAVE_USER_ERROR(flag, ": input \"", item.substr(0, eq), "\" given twice");
  }
  for (const auto &file : files)
    if (std::none_of(bundle.inputs.begin(), bundle.inputs.end(),
                     [&](const codegen::BundleInput &in) { return in.name == file.first; }))
      CLEAVE_USER_ERROR(flag, ": the model has no input \"", file.first, "\"");
  // The ranks read the files with the same reader (runtime/common/npy_format.h): what passes here, they accept.
  std::string first_name;
  int64_t first_samples = -1;
  for (const codegen::BundleInput &input : bundle.inputs) {
    const std::string &name = input.name;
    auto it = files.find(name);
    if (it == files.end()) CLEAVE_USER_ERROR(flag, ": no data for input \"", name, "\"");
    NpyArray a = read_npy_header(it->second);
    std::optional<DType> dt = parse_dtype(input.dtype);
    if (!dt) CLEAVE_USER_ERROR(bundle.dir, ": manifest.json: input \"", name, "\" has an unknown dtype");
    check_npy_feeds(a, it->second, !is_float(*dt));
    std::vector<int64_t> sample = input.shape;
    if (!sample.empty()) sample.erase(sample.begin() + input.sample_axis);
    std::vector<int64_t> have(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end());
    if (a.shape.empty() || a.shape[0] == 0 || have != sample)
      CLEAVE_USER_ERROR(it->second, ": array of shape ", shape_str(a.shape), " cannot feed input \"", name, "\"");
    if (first_samples < 0) {
      first_name = name;
      first_samples = a.shape[0];
    } else if (a.shape[0] != first_samples) {
      CLEAVE_USER_ERROR(flag, ": \"", first_name, "\" has ", first_samples, " samples (", files.at(first_name),
                        ") but \"", name, "\" has ", a.shape[0], " (", it->second, "); every input needs the same number");
    }
  }
  return files;
}

/** The rank programs' flags for `a`'s checkpoint, training and log options (rt::TrainingRun), resume excepted. */
std::vector<std::string> rank_flags(const RunArgs &a) {
  std::vector<std::string> out;
  push_flag(out, "--checkpoint-dir", a.checkpoint_dir.empty() ? "" : fs::absolute(a.checkpoint_dir).string());
  push_flag(out, "--checkpoint-every", flag_value(a.checkpoint_every));
  push_flag(out, "--keep", flag_value(a.keep));
  for (std::string &flag : a.knobs.rank_args()) out.push_back(std::move(flag));
  push_flag(out, "--log-json", a.log_json.empty() ? "" : fs::absolute(a.log_json).string());
  return out;
}

/** The --resume flag for the ranks: the checkpoint as it is when the bundle's ranks hold the same boxes, else a copy
 *  resharded for this bundle under BUILD/resharded/ (another plan or rank count). */
std::vector<std::string> resume_flags(const RunArgs &a, const codegen::Bundle &bundle, const std::string &build_dir) {
  if (a.resume.empty()) return {};
  std::string from = a.resume == "auto" ? a.checkpoint_dir : a.resume;
  if (a.resume == "auto" && from.empty()) CLEAVE_USER_ERROR("--resume auto: needs --checkpoint-dir");
  std::optional<codegen::Checkpoint> ck = codegen::find_checkpoint(from);
  if (!ck) {
    if (a.resume == "auto") return {};  // nothing to resume yet: a fresh start
    CLEAVE_USER_ERROR("--resume ", a.resume, ": no complete checkpoint there (step-<k>/manifest.json)");
  }
  if (codegen::same_layout(*ck, bundle)) return {"--resume", ck->dir};
  std::string out = (fs::path(build_dir) / "resharded" / fs::path(ck->dir).filename()).string();
  std::fprintf(stderr, "cleave: resharding the checkpoint of step %lld (%d ranks) for this bundle's %d ranks\n",
               static_cast<long long>(ck->step), ck->ranks, bundle.ranks);
  codegen::reshard_checkpoint(*ck, bundle, out);
  return {"--resume", out};
}

}  // namespace

Command add_run_command(CLI::App &app) {
  auto args = std::make_shared<RunArgs>();
  app.footer("Build a bundle written by `cleave compile` (in DIR/build) and train with it under mpirun, printing "
             "`step <k> loss <v>` per step like `cleave eval`.");
  app.add_option("bundle", args->bundle, "the bundle directory")->required();
  app.add_option("--data", args->data, "graph inputs from .npy files: NAME=FILE,... (first dim = samples)")
      ->required()
      ->delimiter(',');
  CLI::Option *steps = app.add_option("--steps", args->steps, "training steps")->check(kPositive);
  app.add_option("--save-model", args->save_model, "write the model with the trained initializers to this .onnx file");
  app.add_option("--runtime-dir", args->runtime_dir,
                 "a prebuilt runtime library directory (default: $CLEAVE_RUNTIME_DIR, else build the bundled one)");
  app.add_option("--build-type", args->build_type,
                 "CMake build type of the rank programs (Debug compiles a large model's ranks ~10x faster, runs slower)")
      ->check(CLI::IsMember({"Release", "RelWithDebInfo", "Debug", "MinSizeRel"}))
      ->capture_default_str();
  app.add_option("--checkpoint-dir", args->checkpoint_dir,
                 "write checkpoints to DIR/step-<k>/ (every rank's shards, then a manifest)");
  app.add_option("--checkpoint-every", args->checkpoint_every, "checkpoint every N steps (default 1000; and at the end)")
      ->check(kPositive);
  app.add_option("--keep", args->keep, "keep the newest K checkpoints (default 2; 0 keeps all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resume", args->resume,
                 "continue from the newest checkpoint under DIR (or DIR itself), resharding it when this bundle's "
                 "plan or rank count differs; `auto`: from --checkpoint-dir's newest, if any");
  args->knobs.add_to(app, steps);
  app.add_option("--log-json", args->log_json,
                 "write one JSON line per step (step, loss, lr, grad_norm, seconds) to FILE");
  return [args] {
    codegen::Bundle bundle = codegen::read_bundle(args->bundle);
    if (!args->knobs.epochs) args->knobs.schedule(args->steps);  // bad settings: before building
    if (!args->save_model.empty()) check_output_file("--save-model", args->save_model);  // before training

    std::map<std::string, std::string> files = data_files(bundle, args->data, "--data");
    std::map<std::string, std::string> val_files;
    if (!args->knobs.val_data.empty()) val_files = data_files(bundle, args->knobs.val_data, "--val-data");

    codegen::BuildOptions build;
    build.runtime_dir = args->runtime_dir;
    if (build.runtime_dir.empty())
      if (const char *env = std::getenv("CLEAVE_RUNTIME_DIR")) build.runtime_dir = env;
    build.build_type = args->build_type;
    std::string build_dir = codegen::build_bundle(bundle, build);

    codegen::RunOptions run;
    run.steps = args->knobs.epochs ? 0 : args->steps;
    run.data = files;
    run.rank_args = rank_flags(*args);
    std::string val_list;
    for (const auto &[name, path] : val_files) val_list += (val_list.empty() ? "" : ",") + name + "=" + path;
    push_flag(run.rank_args, "--val-data", val_list);
    // The ranks' stderr goes to the log: rank 0 shows its progress on this terminal instead.
    if (::isatty(2) == 1) run.env.emplace_back("CLEAVE_PROGRESS", "tty");
    for (std::string &flag : resume_flags(*args, bundle, build_dir)) run.rank_args.push_back(std::move(flag));
    if (!args->checkpoint_dir.empty()) {
      // Which model the checkpoints belong to, for `cleave checkpoint export`.
      fs::create_directories(args->checkpoint_dir);
      nlohmann::json source = {{"model", fs::absolute(bundle.model).string()}, {"bundle", bundle.dir}};
      write_file_atomically("--checkpoint-dir", (fs::path(args->checkpoint_dir) / "source.json").string(),
                            source.dump(1) + "\n");
    }
    if (!args->save_model.empty()) run.save_prefix = (fs::path(build_dir) / "trained").string();
    // mpirun's banners and the ranks' messages go to the log; a failure is told in one line that names its cause.
    run.log_file = (fs::path(build_dir) / "run.log").string();
    run.status_dir = (fs::path(build_dir) / "run").string();
    int rc = codegen::run_bundle(bundle, build_dir, run);
    if (rc == 75) {  // rt::TrainingRun::kStoppedForResume
      std::fprintf(stderr, "cleave: stopped by a signal after a checkpoint; continue with --resume %s\n",
                   args->checkpoint_dir.c_str());
      return 75;
    }
    if (rc != 0)
      throw UserError(codegen::explain_run_failure(args->bundle, bundle.ranks, run.status_dir, run.log_file, rc));
    // What rank 0 tells the user (rt::log_info: `cleave: ...`, e.g. CLEAVE_PROFILE's step median) is not noise.
    std::istringstream log(codegen::read_file(run.log_file));
    for (std::string line; std::getline(log, line);)
      if (line.starts_with("cleave: ")) std::fprintf(stderr, "%s\n", line.c_str());

    if (!args->save_model.empty()) {
      std::map<std::string, std::vector<uint8_t>> trained = codegen::gather_saved(bundle, run.save_prefix);
      size_t saved = trained.size();
      save_onnx_with_initializers(bundle.model, args->save_model, std::move(trained));
      std::fprintf(stderr, "saved %zu trained initializers to %s\n", saved, args->save_model.c_str());
    }
    return 0;
  };
}

}  // namespace cleave::cli
