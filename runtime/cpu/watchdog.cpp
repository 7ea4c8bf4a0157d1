// The communication watchdog (DESIGN §7): a background thread that ends the process when one blocking
// communication call has waited longer than the timeout. It never calls MPI (MPI was initialised for one thread);
// exiting without MPI_Finalize makes mpirun/srun kill the remaining ranks. It also beats this rank's heartbeat in
// its run status record, and names from the peers' records the rank that stalled (common/run_status.h).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/process.h"
#include "common/run_status.h"
#include "cpu/internal.h"

namespace cleave::rt::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_started_ms{0};  // when the call in progress began (ms since the clock's epoch); 0 = none
std::mutex g_what_mutex;
std::string g_what;        // the call in progress, for the message
std::vector<int> g_ranks;  // its group (world ranks; empty: every rank)
int g_rank = -1;
int64_t g_timeout_s = 0;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count() + 1;
}

void watch() {
  int64_t last = now_ms();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    host::status_heartbeat();
    // A long gap between beats means this process was stopped (SIGSTOP, a debugger): its peers did not keep it
    // waiting, so the gap does not count against the call in progress.
    int64_t now = now_ms(), gap = now - last;
    last = now;
    int64_t started = g_started_ms.load();
    if (gap > host::kStaleMs && started != 0 && g_started_ms.compare_exchange_strong(started, started + gap))
      started += gap;
    if (started == 0 || now - started < g_timeout_s * 1000) continue;
    std::string what;
    std::vector<int> ranks;
    {
      std::lock_guard<std::mutex> lock(g_what_mutex);
      what = g_what;
      ranks = g_ranks;
    }
    std::string stall = host::status_stall(ranks, g_timeout_s);
    std::string text = what + " timed out after " + std::to_string(g_timeout_s) + " s";
    if (stall.empty()) text += " (a peer is dead or stuck; CLEAVE_COMM_TIMEOUT sets the limit)";
    std::fprintf(stderr, "cleave rank %d: %s%s%s\n", g_rank, text.c_str(), stall.empty() ? "" : ": ", stall.c_str());
    std::fflush(stderr);
    host::status_failure(g_rank, stall.empty() ? "rank " + std::to_string(g_rank) + ": " + text : stall);
    host::flush_losses();  // the loss lines since the last flush: the steps before the hang
    std::_Exit(1);
  }
}

}  // namespace

void start_watchdog(int rank) {
  const char *env = std::getenv("CLEAVE_COMM_TIMEOUT");
  g_timeout_s = env && *env ? std::atoll(env) : 900;
  g_rank = rank;
  if (g_timeout_s <= 0) return;
  std::thread(watch).detach();
}

CommWatch::CommWatch(const char *what, const std::vector<int> &ranks) {
  if (g_timeout_s <= 0) return;
  std::string text = what;
  if (!ranks.empty()) text += " on group " + host::ranks_text(ranks);
  {
    std::lock_guard<std::mutex> lock(g_what_mutex);
    g_what = text;
    g_ranks = ranks;
  }
  host::status_comm_begin(text);
  g_started_ms.store(now_ms());
}

CommWatch::~CommWatch() {
  if (g_timeout_s <= 0) return;
  g_started_ms.store(0);
  host::status_comm_end();
}

}  // namespace cleave::rt::detail
