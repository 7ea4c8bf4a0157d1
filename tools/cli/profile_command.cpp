// `cleave profile`: measures, on this machine, what the cost model otherwise estimates (planner/cost/profile.h): the
// kernel time of every op at the shard shapes the given plans use, and the time of each collective per group size
// and message size. Each plan is compiled into a bundle for the backend (cpu: OpenBLAS + MPI; cuda: cuBLAS, cuDNN,
// NCCL, one GPU per rank), built, and run for a few steps under mpirun with CLEAVE_PROFILE set (the rank programs
// time themselves: runtime rt.h); the collectives are timed by runtime/bench/comm_bench.cpp, built against the same
// runtime.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "codegen/bundle.h"
#include "codegen/bundle_run.h"
#include "codegen/lower.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/tensor_data.h"
#include "ir/verifier.h"
#include "planner/search/make_plan.h"
#include "planner/cost/profile.h"
#include "planner/cost/profile_stats.h"
#include "planner/plan/validate.h"
#include "tools/cli/commands.h"

namespace cleave::cli {
namespace {
namespace fs = std::filesystem;

struct ProfileArgs {
  std::string model;
  std::string backend = "cpu";
  int devices = 1;
  std::optional<int64_t> batch;
  std::vector<std::string> planners, plan_files;
  uint64_t seed = 0;
  std::string topology;
  std::string out;
  int64_t steps = 20;
  int repeats = 1;
  std::string work_dir;
  std::string runtime_dir;
  std::string build_type = "Release";
  int64_t max_bytes = int64_t{1} << 22;
  int reps = 5;
  TrainFlags train_flags;
};

/** The GPUs this process may use: the count of `nvidia-smi -L`, capped by the entries of CUDA_VISIBLE_DEVICES where
 *  it is set; 0 without a driver. */
int visible_gpus() {
  int count = 0;
  if (FILE *p = ::popen("nvidia-smi -L 2>/dev/null", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, p))
      if (std::strncmp(line, "GPU ", 4) == 0) ++count;
    ::pclose(p);
  }
  if (const char *env = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string list = env;
    int entries = list.empty() ? 0 : static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
    count = std::min(count, entries);
  }
  return count;
}

/** A .npy (format 1.0) of `shape` and dtype: float32 normal values from `seed`, or int64 zeros (class 0 and index 0
 *  are valid for every label and index input, and timing does not depend on the values). */
void write_npy(const fs::path &path, const std::vector<int64_t> &shape, bool integer, uint32_t seed) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header = std::string("{'descr': '") + (integer ? "<i8" : "<f4") + "', 'fortran_order': False, 'shape': (" +
                       dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  uint16_t len = static_cast<uint16_t>(header.size());
  bytes += static_cast<char>(len & 0xff);
  bytes += static_cast<char>(len >> 8);
  bytes += header;
  int64_t n = num_elements(shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < n; ++i) {
    if (integer) {
      int64_t zero = 0;
      bytes.append(reinterpret_cast<const char *>(&zero), 8);
    } else {
      float v = normal(rng);
      bytes.append(reinterpret_cast<const char *>(&v), 4);
    }
  }
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) CLEAVE_USER_ERROR(path.string(), ": cannot write");
}

struct NamedPlan {
  std::string name;
  plan::Plan plan;
};

/** A plan's bundle, built, and the synthetic data it runs on. */
struct PreparedPlan {
  codegen::Bundle bundle;
  std::map<std::string, std::string> data;
  std::string build_dir;
};

/** Compiles one plan into a bundle in `dir` with synthetic inputs (one batch), and builds it. */
PreparedPlan prepare_plan(const ProfileArgs &a, const Graph &g, const NamedPlan &np, const fs::path &dir) {
  codegen::Lowered lowered = codegen::lower(g, np.plan);
  if (lowered.precision != "fp64") lowered.precision = a.train_flags.precision;  // fp64: the graph's own dtype
  fs::create_directories(dir);
  codegen::write_bundle(g, np.plan, lowered, dir.string(), fs::absolute(a.model).lexically_normal().string(),
                        a.backend);
  PreparedPlan out{codegen::read_bundle(dir.string()), {}, {}};
  uint32_t seed = 1;
  for (const codegen::BundleInput &in : out.bundle.inputs) {
    fs::path file = dir / ("input_" + std::to_string(seed) + ".npy");
    if (in.dtype != "f32" && in.dtype != "i64")
      CLEAVE_USER_ERROR("input \"", in.name, "\" has dtype ", in.dtype,
                        ": cleave profile synthesises f32 and i64 inputs only");
    std::vector<int64_t> sample_major = in.shape;  // files hold samples first, whatever the sample axis
    if (!sample_major.empty()) std::rotate(sample_major.begin(), sample_major.begin() + in.sample_axis,
                                           sample_major.begin() + in.sample_axis + 1);
    write_npy(file, sample_major, in.dtype == "i64", seed++);
    out.data[in.name] = file.string();
  }
  out.build_dir = codegen::build_bundle(out.bundle, {a.runtime_dir, a.build_type});
  return out;
}

