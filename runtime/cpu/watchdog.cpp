// The communication watchdog (DESIGN §7): a background thread that ends the process when one blocking
// communication call has waited longer than the timeout. It never calls MPI (MPI was initialised for one thread);
// exiting without MPI_Finalize makes mpirun/srun kill the remaining ranks.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "common/process.h"
#include "cpu/internal.h"

namespace cleave::rt::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_started_ms{0};  // when the call in progress began (ms since the clock's epoch); 0 = none
std::mutex g_what_mutex;
std::string g_what;  // the call in progress, for the message
int g_rank = -1;
int64_t g_timeout_s = 0;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count() + 1;
}

void watch() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int64_t started = g_started_ms.load();
    if (started == 0 || now_ms() - started < g_timeout_s * 1000) continue;
    std::string what;
    {
      std::lock_guard<std::mutex> lock(g_what_mutex);
      what = g_what;
    }
    std::fprintf(stderr, "cleave rank %d: %s timed out after %lld s (a peer is dead or stuck; CLEAVE_COMM_TIMEOUT "
                 "sets the limit)\n", g_rank, what.c_str(), static_cast<long long>(g_timeout_s));
    std::fflush(stderr);
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
  }
  g_started_ms.store(now_ms());
}

CommWatch::~CommWatch() { g_started_ms.store(0); }

}  // namespace cleave::rt::detail
