// Process context from the launch environment, error reporting that aborts the whole job, logging, the arena.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cleave/rt.h"
#include "cpu/internal.h"

namespace cleave::rt {
namespace {

Context g_context;
bool g_initialised = false;

/** The integer value of an environment variable, or -1. */
int env_int(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

/** This process's rank for messages: MPI's when initialised, else the launcher's, else -1. */
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

[[noreturn]] void abort_job() {
  std::fflush(stdout);
  std::fflush(stderr);
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace

const Context &init(int *argc, char ***argv) {
  if (g_initialised) return g_context;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS) fail("MPI_Init failed");
  // Errors must come back as codes so CLEAVE_MPI can name the call and the place before aborting.
  CLEAVE_MPI(MPI_Comm_set_errhandler, MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CLEAVE_MPI(MPI_Comm_rank, MPI_COMM_WORLD, &g_context.rank);
  CLEAVE_MPI(MPI_Comm_size, MPI_COMM_WORLD, &g_context.world);
  g_context.launcher = "none";
  if (env_int("OMPI_COMM_WORLD_RANK") >= 0) {
    g_context.launcher = "ompi";
    g_context.launcher_rank = env_int("OMPI_COMM_WORLD_RANK");
    g_context.launcher_world = env_int("OMPI_COMM_WORLD_SIZE");
  } else if (env_int("SLURM_PROCID") >= 0) {
    g_context.launcher = "slurm";
    g_context.launcher_rank = env_int("SLURM_PROCID");
    g_context.launcher_world = env_int("SLURM_NTASKS");
  } else if (env_int("RANK") >= 0) {
    g_context.launcher = "env";
    g_context.launcher_rank = env_int("RANK");
    g_context.launcher_world = env_int("WORLD_SIZE");
  }
  // A launcher that disagrees with MPI (e.g. srun without PMI support starting singletons) would silently train
  // world-size-1 copies: refuse.
  if (g_context.launcher_world > 0 && g_context.launcher_world != g_context.world)
    fail("the launcher (" + g_context.launcher + ") reports " + std::to_string(g_context.launcher_world) +
         " ranks but MPI has " + std::to_string(g_context.world) + " (is MPI built with this launcher's support?)");
  detail::init_communication();
  detail::configure_blas_threads();
  detail::start_watchdog(g_context.rank);
  g_initialised = true;
  return g_context;
}

const Context &context() {
  if (!g_initialised) fail("the runtime is used before cleave::rt::init");
  return g_context;
}

void finalize() {
  if (!g_initialised) return;
  detail::release_communicators();
  MPI_Finalize();
  g_initialised = false;
}

void fail(const std::string &msg) {
  std::fprintf(stderr, "cleave rank %d: %s\n", message_rank(), msg.c_str());
  abort_job();
}

void check_mpi(int code, const char *call, const char *file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING + 1] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error code %d", code);
  const char *base = std::strrchr(file, '/');
  std::fprintf(stderr, "cleave rank %d: %s failed at %s:%d: %s\n", message_rank(), call, base ? base + 1 : file, line,
               text);
  abort_job();
}

void log_loss(int64_t step, const float *loss) {
  if (message_rank() > 0) return;
  std::printf("step %lld loss %.9g\n", static_cast<long long>(step), static_cast<double>(*loss));
  std::fflush(stdout);
}

void log_info(const std::string &msg) {
  if (message_rank() > 0) return;
  std::fprintf(stderr, "cleave: %s\n", msg.c_str());
}

Arena::Arena(size_t bytes, size_t align) : size_(bytes) {
  if (align < alignof(std::max_align_t) || (align & (align - 1)) != 0)
    fail("arena alignment " + std::to_string(align) + " is not a power of two >= max_align_t");
  size_t rounded = (bytes + align - 1) / align * align;
  base_ = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (!base_) fail("cannot allocate an arena of " + std::to_string(bytes) + " bytes");
  std::memset(base_, 0, rounded);
}

Arena::~Arena() { std::free(base_); }

Arena::Arena(Arena &&other) noexcept : base_(other.base_), size_(other.size_) {
  other.base_ = nullptr;
  other.size_ = 0;
}

Arena &Arena::operator=(Arena &&other) noexcept {
  if (this != &other) {
    std::free(base_);
    base_ = other.base_;
    size_ = other.size_;
    other.base_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void *Arena::at(size_t offset, size_t bytes) const {
  if (offset + bytes > size_)
    fail("arena access [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ") beyond its " +
         std::to_string(size_) + " bytes");
  return static_cast<char *>(base_) + offset;
}

}  // namespace cleave::rt
