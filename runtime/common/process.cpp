// What every backend does the same way: the launch environment, MPI start-up, and failures that end the whole job.
#include "common/process.h"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/run_status.h"

namespace cleave::rt {
namespace {

[[noreturn]] void abort_job() {
  std::fflush(stdout);
  std::fflush(stderr);
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

/** Prints `cleave rank R: <message>`, leaves the rank's failure record (`rank R: <message>`, or `record` when given)
 *  for the launcher (common/run_status.h), and ends the job. */
[[noreturn]] void fail_job(const std::string &message, const std::string &record = "") {
  int rank = host::message_rank();
  std::fprintf(stderr, "cleave rank %d: %s\n", rank, message.c_str());
  host::status_failure(rank, record.empty() ? "rank " + std::to_string(rank) + ": " + message : record);
  abort_job();
}

}  // namespace

namespace host {

int env_int(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

int message_rank() {
  int inited = 0;
  MPI_Initialized(&inited);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (inited && !finalized) {
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"})
    if (env_int(name) >= 0) return env_int(name);
  return -1;
}

[[noreturn]] void report(const char *call, const char *file, int line, const std::string &text) {
  const char *base = std::strrchr(file, '/');
  fail_job(std::string(call) + " failed at " + (base ? base + 1 : file) + ":" + std::to_string(line) + ": " + text);
}

void init_process(int *argc, char ***argv, Context &c) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) fail("MPI_Init failed");
  // Before any output (print_loss says why); abort_job flushes it, exit() too.
  static char stdout_buffer[1 << 16];
  std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
  // Errors must come back as codes so CLEAVE_MPI can name the call and the place before aborting.
  CLEAVE_MPI(MPI_Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CLEAVE_MPI(MPI_Comm_rank, MPI_COMM_WORLD, &c.rank);
  CLEAVE_MPI(MPI_Comm_size, MPI_COMM_WORLD, &c.world);
  status_open(c.rank, c.world);
  c.launcher = "none";
  if (env_int("OMPI_COMM_WORLD_RANK") >= 0) {
    c.launcher = "ompi";
    c.launcher_rank = env_int("OMPI_COMM_WORLD_RANK");
    c.launcher_world = env_int("OMPI_COMM_WORLD_SIZE");
  } else if (env_int("SLURM_PROCID") >= 0) {
    c.launcher = "slurm";
    c.launcher_rank = env_int("SLURM_PROCID");
    c.launcher_world = env_int("SLURM_NTASKS");
  } else if (env_int("RANK") >= 0) {
    c.launcher = "env";
    c.launcher_rank = env_int("RANK");
    c.launcher_world = env_int("WORLD_SIZE");
  }
  // A launcher that disagrees with MPI (e.g. srun without PMI support starting singletons) would silently train
  // world-size-1 copies: refuse.
  if (c.launcher_world > 0 && c.launcher_world != c.world)
    fail("the launcher (" + c.launcher + ") reports " + std::to_string(c.launcher_world) +
         " ranks but MPI has " + std::to_string(c.world) + " (is MPI built with this launcher's support?)");
  // The launch scripts pick a rank's weights file (and program) by the launcher's rank: it must be MPI's.
  if (c.launcher_rank >= 0 && c.launcher_rank != c.rank)
    fail("the launcher (" + c.launcher + ") says this process is rank " + std::to_string(c.launcher_rank) +
         " but MPI made it rank " + std::to_string(c.rank));
}

namespace {
double g_last_loss = std::nan("");
double g_loss_scale = 0;
bool g_loss_scale_skipped = false;
}  // namespace

double last_loss() { return g_last_loss; }

void note_loss_scale(double scale, bool skipped) {
  g_loss_scale = scale;
  g_loss_scale_skipped = skipped;
}

double noted_loss_scale() { return g_loss_scale; }

void print_loss(int64_t step, double value) {
  g_last_loss = value;
  using Clock = std::chrono::steady_clock;
  static Clock::time_point last_flush;
  static bool flushed = false;
  // (A NaN prints as "nan" whatever its sign bit.)
  std::printf("step %lld loss %.9g", static_cast<long long>(step), std::isnan(value) ? std::fabs(value) : value);
  if (g_loss_scale > 0) std::printf(" loss_scale %.9g%s", g_loss_scale, g_loss_scale_skipped ? " skipped" : "");
  std::printf("\n");
  // Training on from a non-finite loss only spreads NaN through every parameter: end the job, naming the step
  // (unless loss scaling skipped the step's updates).
  if (!std::isfinite(value) && !g_loss_scale_skipped) {
    std::string what =
        "step " + std::to_string(step) + ": loss is " + (std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
    fail_job(what, what);
  }
  Clock::time_point now = Clock::now();
  if (!flushed || now - last_flush >= std::chrono::seconds(1)) {
    std::fflush(stdout);
    last_flush = now;
    flushed = true;
  }
}

void flush_losses() { std::fflush(stdout); }

int group_position(const std::vector<int> &ranks, const Context &c) {
  if (ranks.empty()) fail("a group must have at least one member");
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= c.world) fail("group member " + std::to_string(ranks[i]) + " is not a rank");
    for (size_t j = 0; j < i; ++j)
      if (ranks[j] == ranks[i]) fail("group lists rank " + std::to_string(ranks[i]) + " twice");
    if (ranks[i] == c.rank) index = static_cast<int>(i);
  }
  return index;
}

int member_index(const std::vector<int> &ranks, const Context &c) {
  int index = group_position(ranks, c);
  if (index < 0) fail("this rank is not a member of the group it asked for");
  return index;
}

void check_same_groups(const std::vector<std::vector<int>> &groups) {
  // FNV-1a over the group sizes and members; the maximum of h and of ~h over the world equal this rank's h and ~h
  // only when every rank has the same h.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(groups.size());
  for (const auto &g : groups) {
    mix(g.size());
    for (int r : g) mix(static_cast<uint64_t>(r));
  }
  uint64_t mine[2] = {h, ~h}, most[2] = {0, 0};
  CLEAVE_MPI(MPI_Allreduce, mine, most, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (most[0] != mine[0] || most[1] != mine[1])
    fail("create_groups: the ranks passed different group lists (are the rank programs from different bundles?)");
}

std::string ranks_text(const std::vector<int> &ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? "," : "") + std::to_string(ranks[i]);
  return text + "]";
}

int local_rank(int world_rank) {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"})
    if (env_int(name) >= 0) return env_int(name);
  return world_rank;
}

}  // namespace host

void fail(const std::string &msg) { fail_job(msg); }

void check_mpi(int code, const char *call, const char *file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error code %d", code);
  host::report(call, file, line, text);
}

void log_info(const std::string &msg) {
  if (host::message_rank() > 0) return;
  std::fprintf(stderr, "cleave: %s\n", msg.c_str());
}

}  // namespace cleave::rt

namespace cleave::rt {
namespace {
Math g_math = Math::fp32;
}  // namespace

void set_math(Math m) { g_math = m; }
Math math() { return g_math; }

}  // namespace cleave::rt
