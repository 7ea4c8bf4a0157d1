#include "codegen/bundle_run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/bundle.h"
#include "codegen/checkpoint.h"
#include "ir/error.h"
#include "ir/types.h"

namespace cleave::codegen {
namespace fs = std::filesystem;

std::string shell_quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_file(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) CLEAVE_USER_ERROR(p, ": cannot read");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int shell(const std::string &cmd) {
  std::fflush(stdout);
  int rc = std::system(cmd.c_str());
  if (rc == -1) return 127;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
}

Bundle read_bundle(const std::string &dir) {
  Bundle b;
  b.dir = fs::absolute(dir).string();
  fs::path manifest_path = fs::path(b.dir) / "manifest.json";
  if (!fs::is_regular_file(manifest_path)) CLEAVE_USER_ERROR(dir, ": not a bundle (no manifest.json)");
  b.manifest = read_file(manifest_path);
  try {
    nlohmann::json m = nlohmann::json::parse(b.manifest);
    b.ranks = m.at("ranks").get<int>();
    // The backend the bundle was compiled for (cleave compile --backend): a cuda bundle builds with nvcc and its
    // ranks need one GPU each (local rank = GPU index).
    b.backend = m.value("backend", std::string("cpu"));
    b.precision = m.value("precision", std::string("fp32"));
    b.model = m.at("model").get<std::string>();
    std::string program = m.value("program", std::string("rank_<r>"));
    if (program != "ranks" && program != "rank_<r>")
      CLEAVE_USER_ERROR(manifest_path.string(), ": malformed manifest: program \"", program, "\"");
    b.shared_program = program == "ranks";
    std::string weights = m.value("weights", std::string("rank_<r>.bin"));
    if (weights != "ranks.bin" && weights != "rank_<r>.bin")
      CLEAVE_USER_ERROR(manifest_path.string(), ": malformed manifest: weights \"", weights, "\"");
    b.shared_weights = weights == "ranks.bin";
    for (const auto &[name, info] : m.at("inputs").items()) {
      BundleInput in{name, info.at("shape").get<std::vector<int64_t>>(), info.value("dtype", std::string()),
                     info.value("sample_axis", 0)};
      if (in.sample_axis < 0 || in.sample_axis >= std::max<int>(1, static_cast<int>(in.shape.size())))
        CLEAVE_USER_ERROR(dir, ": manifest.json: input \"", name, "\" has no dim ", in.sample_axis);
      b.inputs.push_back(std::move(in));
    }
  } catch (const nlohmann::json::exception &e) {
    CLEAVE_USER_ERROR(manifest_path.string(), ": malformed manifest: ", e.what());
  }
  if (b.ranks < 1) CLEAVE_USER_ERROR(manifest_path.string(), ": malformed manifest: ranks ", b.ranks);
  if (b.backend != "cpu" && b.backend != "cuda")
    CLEAVE_USER_ERROR(manifest_path.string(), ": unknown backend \"", b.backend, "\"");
  return b;
}

std::string runtime_cache_dir() {
  const char *off = std::getenv("CLEAVE_RUNTIME_CACHE");
  if (off && std::string(off) == "0") return "";
  for (const char *name : {"CLEAVE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char *v = std::getenv(name);
    if (!v || !*v) continue;
    fs::path p = v;
    if (std::string(name) == "XDG_CACHE_HOME") p /= "cleave";
    if (std::string(name) == "HOME") p = p / ".cache" / "cleave";
    return p.string();
  }
  return "";
}

std::string runtime_library(const Bundle &b) {
  return "libcleave_rt_" + b.backend + (b.precision == "fp64" ? "_f64" : "") + ".a";
}

std::string cached_runtime(const Bundle &b, const std::string &build_type) {
  std::string cache = runtime_cache_dir();
  if (cache.empty()) return "";
  // The key: every file of the bundle's runtime/ (path and bytes, in path order), the backend and the build type.
  fs::path runtime = fs::path(b.dir) / "runtime";
  std::vector<std::string> files;
  for (const auto &e : fs::recursive_directory_iterator(runtime))
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), runtime).string());
  std::sort(files.begin(), files.end());
  // fp64 bundles build the runtime with rt::real = double: a library of its own.
  std::string real = b.precision == "fp64" ? "-f64" : "";
  std::string all = b.backend + real + "\n" + build_type + "\n";
  for (const std::string &f : files) all += f + "\n" + read_file(runtime / f) + "\n";
  fs::path kept = fs::path(cache) / ("runtime-" + b.backend + real + "-" + build_type + "-" + fnv1a64_hex(all));
  fs::path lib = kept / runtime_library(b);
  if (fs::is_regular_file(lib)) return kept.string();
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) CLEAVE_USER_ERROR("runtime cache ", cache, ": cannot create it (", ec.message(), "); CLEAVE_RUNTIME_CACHE=0 ",
                            "builds each bundle's own runtime");
  fs::path work = kept.string() + ".build." + std::to_string(::getpid());
  fs::remove_all(work, ec);
  std::fprintf(stderr, "building the %s runtime once for this machine (%s)\n", b.backend.c_str(), kept.c_str());
  // The bundle's own CMakeLists configured in the cache, building the runtime target alone.
  std::string cfg = "cmake -S " + shell_quote(b.dir) + " -B " + shell_quote((work / "build").string()) +
                    " -G Ninja -DCMAKE_BUILD_TYPE=" + build_type + " -DCLEAVE_BACKEND=" + b.backend;
  std::string target = "cleave_rt_" + b.backend;
  if (shell(cfg + " 1>&2") != 0 ||
      shell("cmake --build " + shell_quote((work / "build").string()) + " --target " + target + " 1>&2") != 0) {
    fs::remove_all(work, ec);
    CLEAVE_USER_ERROR(b.dir, ": building the runtime failed");
  }
  fs::copy_file(work / "build" / "runtime" / runtime_library(b), work / runtime_library(b), ec);
  if (ec) {
    fs::remove_all(work, ec);
    CLEAVE_USER_ERROR(b.dir, ": the runtime build made no ", runtime_library(b));
  }
  fs::remove_all(work / "build", ec);
  fs::rename(work, kept, ec);  // fails when another build of this key finished first: keep that one
  if (ec) fs::remove_all(work, ec);
  if (!fs::is_regular_file(lib)) CLEAVE_USER_ERROR("runtime cache ", kept.string(), ": no ", lib.filename().string());
  return kept.string();
}