/** Runs a prepared plan once (run `run` of --repeats, written as `dir`/profile[_<run>].rank_<r>.json); adds its
 *  per-site expected_seconds to `samples` and returns rank 0's median step seconds after the warm-up step. */
double profile_plan(const ProfileArgs &a, const Graph &g, const NamedPlan &np, const fs::path &dir,
                    const PreparedPlan &prepared, int run, plan::ProfileSamples &samples) {
  fs::path prefix = dir / (run == 0 ? std::string("profile") : "profile_" + std::to_string(run));
  std::fprintf(stderr, "profiling plan %s on %d rank%s%s\n", np.name.c_str(), np.plan.devices,
               np.plan.devices == 1 ? "" : "s",
               a.repeats > 1 ? (", run " + std::to_string(run + 1) + " of " + std::to_string(a.repeats)).c_str() : "");
  codegen::RunOptions options;
  options.steps = a.steps;
  options.data = prepared.data;
  // Statements are timed one by one only in steps that run as they come, not replayed as CUDA graphs.
  options.env = {{"CLEAVE_PROFILE", prefix.string()}, {"CLEAVE_CUDA_GRAPHS", "0"}};
  options.stdout_to_stderr = true;
  if (codegen::run_bundle(prepared.bundle, prepared.build_dir, options) != 0)
    CLEAVE_USER_ERROR("plan ", np.name, ": the profiling run failed (see above)");
  std::vector<plan::RankFile> ranks;
  for (int r = 0; r < np.plan.devices; ++r) {
    fs::path file = prefix.string() + ".rank_" + std::to_string(r) + ".json";
    ranks.push_back({file.string(), plan::parse_rank_timings(codegen::read_file(file), file.string())});
  }
  return plan::add_profile_run(samples, g, np.plan, np.name, ranks);
}

/** Builds and runs the collective benchmark on `devices` ranks; its curves. */
std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> profile_collectives(
    const ProfileArgs &a, const fs::path &dir) {
  fs::path src = fs::path(codegen::runtime_source_dir()) / "bench", build = dir / "comm_bench";
  std::string cfg = "cmake -S " + codegen::shell_quote(src.string()) + " -B " + codegen::shell_quote(build.string()) +
                    " -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_BACKEND=" + a.backend;
  if (!a.runtime_dir.empty()) cfg += " -DCLEAVE_RUNTIME_DIR=" + codegen::shell_quote(fs::absolute(a.runtime_dir).string());
  std::fprintf(stderr, "profiling collectives on 2..%d ranks, 4..%lld bytes\n", a.devices,
               static_cast<long long>(a.max_bytes));
  if (codegen::shell(cfg + " 1>&2") != 0 || codegen::shell("cmake --build " + codegen::shell_quote(build.string()) + " 1>&2") != 0)
    CLEAVE_USER_ERROR("building the collective benchmark (", src.string(), ") failed");
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  fs::path out = dir / "comm_bench.txt";
  std::string run = "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(a.devices) + " " +
                    codegen::shell_quote((build / "comm_bench").string()) + " --max-bytes " + std::to_string(a.max_bytes) +
                    " --reps " + std::to_string(a.reps) + " > " + codegen::shell_quote(out.string());
  if (codegen::shell(run) != 0) CLEAVE_USER_ERROR("the collective benchmark failed (see above)");
  std::map<std::string, std::map<int, std::vector<std::pair<double, double>>>> curves;
  std::istringstream lines(codegen::read_file(out));
  std::string kind;
  int group = 0;
  double bytes = 0, secs = 0;
  while (lines >> kind >> group >> bytes >> secs)
    curves[kind][group].emplace_back(bytes, std::max(secs, 1e-9));  // a clock tick of 0 is still a positive time
  for (const char *k : plan::kProfileCollectives)
    for (int p = 2; p <= a.devices; ++p)
      CLEAVE_CHECK(curves.count(k) && curves[k].count(p), "the collective benchmark printed no ", k, " over ", p,
                   " ranks");
  return curves;
}

}  // namespace

