// Step graphs: a training step's kernels, library calls and collectives captured once as a CUDA graph and replayed,
// so that a step costs one launch instead of one per kernel (small models are launch-bound on a GPU).
//
// The first step of a run is the probe: it runs as it comes, and every call whose work a graph cannot hold says so
// (graph_unsafe): host round trips (clipping's gradient norm, resize's host tables), kernels that take the step
// number by value (Adam's bias correction, Dropout's key, the ai.onnx.preview.training optimizers), ranks that stage
// their communication through MPI. If none spoke, the second step is captured on the compute stream (the
// communication stream joins the capture through the events that order it) and launched; later steps replay it.
//
// What the step does on the host is recorded while capturing and redone at each replay:
//  - samples (TrainingRun::read_samples -> graph_feed): the graph copies from a pinned host buffer per read. Once a
//    launched step's copy from a buffer is done (an event the graph records after it), the host fills the buffer with
//    the next step's samples (the sample offset moves by a batch per step) while the GPU runs the rest of the step;
//  - the learning rate (TrainingRun::lr -> graph_note_lr): a replay whose rates differ is captured again;
//  - the loss line (log_loss) and the kernels' error flag (check_error_flag): read after each replay.
// Statement timing (CLEAVE_PROFILE) only sees steps that run as they come; step times are measured either way.
#include <cstring>
#include <string>
#include <vector>

#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

enum class Phase { probe, capture, replay, off };

struct Feed {
  int64_t first = 0, bytes = 0;
  void *dst = nullptr;
  void *pinned = nullptr;
  std::function<void(int64_t, void *)> fill;
  cudaEvent_t copied = nullptr;  // recorded by the graph after its copy from `pinned`
  int64_t holds = -1;            // the step whose samples `pinned` holds
};

struct StepGraph {
  Phase phase = Phase::probe;
  bool probing = false, capturing = false;
  std::string obstacle;  // the first thing the probe step found that a graph cannot hold
  cudaGraphExec_t exec = nullptr;
  int64_t captured_step = 0;
  std::vector<Feed> feeds;
  size_t next_feed = 0;  // while capturing again: feeds are reused in capture order
  std::vector<std::pair<float, float>> lrs;  // (base, rate) as captured
  const float *loss = nullptr;               // log_loss's buffer, printed after each replay
  std::vector<std::string> checks;           // the messages of the error-flag checks the graph holds
  size_t nodes = 0;
  int captures = 0;
};

StepGraph g_graph;

void *pinned_buffer(Feed &f, int64_t bytes) {
  if (f.pinned && f.bytes >= bytes) return f.pinned;
  if (f.pinned) CLEAVE_CUDA(cudaFreeHost, f.pinned);
  CLEAVE_CUDA(cudaMallocHost, &f.pinned, static_cast<size_t>(bytes));
  return f.pinned;
}

/** Captures `body` into g_graph.exec (updated in place when the new graph has the old one's shape). */
void capture(int64_t step, const std::function<void()> &body) {
  StepGraph &g = g_graph;
  g.lrs.clear();
  g.checks.clear();
  g.loss = nullptr;
  g.next_feed = 0;
  detail::sync_compute();  // the replays before read the pinned buffers the capture refills
  cudaStream_t s = compute_stream();
  CLEAVE_CUDA(cudaStreamBeginCapture, s, cudaStreamCaptureModeRelaxed);
  g.capturing = true;
  detail::nccl_capture(true);
  body();
  g.capturing = false;
  cudaGraph_t graph = nullptr;
  CLEAVE_CUDA(cudaStreamEndCapture, s, &graph);
  detail::nccl_capture(false);
  if (g.next_feed != g.feeds.size())
    fail("CUDA graph: step " + std::to_string(step) + " read " + std::to_string(g.next_feed) +
         " sample buffers, the captured step " + std::to_string(g.feeds.size()));
  for (Feed &f : g.feeds) f.holds = step;
  CLEAVE_CUDA(cudaGraphGetNodes, graph, nullptr, &g.nodes);
  bool updated = false;
  if (g.exec) {
    cudaGraphExecUpdateResultInfo info;
    // A refused update is an answer, not a failure: the graph is instantiated anew.
    updated = cudaGraphExecUpdate(g.exec, graph, &info) == cudaSuccess;  // cleave-unchecked: see above
    if (!updated) {
      (void)cudaGetLastError();  // cleave-unchecked: clears the refused update's error, which is not the job's
      CLEAVE_CUDA(cudaGraphExecDestroy, g.exec);
      g.exec = nullptr;
    }
  }
  if (!g.exec) CLEAVE_CUDA(cudaGraphInstantiate, &g.exec, graph, 0);
  CLEAVE_CUDA(cudaGraphDestroy, graph);
  g.captured_step = step;
  if (++g.captures == 1)
    log_info("CUDA graphs: step " + std::to_string(step) + " captured as one graph of " + std::to_string(g.nodes) +
             " nodes; later steps replay it (--cuda-graphs off runs every step as it comes)");
}