std::string build_bundle(const Bundle &b, const BuildOptions &options) {
  fs::path dir = b.dir, build = dir / "build";
  std::string runtime_dir =
      options.runtime_dir.empty() ? cached_runtime(b, options.build_type) : fs::absolute(options.runtime_dir).string();
  if (!runtime_dir.empty() && !fs::is_regular_file(fs::path(runtime_dir) / runtime_library(b)))
    CLEAVE_USER_ERROR("--runtime-dir ", runtime_dir, ": no ", runtime_library(b),
                      b.precision == "fp64" ? " (this bundle is float64: a runtime built with -DCLEAVE_RT_F64=ON)" : "");
  std::string cached_type, cached_backend, cached_runtime_dir;
  if (fs::exists(build / "build.ninja")) {
    std::istringstream cache(read_file(build / "CMakeCache.txt"));
    for (std::string line; std::getline(cache, line);) {
      if (line.starts_with("CMAKE_BUILD_TYPE:")) cached_type = line.substr(line.find('=') + 1);
      if (line.starts_with("CLEAVE_BACKEND:")) cached_backend = line.substr(line.find('=') + 1);
      if (line.starts_with("CLEAVE_RUNTIME_DIR:")) cached_runtime_dir = line.substr(line.find('=') + 1);
    }
  }
  if (cached_type != options.build_type || cached_backend != b.backend || cached_runtime_dir != runtime_dir) {
    std::string cmd = "cmake -S " + shell_quote(dir.string()) + " -B " + shell_quote(build.string()) +
                      " -G Ninja -DCMAKE_BUILD_TYPE=" + options.build_type + " -DCLEAVE_BACKEND=" + b.backend +
                      " -DCLEAVE_RUNTIME_DIR=" + shell_quote(runtime_dir);
    if (shell(cmd + " 1>&2") != 0) CLEAVE_USER_ERROR(b.dir, ": configuring the bundle failed");
  }
  if (shell("cmake --build " + shell_quote(build.string()) + " 1>&2") != 0)
    CLEAVE_USER_ERROR(b.dir, ": building the bundle failed");
  return build.string();
}

int run_bundle(const Bundle &b, const std::string &build_dir, const RunOptions &options) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  fs::path build = build_dir, dir = b.dir;
  std::vector<std::pair<std::string, std::string>> env = options.env;
  if (!options.status_dir.empty()) {
    // A previous run's records would be read as this one's.
    std::error_code ec;
    fs::remove_all(options.status_dir, ec);
    fs::create_directories(options.status_dir, ec);
    if (ec) CLEAVE_USER_ERROR(options.status_dir, ": cannot create the run status directory (", ec.message(), ")");
    env.emplace_back("CLEAVE_STATUS_DIR", options.status_dir);
  }
  std::string cmd;
  for (const auto &[name, value] : env) cmd += name + "=" + shell_quote(value) + " ";
  cmd += "mpirun --allow-run-as-root --oversubscribe";
  for (const auto &[name, value] : env) cmd += " -x " + name;
  for (int r = 0; r < b.ranks; ++r) {
    cmd += std::string(r ? " :" : "") + " -np 1 " + shell_quote((build / b.program(r)).string()) +
           (options.steps > 0 ? " --steps " + std::to_string(options.steps) : std::string()) + " --weights " +
           shell_quote((dir / b.weights(r)).string());
    for (const auto &[name, path] : options.data) cmd += " " + shell_quote(name + "=" + path);
    if (!options.save_prefix.empty()) cmd += " --save " + shell_quote(options.save_prefix);
    for (const std::string &arg : options.rank_args) cmd += " " + shell_quote(arg);
  }
  if (!options.log_file.empty()) cmd += " 2> " + shell_quote(options.log_file);
  if (options.stdout_to_stderr) cmd += " 1>&2";
  return shell(cmd);
}

std::map<std::string, std::vector<uint8_t>> gather_saved(const Bundle &b, const std::string &save_prefix) {
  std::vector<std::string> files;
  for (int r = 0; r < b.ranks; ++r) files.push_back(save_prefix + ".rank_" + std::to_string(r) + ".bin");
  std::map<std::string, std::vector<uint8_t>> out;
  for (auto &[name, t] : assemble_shards(files)) out[name] = std::move(t.bytes);
  return out;
}

}  // namespace cleave::codegen
