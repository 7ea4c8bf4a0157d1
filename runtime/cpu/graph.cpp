// The cpu backend has no step graphs: a step runs as it comes (the CUDA backend's are in cuda/graph.cu).
#include "cleave/rt.h"

namespace cleave::rt::detail {

void run_step(TrainingRun &, int64_t, const std::function<void()> &body) { body(); }

bool graph_capturing() { return false; }

void graph_feed(int64_t, int64_t, void *, std::function<void(int64_t, void *)>) {
  fail("graph_feed outside a CUDA graph capture");
}

void graph_note_lr(real, real) {}

}  // namespace cleave::rt::detail
