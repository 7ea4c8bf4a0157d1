// Run status records (common/run_status.h): this rank's, mapped shared and stamped on every step and communication
// call; its peers', read when a call times out; and the one-line failure record `cleave run` reports.
#include "common/run_status.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cleave/rt.h"

namespace cleave::rt {
namespace detail {
bool g_run_status = false;
}  // namespace detail

namespace host {
namespace {

constexpr char kMagic[8] = {'c', 'l', 'v', 's', 't', 'a', 't', '1'};

enum State : int64_t { kRunning = 0, kFinished = 1, kFailed = 2 };

/** A rank_<r>.status file. Peers read it while its rank writes: the integers are 8-byte aligned and accessed
 *  atomically; `what` may be read half-written, which garbles a message at worst. */
struct Record {
  char magic[8];
  int64_t rank;
  int64_t world;
  int64_t state;
  int64_t heartbeat_ms;   // unix ms of the watchdog's last beat; 0: no watchdog beats (CLEAVE_COMM_TIMEOUT=0)
  int64_t step;           // steps begun; 0 before the first
  int64_t in_step;        // collectives entered in this step
  int64_t per_step;       // collectives of the last whole step; 0 until one completed
  int64_t comm_since_ms;  // unix ms when the call in progress began; 0: none in progress
  char what[128];         // the call in progress, else the last one
};

Record *g_record = nullptr;  // this rank's, mapped; null without CLEAVE_STATUS_DIR
std::string g_dir;
std::atomic<bool> g_failure_written{false};

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t load(const int64_t &field) { return __atomic_load_n(&field, __ATOMIC_RELAXED); }
void store(int64_t &field, int64_t value) { __atomic_store_n(&field, value, __ATOMIC_RELAXED); }

std::string record_path(int rank, const char *suffix) {
  return g_dir + "/rank_" + std::to_string(rank) + suffix;
}

/** Rank `rank`'s record as it is now; false when it has none (not started, another job's, unreadable). */
bool read_record(int rank, Record &out) {
  int fd = ::open(record_path(rank, ".status").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::pread(fd, &out, sizeof out, 0);
  ::close(fd);
  out.what[sizeof out.what - 1] = '\0';
  return n == static_cast<ssize_t>(sizeof out) && std::memcmp(out.magic, kMagic, sizeof kMagic) == 0 &&
         out.rank == rank;
}

/** "in step 7 (its last collective: 41 of 96", without the closing parenthesis. */
std::string progress(const Record &r) {
  std::string s = r.step == 0 ? "before its first step" : "in step " + std::to_string(r.step);
  s += " (its last collective: " + std::to_string(r.in_step);
  if (r.per_step > 0) s += " of " + std::to_string(r.per_step);
  return s;
}

}  // namespace

void status_open(int rank, int world) {
  const char *dir = std::getenv("CLEAVE_STATUS_DIR");
  if (!dir || !*dir) return;
  g_dir = dir;
  std::string path = record_path(rank, ".status");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  void *p = MAP_FAILED;
  if (fd >= 0 && ::ftruncate(fd, sizeof(Record)) == 0)
    p = ::mmap(nullptr, sizeof(Record), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (fd >= 0) ::close(fd);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "cleave rank %d: cannot write the status record %s: %s (a stall will name no rank)\n", rank,
                 path.c_str(), std::strerror(errno));
    return;
  }
  g_record = static_cast<Record *>(p);  // zeroed by ftruncate
  g_record->rank = rank;
  g_record->world = world;
  std::memcpy(g_record->magic, kMagic, sizeof kMagic);  // last: a reader checks it
  detail::g_run_status = true;
}

void status_step() {
  Record *r = g_record;
  if (!r) return;
  if (load(r->step) > 0) store(r->per_step, load(r->in_step));
  store(r->in_step, 0);
  store(r->step, load(r->step) + 1);
}

void status_first_step(int64_t step) {
  if (Record *r = g_record) store(r->step, step - 1);
}

void status_comm_begin(const std::string &what) {
  Record *r = g_record;
  if (!r) return;
  store(r->in_step, load(r->in_step) + 1);
  size_t n = std::min(what.size(), sizeof r->what - 1);
  std::memcpy(r->what, what.data(), n);
  r->what[n] = '\0';
  store(r->comm_since_ms, unix_ms());
}

void status_comm_end() {
  if (g_record) store(g_record->comm_since_ms, 0);
}

void status_heartbeat() {
  if (g_record) store(g_record->heartbeat_ms, unix_ms());
}

void status_finished() {
  if (g_record) store(g_record->state, kFinished);
}

void status_failure(int rank, const std::string &message) {
  if (g_record) store(g_record->state, kFailed);
  const char *dir = std::getenv("CLEAVE_STATUS_DIR");
  if (!dir || !*dir || rank < 0 || g_failure_written.exchange(true)) return;
  // Written whole under a temporary name, then renamed: a reader never sees half a line.
  std::string path = std::string(dir) + "/rank_" + std::to_string(rank) + ".failure";
  std::string tmp = path + ".tmp";
  std::string line = std::to_string(unix_ms()) + " " + message + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (ok) std::rename(tmp.c_str(), path.c_str());
}

std::string status_stall(const std::vector<int> &group, int64_t waited_s) {
  Record *self = g_record;
  if (!self) return "";
  int64_t now = unix_ms();
  int world = static_cast<int>(self->world);
  std::string waited = "others waited " + std::to_string(waited_s) + " s";
  // First the ranks that stopped running (anywhere: a stopped rank outside this group holds up the members that wait
  // for it), then the members that run but are not in this call.
  std::vector<std::pair<int, Record>> stopped;
  for (int r = 0; r < world; ++r) {
    Record peer;
    if (r == self->rank || !read_record(r, peer)) continue;
    if (peer.state == kRunning && peer.heartbeat_ms > 0 && now - peer.heartbeat_ms > kStaleMs)
      stopped.emplace_back(r, peer);
  }
  if (stopped.size() == 1)
    return "rank " + std::to_string(stopped[0].first) + " stopped responding " + progress(stopped[0].second) + "; " +
           waited + ")";
  if (!stopped.empty()) {
    std::string names, where;
    for (const auto &[r, peer] : stopped) {
      names += (names.empty() ? "" : ", ") + std::to_string(r);
      where += (where.empty() ? "" : "), ") + ("rank " + std::to_string(r) + " " + progress(peer));
    }
    return "ranks " + names + " stopped responding: " + where + "); " + waited;
  }
  std::vector<int> members = group;
  if (members.empty())
    for (int r = 0; r < world; ++r) members.push_back(r);
  std::string mine = self->what, absent;
  for (int r : members) {
    Record peer;
    if (r == self->rank || !read_record(r, peer)) continue;
    std::string why;
    if (peer.state == kFinished) why = "it had finished";
    else if (peer.state == kFailed) why = "it had failed";
    else if (peer.comm_since_ms == 0) why = "it is busy " + progress(peer) + ")";
    else if (mine != peer.what) why = "it waits in " + std::string(peer.what) + " " + progress(peer) + ")";
    else continue;
    absent += (absent.empty() ? "" : "; ") + ("rank " + std::to_string(r) + " did not arrive at " + mine + ": " + why);
  }
  return absent.empty() ? "" : absent + "; " + waited;
}

}  // namespace host

void detail::run_status_step() { host::status_step(); }

}  // namespace cleave::rt
