// The cpu backend's process context (init: common/process.cpp, then MPI communicators, kernel threads, watchdog), logging and
// the arena.
#include <mpi.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cleave/rt.h"
#include "common/process.h"
#include "common/run_status.h"
#include "cpu/internal.h"

namespace cleave::rt {
namespace {

Context g_context;
bool g_initialised = false;

}  // namespace

const Context &init(int *argc, char ***argv) {
  if (g_initialised) return g_context;
  host::init_process(argc, argv, g_context);
  detail::init_communication();
  detail::configure_threads();
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
  host::flush_losses();
  host::status_finished();
  detail::release_communicators();
  MPI_Finalize();
  g_initialised = false;
}

void log_loss(int64_t step, const real *loss) {
  if (host::message_rank() > 0) return;
  host::print_loss(step, static_cast<double>(*loss));
}

Arena::Arena(size_t bytes, size_t align) : size_(bytes) {
  if (align < alignof(std::max_align_t) || (align & (align - 1)) != 0)
    fail("arena alignment " + std::to_string(align) + " is not a power of two >= max_align_t");
  // Transparent huge pages where the kernel offers them on request (THP "madvise", Debian's default): a step sweeps
  // the whole arena, and with 4 KB pages its large tensors miss the TLB on every page.
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes >= kHugePage) align = std::max(align, kHugePage);
  size_t rounded = (bytes + align - 1) / align * align;
  base_ = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (!base_) fail("cannot allocate an arena of " + std::to_string(bytes) + " bytes");
  if (bytes >= kHugePage) ::madvise(base_, rounded, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores it
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