Command add_profile_command(CLI::App &app) {
  auto args = std::make_shared<ProfileArgs>();
  app.footer("Measure on this machine the kernel time of every op at the shard shapes the given plans use (each plan "
             "is compiled for --backend, built and run for --steps steps under mpirun with CLEAVE_PROFILE set) and the "
             "time of each "
             "collective per group size 2..--devices and message size 4..--max-bytes (powers of two), and of the "
             "plans' region copies and data reads per size, and write them "
             "as a profile (planner/cost/profile.h) for --profile on explain, plan, compile and simulate.");
  app.add_option("model", args->model, "model file (.onnx, or IR text)")->required();
  app.add_option("--backend", args->backend,
                 "cpu (OpenBLAS kernels, MPI collectives) or cuda (cuBLAS/cuDNN kernels, NCCL collectives; one GPU "
                 "per rank, so --devices at most the visible GPUs); default cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--devices", args->devices, "ranks: the plans' device count and the largest collective group")
      ->check(kPositive);
  app.add_option("--batch", args->batch, "samples per step (fixes a symbolic batch dimension)")->check(kPositive);
  add_planner_option(app, args->planners, "plans to measure (repeatable; default data)");
  app.add_option("--plan", args->plan_files, "plans to measure, as plan files (repeatable)");
  app.add_option("--seed", args->seed, "seed of the random planner (default 0)");
  add_topology_option(app, args->topology);
  app.get_option("--topology")
      ->description("machine the tofu, icml18, flexflow and frontier planners plan for (a preset or a JSON file)");
  app.add_option("-o,--output", args->out, "the profile JSON to write")->required();
  app.add_option("--steps", args->steps, "steps per plan run; the first is a warm-up (default 20)")->check(kPositive);
  app.add_option("--repeats", args->repeats,
                 "runs of every plan, round-robin over the plans; figures over all runs (default 1)")
      ->check(kPositive);
  app.add_option("--work-dir", args->work_dir,
                 "where bundles and the benchmark are built (kept); default a temporary directory, removed after");
  app.add_option("--runtime-dir", args->runtime_dir,
                 "a prebuilt runtime library directory (default: $CLEAVE_RUNTIME_DIR, else build the bundled one)");
  app.add_option("--build-type", args->build_type, "CMake build type of the rank programs (default Release)")
      ->check(CLI::IsMember({"Release", "RelWithDebInfo", "Debug", "MinSizeRel"}));
  app.add_option("--max-bytes", args->max_bytes, "largest collective message, bytes (default 4194304)")
      ->check(kPositive);
  app.add_option("--reps", args->reps, "timed repetitions per collective case (default 5)")->check(kPositive);
  args->train_flags.add_to(app);
  return [args] {
    const ProfileArgs &a = *args;
    if (a.max_bytes < 4) CLEAVE_USER_ERROR("--max-bytes: must be at least 4, got ", a.max_bytes);
    fs::path target(a.out);
    check_output_file("-o", a.out);
    std::optional<plan::Topology> topo;
    if (!a.topology.empty()) topo = plan::load_topology(a.topology);
    std::string runtime_dir = a.runtime_dir;
    if (runtime_dir.empty())
      if (const char *env = std::getenv("CLEAVE_RUNTIME_DIR")) runtime_dir = env;
    ProfileArgs resolved = a;
    resolved.runtime_dir = runtime_dir;
    std::string runtime_lib = "libcleave_rt_" + a.backend + ".a";
    if (!runtime_dir.empty() && !fs::is_regular_file(fs::path(runtime_dir) / runtime_lib))
      CLEAVE_USER_ERROR(a.runtime_dir.empty() ? "$CLEAVE_RUNTIME_DIR " : "--runtime-dir ", runtime_dir, ": no ",
                        runtime_lib, " for --backend ", a.backend,
                        a.backend == "cuda" ? " (build cleave with CLEAVE_ENABLE_CUDA=ON)" : "");
    int gpus = a.backend == "cuda" ? visible_gpus() : 0;
    if (a.backend == "cuda" && gpus == 0)
      CLEAVE_USER_ERROR("--backend cuda: no GPU is visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES)");
    // NCCL refuses two ranks of one communicator on the same GPU, and a shared GPU would time contention.
    if (a.backend == "cuda" && a.devices > gpus)
      CLEAVE_USER_ERROR("--devices ", a.devices, ": --backend cuda runs one rank per GPU, and ", gpus, " GPU",
                        gpus == 1 ? " is" : "s are", " visible");

    Graph g = load_training_graph(a.model, a.batch, a.train_flags, Weights::defer_external);
    verify(g);
    std::vector<NamedPlan> plans;
    std::vector<std::string> planners = a.planners;
    if (planners.empty() && a.plan_files.empty()) planners.push_back("data");
    for (const std::string &name : planners)
      plans.push_back({name, plan::make_plan(g, name, a.devices, topo ? &*topo : nullptr, a.seed)});
    for (const std::string &file : a.plan_files) {
      plan::Plan p = read_plan_file(file);
      if (p.devices != a.devices)
        CLEAVE_USER_ERROR(file, ": the plan is for ", p.devices, " devices, --devices says ", a.devices);
      plans.push_back({fs::path(file).filename().string(), p});
    }
    for (NamedPlan &np : plans) plan::validate_plan(g, np.plan);

    bool temporary = a.work_dir.empty();
    fs::path work = temporary ? fs::temp_directory_path() / ("cleave-profile-" + std::to_string(::getpid()))
                              : fs::absolute(a.work_dir);
    fs::create_directories(work);
    plan::Profile profile;
    profile.backend = a.backend;
    try {
      plan::ProfileSamples samples;
      std::vector<PreparedPlan> prepared;
      for (size_t i = 0; i < plans.size(); ++i)
        prepared.push_back(prepare_plan(resolved, g, plans[i], work / ("plan_" + std::to_string(i))));
      // Runs round-robin over the plans, so that a machine whose speed drifts (other tenants, clocks) slows every
      // plan's samples alike. A statement's time is the mean over runs and ranks of each run's expected_seconds
      // (the cost model adds expected times), a plan's step the median over runs of each run's median step.
      std::vector<std::vector<double>> steps(plans.size());
      for (int run = 0; run < a.repeats; ++run)
        for (size_t i = 0; i < plans.size(); ++i)
          steps[i].push_back(profile_plan(resolved, g, plans[i], work / ("plan_" + std::to_string(i)), prepared[i],
                                          run, samples));
      for (size_t i = 0; i < plans.size(); ++i)
        profile.plans.push_back({plans[i].name, plans[i].plan.devices, std::max(plan::median(steps[i]), 1e-9)});
      // One core of a shared machine may run slower than the other for minutes (another tenant): each rank's speed
      // is fitted on the shares several ranks ran, and every time is kept at the mean speed. Not when ranks share
      // cores: the fit would describe how the scheduler shared them in these runs, which no later run repeats. On
      // cuda every rank has a GPU of its own (checked above).
      unsigned cores = std::thread::hardware_concurrency();
      bool shared_cores = a.backend == "cpu" && cores != 0 && static_cast<unsigned>(a.devices) > cores;
      if (shared_cores) std::fprintf(stderr, "no rank speeds: %d ranks on %u cores share them\n", a.devices, cores);
      plan::summarise_samples(samples, a.devices, !shared_cores, profile);
      if (a.devices >= 2) profile.collectives = profile_collectives(resolved, work);
    } catch (...) {
      std::error_code ec;
      if (temporary) fs::remove_all(work, ec);
      throw;
    }
    std::string text = plan::profile_json(profile);
    write_file_atomically("-o", a.out, text);
    if (temporary) fs::remove_all(work);
    size_t shares = 0;
    for (const auto &[op, keys] : profile.compute) shares += keys.size();
    std::fprintf(stderr, "wrote %s: %zu op shares of %zu ops, %zu collective curves\n", a.out.c_str(), shares,
                 profile.compute.size(),
                 [&] {
                   size_t n = 0;
                   for (const auto &[k, groups] : profile.collectives) n += groups.size();
                   return n;
                 }());
    if (!profile.rank_scale.empty()) {
      std::string scales;
      char buf[32];
      for (double v : profile.rank_scale) {
        std::snprintf(buf, sizeof buf, "%s%.3f", scales.empty() ? "" : " ", v);
        scales += buf;
      }
      std::fprintf(stderr, "rank speeds (kernel time relative to the mean rank): %s\n", scales.c_str());
    }
    return 0;
  };
}

}  // namespace cleave::cli
