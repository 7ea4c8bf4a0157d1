// `cleave run`: builds a bundle (cmake + Ninja, in DIR/build) and trains with it under mpirun, passing on rank 0's
// `step k loss v` lines (flushed by the rank after the first step, then at most once a second); --save-model gathers
// the trained parameter shards into an .onnx file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/bundle.h"
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
};

std::string shell_quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) CLEAVE_USER_ERROR(p.string(), ": cannot read");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int shell(const std::string &cmd) {
  int rc = std::system(cmd.c_str());
  if (rc == -1) return 127;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
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
  app.add_option("--steps", args->steps, "training steps")->check(kPositive);
  app.add_option("--save-model", args->save_model, "write the model with the trained initializers to this .onnx file");
  app.add_option("--runtime-dir", args->runtime_dir,
                 "a prebuilt runtime library directory (default: $CLEAVE_RUNTIME_DIR, else build the bundled one)");
  app.add_option("--build-type", args->build_type,
                 "CMake build type of the rank programs (Debug compiles a large model's ranks ~10x faster, runs slower)")
      ->check(CLI::IsMember({"Release", "RelWithDebInfo", "Debug", "MinSizeRel"}))
      ->capture_default_str();
  return [args] {
    fs::path dir = fs::absolute(args->bundle);
    fs::path manifest_path = dir / "manifest.json";
    if (!fs::is_regular_file(manifest_path))
      CLEAVE_USER_ERROR(args->bundle, ": not a bundle (no manifest.json)");
    nlohmann::json m;
    try {
      m = nlohmann::json::parse(slurp(manifest_path));
    } catch (const nlohmann::json::exception &e) {
      CLEAVE_USER_ERROR(manifest_path.string(), ": malformed manifest: ", e.what());
    }
    int ranks = m.at("ranks").get<int>();
    // The backend the bundle was compiled for (cleave compile --backend): a cuda bundle builds with nvcc and its
    // ranks need one GPU each (local rank = GPU index).
    std::string backend = m.value("backend", std::string("cpu"));
    if (backend != "cpu" && backend != "cuda")
      CLEAVE_USER_ERROR(manifest_path.string(), ": unknown backend \"", backend, "\"");
    if (!args->save_model.empty()) check_output_file("--save-model", args->save_model);  // before training

    // Data: every input once, with the right per-sample shape.
    std::map<std::string, std::string> files;
    for (const auto &item : args->data) {
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
        CLEAVE_USER_ERROR("--data: expected NAME=FILE.npy, got \"", item, "\"");
      if (!files.emplace(item.substr(0, eq), fs::absolute(item.substr(eq + 1)).string()).second)
        CLEAVE_USER_ERROR("--data: input \"", item.substr(0, eq), "\" given twice");
    }
    const auto &inputs = m.at("inputs");
    for (const auto &[name, path] : files)
      if (!inputs.contains(name)) CLEAVE_USER_ERROR("--data: the model has no input \"", name, "\"");
    // The ranks read the files with the same reader (runtime/common/npy_format.h): what passes here, they accept.
    std::string first_name;
    int64_t first_samples = -1;
    for (const auto &[name, info] : inputs.items()) {
      auto it = files.find(name);
      if (it == files.end()) CLEAVE_USER_ERROR("--data: no data for input \"", name, "\"");
      NpyArray a = read_npy_header(it->second);
      std::optional<DType> dt = parse_dtype(info.at("dtype").get<std::string>());
      if (!dt) CLEAVE_USER_ERROR(manifest_path.string(), ": input \"", name, "\" has an unknown dtype");
      check_npy_feeds(a, it->second, !is_float(*dt));
      std::vector<int64_t> want = info.at("shape").get<std::vector<int64_t>>();
      std::vector<int64_t> sample(want.begin() + 1, want.end());
      std::vector<int64_t> have(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end());
      if (a.shape.empty() || a.shape[0] == 0 || have != sample)
        CLEAVE_USER_ERROR(it->second, ": array of shape ", shape_str(a.shape), " cannot feed input \"", name, "\"");
      if (first_samples < 0) {
        first_name = name;
        first_samples = a.shape[0];
      } else if (a.shape[0] != first_samples) {
        CLEAVE_USER_ERROR("--data: \"", first_name, "\" has ", first_samples, " samples (", files.at(first_name),
                          ") but \"", name, "\" has ", a.shape[0], " (", it->second,
                          "); every input needs the same number");
      }
    }

    // Build (Ninja makes an unchanged rebuild a no-op).
    fs::path build = dir / "build";
    std::string rt_dir = args->runtime_dir;
    if (rt_dir.empty())
      if (const char *env = std::getenv("CLEAVE_RUNTIME_DIR")) rt_dir = env;
    // Configure once, and again when the build type changes (Ninja then rebuilds the rank programs).
    std::string cached_type, cached_backend;
    if (fs::exists(build / "build.ninja")) {
      std::istringstream cache(slurp(build / "CMakeCache.txt"));
      for (std::string line; std::getline(cache, line);) {
        if (line.starts_with("CMAKE_BUILD_TYPE:")) cached_type = line.substr(line.find('=') + 1);
        if (line.starts_with("CLEAVE_BACKEND:")) cached_backend = line.substr(line.find('=') + 1);
      }
    }
    if (cached_type != args->build_type || cached_backend != backend) {
      std::string cmd = "cmake -S " + shell_quote(dir.string()) + " -B " + shell_quote(build.string()) +
                        " -G Ninja -DCMAKE_BUILD_TYPE=" + args->build_type + " -DCLEAVE_BACKEND=" + backend;
      if (!rt_dir.empty()) cmd += " -DCLEAVE_RUNTIME_DIR=" + shell_quote(fs::absolute(rt_dir).string());
      if (shell(cmd + " 1>&2") != 0) CLEAVE_USER_ERROR(args->bundle, ": configuring the bundle failed");
    }
    if (shell("cmake --build " + shell_quote(build.string()) + " 1>&2") != 0)
      CLEAVE_USER_ERROR(args->bundle, ": building the bundle failed");

    // Launch: one MPMD app context per rank.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    fs::path save_prefix = build / "trained";
    std::string cmd = "mpirun --allow-run-as-root --oversubscribe";
    for (int r = 0; r < ranks; ++r) {
      cmd += std::string(r ? " :" : "") + " -np 1 " + shell_quote((build / ("rank_" + std::to_string(r))).string()) +
             " --steps " + std::to_string(args->steps) + " --weights " +
             shell_quote((dir / "weights" / ("rank_" + std::to_string(r) + ".bin")).string());
      for (const auto &[name, path] : files) cmd += " " + shell_quote(name + "=" + path);
      if (!args->save_model.empty()) cmd += " --save " + shell_quote(save_prefix.string());
    }
    std::fflush(stdout);
    int rc = shell(cmd);
    if (rc != 0) CLEAVE_USER_ERROR(args->bundle, ": the training job failed (mpirun exit code ", rc, ")");

    if (!args->save_model.empty()) {
      std::map<std::string, std::vector<uint8_t>> trained;
      for (const auto &rank_info : m.at("per_rank")) {
        int r = rank_info.at("rank").get<int>();
        std::string path = save_prefix.string() + ".rank_" + std::to_string(r) + ".bin";
        auto shards = codegen::decode_checkpoint(slurp(path), path);
        std::map<std::string, std::string> by_name(shards.begin(), shards.end());
        for (const auto &s : rank_info.at("saved")) {
          std::string name = s.at("name").get<std::string>();
          auto shape = s.at("shape").get<std::vector<int64_t>>();
          auto begin = s.at("begin").get<std::vector<int64_t>>();
          auto end = s.at("end").get<std::vector<int64_t>>();
          auto dt = parse_dtype(s.at("dtype").get<std::string>());
          CLEAVE_CHECK(dt.has_value(), "bad dtype in manifest");
          int es = dtype_size(*dt);
          auto &full = trained[name];
          full.resize(static_cast<size_t>(num_elements(shape) * es));
          const std::string &src = by_name.at(name);
          // Scatter the shard's row-major box into the whole tensor.
          std::vector<int64_t> ext(shape.size());
          int64_t count = 1;
          for (size_t d = 0; d < shape.size(); ++d) count *= (ext[d] = end[d] - begin[d]);
          CLEAVE_CHECK(static_cast<int64_t>(src.size()) == count * es, "shard size of ", name);
          for (int64_t i = 0; i < count; ++i) {
            int64_t rem = i, flat = 0, stride = 1;
            for (size_t d = shape.size(); d-- > 0;) {
              flat += (begin[d] + rem % ext[d]) * stride;
              rem /= ext[d];
              stride *= shape[d];
            }
            std::memcpy(full.data() + flat * es, src.data() + i * es, static_cast<size_t>(es));
          }
        }
      }
      save_onnx_with_initializers(m.at("model").get<std::string>(), args->save_model, trained);
      std::fprintf(stderr, "saved %zu trained initializers to %s\n", trained.size(), args->save_model.c_str());
    }
    return 0;
  };
}

}  // namespace cleave::cli