/** Launches the graph for `step`, reads the next step's samples into the pinned buffers while it runs, and does
 *  what the step's host part would have done after it. */
void launch(int64_t step, int64_t batch) {
  StepGraph &g = g_graph;
  CLEAVE_CUDA(cudaGraphLaunch, g.exec, compute_stream());
  detail::nccl_graph_launched();
  // Samples the run never uses (after its last step) are read too: the sample stream is endless (it wraps, and each
  // epoch's permutation depends on the seed and the epoch alone).
  for (Feed &f : g.feeds) {
    CLEAVE_CUDA(cudaEventSynchronize, f.copied);
    f.fill(f.first + (step + 1 - g.captured_step) * batch, f.pinned);
    f.holds = step + 1;
  }
  if (!g.checks.empty()) {
    std::string msg = g.checks.front();
    for (size_t i = 1; i < g.checks.size(); ++i)
      if (g.checks[i] != g.checks.front()) msg += "; or " + g.checks[i];
    detail::check_error_flag(msg);
  }
  if (g.loss) log_loss(step, g.loss);
}

bool same_rates(TrainingRun &run, int64_t step) {
  for (const auto &[base, rate] : g_graph.lrs)
    if (run.lr(base, step) != rate) return false;
  return true;
}

}  // namespace

namespace detail {

void run_step(TrainingRun &run, int64_t step, const std::function<void()> &body) {
  StepGraph &g = g_graph;
  switch (g.phase) {
    case Phase::off:
      return body();
    case Phase::probe: {
      g.obstacle = run.graph_obstacle();
      if (g.obstacle.empty() && comm_staged()) g.obstacle = "ranks share a GPU and communicate through MPI";
      if (!g.obstacle.empty()) {
        g.phase = Phase::off;
        if (run.graph_obstacle() != "--cuda-graphs off") log_info("CUDA graphs off: " + g.obstacle);
        return body();
      }
      g.probing = true;
      body();
      g.probing = false;
      g.phase = g.obstacle.empty() ? Phase::capture : Phase::off;
      if (!g.obstacle.empty()) log_info("CUDA graphs off: " + g.obstacle);
      return;
    }
    case Phase::capture:
      capture(step, body);
      g.phase = Phase::replay;
      return launch(step, run.batch());
    case Phase::replay:
      if (!same_rates(run, step)) {
        capture(step, body);
        return launch(step, run.batch());
      }
      for (Feed &f : g.feeds)
        if (f.holds != step) {  // not read ahead (launch does): once the last replay's copy from it is done
          CLEAVE_CUDA(cudaEventSynchronize, f.copied);
          f.fill(f.first + (step - g.captured_step) * run.batch(), f.pinned);
          f.holds = step;
        }
      return launch(step, run.batch());
  }
}

bool graph_capturing() { return g_graph.capturing; }

bool graph_holds_scratch() { return g_graph.capturing || g_graph.exec != nullptr; }

void graph_feed(int64_t first, int64_t bytes, void *dst, std::function<void(int64_t, void *)> fill) {
  StepGraph &g = g_graph;
  if (!g.capturing) fail("graph_feed outside a CUDA graph capture");
  if (g.next_feed == g.feeds.size()) g.feeds.emplace_back();
  Feed &f = g.feeds[g.next_feed++];
  void *host = pinned_buffer(f, bytes);
  f.first = first;
  f.bytes = bytes;
  f.dst = dst;
  f.fill = std::move(fill);
  f.fill(first, host);
  if (bytes > 0) CLEAVE_CUDA(cudaMemcpyAsync, dst, host, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                             compute_stream());
  if (!f.copied) CLEAVE_CUDA(cudaEventCreateWithFlags, &f.copied, cudaEventDisableTiming);
  // External: an event record node of the graph, which the host can wait for after a launch. A plain record under
  // capture only orders the captured work; synchronizing on it is an invalid argument.
  CLEAVE_CUDA(cudaEventRecordWithFlags, f.copied, compute_stream(), cudaEventRecordExternal);
}

void graph_note_lr(float base, float value) { g_graph.lrs.emplace_back(base, value); }

void graph_unsafe(const std::string &why) {
  StepGraph &g = g_graph;
  if (g.capturing) fail("internal: " + why + ", while capturing a CUDA graph (run with --cuda-graphs off)");
  if (g.probing && g.obstacle.empty()) g.obstacle = why;
}

bool graph_defer_check(const std::string &msg) {
  if (!g_graph.capturing) return false;
  g_graph.checks.push_back(msg);
  return true;
}

bool graph_defer_loss(const float *loss) {
  if (!g_graph.capturing) return false;
  g_graph.loss = loss;
  return true;
}

void release_graph() {
  StepGraph &g = g_graph;
  if (g.exec) CLEAVE_CUDA(cudaGraphExecDestroy, g.exec);
  for (Feed &f : g.feeds) {
    if (f.pinned) CLEAVE_CUDA(cudaFreeHost, f.pinned);
    if (f.copied) CLEAVE_CUDA(cudaEventDestroy, f.copied);
  }
  g = StepGraph{};
}

}  // namespace detail
}  // namespace cleave::rt
