// The cpu backend's profiling clock: the wall clock (steady_clock); kernels and MPI calls return when done, so the
// interval between two marks is the time of what ran between them.
#include <chrono>
#include <vector>

#include "common/profile_clock.h"

namespace cleave::rt::host {
namespace {

std::vector<std::chrono::steady_clock::time_point> g_marks;

}  // namespace

void clock_reserve(int slots) { g_marks.assign(static_cast<size_t>(slots), {}); }

void clock_mark(int slot) { g_marks[static_cast<size_t>(slot)] = std::chrono::steady_clock::now(); }

void clock_sync() {}

double clock_seconds(int from, int to) {
  return std::chrono::duration<double>(g_marks[static_cast<size_t>(to)] - g_marks[static_cast<size_t>(from)]).count();
}

}  // namespace cleave::rt::host
