// The cuda backend's profiling clock: one CUDA event per mark, recorded on the compute stream (communication on the
// communication stream is ordered against it, so a bracket around a collective times it too); read after a device
// synchronize.
#include <vector>

#include "common/profile_clock.h"
#include "cuda/internal.cuh"

namespace cleave::rt::host {
namespace {

std::vector<cudaEvent_t> g_events;

}  // namespace

void clock_reserve(int slots) {
  g_events.assign(static_cast<size_t>(slots), nullptr);
  for (cudaEvent_t &e : g_events) CLEAVE_CUDA(cudaEventCreate, &e);
}

void clock_mark(int slot) { CLEAVE_CUDA(cudaEventRecord, g_events[static_cast<size_t>(slot)], compute_stream()); }

void clock_sync() { CLEAVE_CUDA(cudaDeviceSynchronize); }

double clock_seconds(int from, int to) {
  float ms = 0;
  CLEAVE_CUDA(cudaEventElapsedTime, &ms, g_events[static_cast<size_t>(from)], g_events[static_cast<size_t>(to)]);
  return ms / 1e3;
}

}  // namespace cleave::rt::host
