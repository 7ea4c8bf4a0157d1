// NCCL communication: the world communicator (its ncclUniqueId broadcast over MPI), cached communicators for ordered
// device groups, collectives and grouped send/recv on a communication stream ordered against the compute stream by
// events, and the watchdog that ends a job whose collectives fail or hang.
//
// Group communicators are split from the world communicator (ncclCommSplit, and MPI_Comm_split for the host-side
// MPI communicator beside it) by create_groups, which every rank calls with every group of the bundle.
//
// NCCL needs a GPU per rank. Where two ranks share a GPU (more ranks than GPUs on a node, or CLEAVE_CUDA_COMM=mpi),
// every rank runs *staged*: the same calls go through MPI on host copies of the device buffers, with MPI's reduction
// order (the CPU backend's), blocking like the CPU backend's calls.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/process.h"
#include "common/reduce_scatter.h"
#include "common/run_status.h"
#include "cuda/internal.cuh"

// cudaEventQuery reports "not yet" as cudaErrorNotReady: only other codes are errors.
#define CLEAVE_CUDA_QUERY(fn, ...)                                                                 \
  [&] {                                                                                            \
    cudaError_t code_ = fn(__VA_ARGS__);                                                           \
    if (code_ != cudaErrorNotReady) ::cleave::rt::check_cuda(code_, #fn, __FILE__, __LINE__);      \
    return code_;                                                                                  \
  }()

namespace cleave::rt {
namespace {

/** What Comm::handle points at. */
struct Handles {
  MPI_Comm mpi = MPI_COMM_NULL;
  ncclComm_t nccl = nullptr;
};

std::map<std::vector<int>, std::unique_ptr<Comm>> &comm_cache() {
  static std::map<std::vector<int>, std::unique_ptr<Comm>> cache;
  return cache;
}

ncclComm_t g_world = nullptr;
cudaStream_t g_comm_stream = nullptr;
cudaEvent_t g_compute_ready = nullptr;  // recorded on the compute stream before a collective
cudaEvent_t g_comm_done = nullptr;      // recorded on the communication stream after it
bool g_staged = false;                  // every rank communicates through MPI on host copies (see the top)
MPI_Comm g_p2p = MPI_COMM_NULL;         // staged send_recv: a duplicate of world

// Watchdog state: the communication in flight (the last one issued and the start of the oldest unfinished one).
using Clock = std::chrono::steady_clock;
std::mutex g_watch_mutex;
std::vector<ncclComm_t> g_watched;  // every communicator, for ncclCommGetAsyncError and ncclCommAbort
std::string g_last = "none";        // the last communication issued, for messages
int64_t g_pending_since_ms = 0;     // 0 = nothing in flight
bool g_host_blocking = false;       // a blocking host call (communicator creation, barrier) is in progress
bool g_capturing = false;           // a step is being captured: its events cannot be queried (graph.cu)
bool g_stopped = false;             // finalize has begun: the watchdog ends (the CUDA runtime unloads at exit)
int g_rank = -1;
int64_t g_timeout_s = 0;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count() + 1;
}

std::string describe(const char *what, const std::vector<int> &ranks) {
  return ranks.empty() ? std::string(what) : what + (" on group " + host::ranks_text(ranks));
}

void mark_issued(const std::string &what, bool host_blocking) {
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  g_last = what;
  if (g_pending_since_ms == 0) g_pending_since_ms = now_ms();
  g_host_blocking = g_host_blocking || host_blocking;
  host::status_comm_begin(what);
}

/** Marks a blocking host call for the watchdog, like the CPU backend's CommWatch. */
class HostWatch {
 public:
  HostWatch(const char *what, const std::vector<int> &ranks) { mark_issued(describe(what, ranks), true); }
  ~HostWatch() {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    g_host_blocking = false;
  }
};

/** Ends this rank: prints why with the last communication, leaves the failure record (`stall` when the peers'
 *  records name who stalled, common/run_status.h) and exits. */
[[noreturn]] void watchdog_abort(const std::string &why, const std::string &stall = "") {
  std::string last;
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    last = g_last;
    // Aborting the communicators makes NCCL kernels of this rank return; the exit makes the launcher end the rest.
    for (ncclComm_t c : g_watched) ncclCommAbort(c);  // cleave-unchecked: already failing, nothing left to report
  }
  std::string text = why + " (last communication: " + last + ")";
  std::fprintf(stderr, "cleave rank %d: %s%s%s\n", g_rank, text.c_str(), stall.empty() ? "" : ": ", stall.c_str());
  std::fflush(stderr);
  host::status_failure(g_rank, stall.empty() ? "rank " + std::to_string(g_rank) + ": " + text : stall);
  host::flush_losses();  // the loss lines since the last flush: the steps before the hang
  std::_Exit(1);
}

void watch() {
  int64_t last = now_ms();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    host::status_heartbeat();
    int64_t now = now_ms(), gap = now - last;
    last = now;
    int64_t since = 0;
    bool host = false;
    ncclResult_t failed = ncclSuccess;
    {
      // Under the lock: release_nccl() destroys communicators under it too.
      std::lock_guard<std::mutex> lock(g_watch_mutex);
      if (g_stopped) return;
      // A long gap between beats means this process was stopped (SIGSTOP, a debugger): its peers did not keep it
      // waiting, so the gap does not count against the communication in flight.
      if (gap > host::kStaleMs && g_pending_since_ms != 0) g_pending_since_ms += gap;
      since = g_pending_since_ms;
      host = g_host_blocking;
      for (ncclComm_t c : g_watched) {
        ncclResult_t async = ncclSuccess;
        CLEAVE_NCCL(ncclCommGetAsyncError, c, &async);
        if (async != ncclSuccess && async != ncclInProgress) failed = async;
      }
    }
    if (failed != ncclSuccess) watchdog_abort(std::string("NCCL failed: ") + ncclGetErrorString(failed));
    if (since == 0) continue;
    {
      // Under the lock: a capture (nccl_capture) cannot begin recording g_comm_done during the query.
      std::lock_guard<std::mutex> lock(g_watch_mutex);
      if (g_stopped) return;
      if (g_capturing) continue;
      if (!host && CLEAVE_CUDA_QUERY(cudaEventQuery, g_comm_done) == cudaSuccess) {
        if (!g_host_blocking) {
          g_pending_since_ms = 0;  // everything issued so far has finished
          host::status_comm_end();
        }
        continue;
      }
    }
    if (g_timeout_s > 0 && now_ms() - since >= g_timeout_s * 1000) {
      // Communication is asynchronous here, so the group is not known: the stall is looked for among all ranks.
      std::string stall = host::status_stall({}, g_timeout_s);
      watchdog_abort("communication timed out after " + std::to_string(g_timeout_s) + " s" +
                         (stall.empty() ? " (a peer is dead or stuck; CLEAVE_COMM_TIMEOUT sets the limit)" : ""),
                     stall);
    }
  }
}

const Handles &handles_of(const Comm &c) {
  if (!c.handle) fail("use of a communicator that was not created by cleave::rt::create_groups");
  return *static_cast<const Handles *>(c.handle);
}

size_t as_count(int64_t count, const char *what) {
  if (count < 0) fail(std::string(what) + ": negative count " + std::to_string(count));
  return static_cast<size_t>(count);
}

/** Staged communication: the device bytes at `d` in host memory, after the compute stream's work so far. */
std::vector<char> to_host(const void *d, size_t bytes) {
  std::vector<char> h(bytes);
  if (bytes > 0) CLEAVE_CUDA(cudaMemcpyAsync, h.data(), d, bytes, cudaMemcpyDeviceToHost, compute_stream());
  detail::sync_compute();
  return h;
}

void to_device(void *d, const std::vector<char> &h, size_t bytes) {
  if (bytes == 0) return;
  CLEAVE_CUDA(cudaMemcpyAsync, d, h.data(), bytes, cudaMemcpyHostToDevice, compute_stream());
  detail::sync_compute();  // h is freed when the caller returns
}

/** MPI counts are int: a larger staged message is reported rather than truncated. */
int mpi_count(size_t count, const char *what) {
  if (count > static_cast<size_t>(INT_MAX))
    fail(std::string(what) + ": count " + std::to_string(count) + " exceeds what one MPI call takes");
  return static_cast<int>(count);
}

void staged_all_reduce(const Comm &c, const float *send, float *recv, size_t n) {
  HostWatch watch("all_reduce_sum", c.ranks);
  std::vector<char> h = to_host(send, n * sizeof(float));
  CLEAVE_MPI(MPI_Allreduce, MPI_IN_PLACE, h.data(), mpi_count(n, "all_reduce_sum"), MPI_FLOAT, MPI_SUM,
             handles_of(c).mpi);
  to_device(recv, h, n * sizeof(float));
}

/** A started all-reduce when staged: wait() runs it (as on the CPU backend: MPI progresses only inside MPI calls). */
struct Deferred {
  float *buf;
  size_t count;
};

/** Runs `issue(comm, stream)` on the communication stream after the compute stream's work so far; the compute
 *  stream's later work waits for it. */
template <typename Issue>
void on_comm_stream(const std::string &what, Issue issue) {
  CLEAVE_CUDA(cudaEventRecord, g_compute_ready, compute_stream());
  CLEAVE_CUDA(cudaStreamWaitEvent, g_comm_stream, g_compute_ready, 0);
  mark_issued(what, false);
  issue(g_comm_stream);
  CLEAVE_CUDA(cudaEventRecord, g_comm_done, g_comm_stream);
  CLEAVE_CUDA(cudaStreamWaitEvent, compute_stream(), g_comm_done, 0);
}

/** Every group create_groups has split off so far, on every rank alike (members or not): the list that decides
 *  which groups a later call skips, so that all ranks skip the same ones. */
std::vector<std::vector<int>> &created() {
  static std::vector<std::vector<int>> all;
  return all;
}

}  // namespace

namespace detail {

cudaStream_t comm_stream() {
  if (!g_comm_stream) fail("communication before cleave::rt::init");
  return g_comm_stream;
}

void init_nccl(int rank, int world) {
  g_rank = rank;
  CLEAVE_CUDA(cudaStreamCreateWithFlags, &g_comm_stream, cudaStreamNonBlocking);
  CLEAVE_CUDA(cudaEventCreateWithFlags, &g_compute_ready, cudaEventDisableTiming);
  CLEAVE_CUDA(cudaEventCreateWithFlags, &g_comm_done, cudaEventDisableTiming);
  // Staged when any two ranks hold the same GPU (its UUID is unique across nodes), or when asked to; every rank
  // decides alike from the gathered UUIDs.
  int device = 0;
  CLEAVE_CUDA(cudaGetDevice, &device);
  cudaDeviceProp prop;
  CLEAVE_CUDA(cudaGetDeviceProperties, &prop, device);
  std::vector<char> uuids(static_cast<size_t>(world) * sizeof prop.uuid.bytes);
  CLEAVE_MPI(MPI_Allgather, prop.uuid.bytes, static_cast<int>(sizeof prop.uuid.bytes), MPI_BYTE, uuids.data(),
             static_cast<int>(sizeof prop.uuid.bytes), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<std::string> seen;
  for (int r = 0; r < world; ++r)
    seen.emplace_back(uuids.data() + r * sizeof prop.uuid.bytes, sizeof prop.uuid.bytes);
  std::sort(seen.begin(), seen.end());
  bool shared = std::adjacent_find(seen.begin(), seen.end()) != seen.end();
  const char *mode = std::getenv("CLEAVE_CUDA_COMM");
  std::string want = mode ? mode : "";
  if (!want.empty() && want != "mpi" && want != "nccl")
    fail("CLEAVE_CUDA_COMM=" + want + ": expected mpi or nccl");
  if (want == "nccl" && shared) fail("CLEAVE_CUDA_COMM=nccl: NCCL needs a GPU per rank, and ranks share one here");
  g_staged = shared || want == "mpi";
  if (g_staged) {
    CLEAVE_MPI(MPI_Comm_dup, MPI_COMM_WORLD, &g_p2p);
    CLEAVE_MPI(MPI_Comm_set_errhandler, g_p2p, MPI_ERRORS_RETURN);
    return;
  }
  ncclUniqueId id;
  if (rank == 0) CLEAVE_NCCL(ncclGetUniqueId, &id);
  CLEAVE_MPI(MPI_Bcast, &id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);
  // NCCL uses the current device, set by init() (context.cu).
  CLEAVE_NCCL(ncclCommInitRank, &g_world, world, id, rank);
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  g_watched.push_back(g_world);
}

void release_nccl() {
  CLEAVE_CUDA(cudaStreamSynchronize, g_comm_stream);
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  g_stopped = true;  // the watchdog's next beat ends it: nothing is in flight any more
  for (auto &[ranks, comm] : comm_cache()) {
    auto *h = static_cast<Handles *>(comm->handle);
    if (h->nccl) CLEAVE_NCCL(ncclCommDestroy, h->nccl);
    if (h->mpi != MPI_COMM_NULL) CLEAVE_MPI(MPI_Comm_free, &h->mpi);
    delete h;
  }
  comm_cache().clear();
  if (g_p2p != MPI_COMM_NULL) MPI_Comm_free(&g_p2p);
  if (g_world) CLEAVE_NCCL(ncclCommDestroy, g_world);
  g_watched.clear();
  g_world = nullptr;
}

bool comm_staged() { return g_staged; }

void nccl_capture(bool begin) {
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  g_capturing = begin;
  if (begin || !g_comm_stream) return;
  // The capture recorded these events as graph edges; recorded again here, they are plain events the watchdog and
  // later eager steps can use.
  CLEAVE_CUDA(cudaEventRecord, g_compute_ready, compute_stream());
  CLEAVE_CUDA(cudaEventRecord, g_comm_done, g_comm_stream);
}

void nccl_graph_launched() {
  if (g_staged || !g_comm_stream) return;
  mark_issued("the communication of a CUDA graph step", false);
  CLEAVE_CUDA(cudaEventRecord, g_comm_done, compute_stream());
}

void start_watchdog(int rank, int device) {
  const char *env = std::getenv("CLEAVE_COMM_TIMEOUT");
  g_timeout_s = env && *env ? std::atoll(env) : 900;
  g_rank = rank;
  // The thread also reports NCCL's asynchronous errors, so it runs even without a timeout. The current device is
  // per thread: it queries this rank's events on this rank's device.
  std::thread([device] {
    CLEAVE_CUDA(cudaSetDevice, device);
    watch();
  }).detach();
}

}  // namespace detail

void create_groups(const std::vector<std::vector<int>> &groups) {
  HostWatch watch("group creation", {});
  host::check_same_groups(groups);
  for (const auto &ranks : groups) {
    int index = host::group_position(ranks, context());
    if (std::find(created().begin(), created().end(), ranks) != created().end()) continue;
    created().push_back(ranks);
    // Both splits are collective over the world: members take colour 0 and key their index, so the new
    // communicators order them as `ranks` does; the others pass MPI_UNDEFINED / NCCL_SPLIT_NOCOLOR and get none.
    auto h = std::make_unique<Handles>();
    CLEAVE_MPI(MPI_Comm_split, MPI_COMM_WORLD, index < 0 ? MPI_UNDEFINED : 0, index, &h->mpi);
    if (!g_staged) CLEAVE_NCCL(ncclCommSplit, g_world, index < 0 ? NCCL_SPLIT_NOCOLOR : 0, index, &h->nccl, nullptr);
    if (index < 0) continue;
    CLEAVE_MPI(MPI_Comm_set_errhandler, h->mpi, MPI_ERRORS_RETURN);
    int check = -1;
    CLEAVE_MPI(MPI_Comm_rank, h->mpi, &check);
    if (check != index) fail("communicator rank order differs from the group order");
    if (h->nccl) {
      std::lock_guard<std::mutex> lock(g_watch_mutex);
      g_watched.push_back(h->nccl);
    }
    auto comm = std::make_unique<Comm>();
    comm->ranks = ranks;
    comm->index = index;
    comm->handle = h.release();
    comm_cache().emplace(ranks, std::move(comm));
  }
}

const Comm &group(const std::vector<int> &ranks) {
  host::member_index(ranks, context());
  auto it = comm_cache().find(ranks);
  if (it == comm_cache().end()) fail("group " + host::ranks_text(ranks) + " was not made by cleave::rt::create_groups");
  return *it->second;
}

void all_reduce_sum(const Comm &c, const float *send, float *recv, int64_t count) {
  size_t n = as_count(count, "all_reduce_sum");
  if (g_staged) return staged_all_reduce(c, send, recv, n);
  ncclComm_t nc = handles_of(c).nccl;
  on_comm_stream(describe("all_reduce_sum", c.ranks), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclAllReduce, send, recv, n, ncclFloat, ncclSum, nc, s);
  });
}

Pending all_reduce_sum_start(const Comm &c, float *buf, int64_t count) {
  size_t n = as_count(count, "all_reduce_sum_start");
  if (g_staged) {
    handles_of(c);  // a bad group fails here, where it is named, not at the wait
    return Pending{&c, new Deferred{buf, n}};
  }
  ncclComm_t nc = handles_of(c).nccl;
  // On the communication stream after the compute stream's work so far; unlike on_comm_stream, the compute stream
  // does not wait for it here but in wait(), so kernels launched in between overlap it.
  CLEAVE_CUDA(cudaEventRecord, g_compute_ready, compute_stream());
  CLEAVE_CUDA(cudaStreamWaitEvent, g_comm_stream, g_compute_ready, 0);
  mark_issued(describe("all_reduce_sum_start", c.ranks), false);
  CLEAVE_NCCL(ncclAllReduce, buf, buf, n, ncclFloat, ncclSum, nc, g_comm_stream);
  cudaEvent_t done;
  CLEAVE_CUDA(cudaEventCreateWithFlags, &done, cudaEventDisableTiming);
  CLEAVE_CUDA(cudaEventRecord, done, g_comm_stream);
  return Pending{&c, done};
}

void wait(Pending &p) {
  if (!p.request) fail("wait on a collective that was not started (or was already waited for)");
  if (g_staged) {
    std::unique_ptr<Deferred> d(static_cast<Deferred *>(p.request));
    p.request = nullptr;
    staged_all_reduce(*p.comm, d->buf, d->buf, d->count);
    return;
  }
  auto done = static_cast<cudaEvent_t>(p.request);
  CLEAVE_CUDA(cudaStreamWaitEvent, compute_stream(), done, 0);
  // Destroying an event a stream still waits on is allowed: CUDA releases it once the wait is satisfied.
  CLEAVE_CUDA(cudaEventDestroy, done);
  p.request = nullptr;
}

void all_gather(const Comm &c, const float *send, float *recv, int64_t count) {
  size_t n = as_count(count, "all_gather");
  if (g_staged) {
    HostWatch watch("all_gather", c.ranks);
    std::vector<char> in = to_host(send, n * sizeof(float)), out(n * c.ranks.size() * sizeof(float));
    CLEAVE_MPI(MPI_Allgather, in.data(), mpi_count(n, "all_gather"), MPI_FLOAT, out.data(), mpi_count(n, "all_gather"),
               MPI_FLOAT, handles_of(c).mpi);
    return to_device(recv, out, out.size());
  }
  ncclComm_t nc = handles_of(c).nccl;
  on_comm_stream(describe("all_gather", c.ranks), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclAllGather, send, recv, n, ncclFloat, nc, s);
  });
}

void reduce_scatter_sum(const Comm &c, const float *send, float *recv, int64_t count) {
  size_t n = as_count(count, "reduce_scatter_sum");
  if (g_staged) {
    HostWatch watch("reduce_scatter_sum", c.ranks);
    std::vector<char> in = to_host(send, n * c.ranks.size() * sizeof(float)), out(n * sizeof(float));
    host::pairwise_reduce_scatter(handles_of(c).mpi, c.index, c.size(),
                                  reinterpret_cast<const float *>(in.data()), reinterpret_cast<float *>(out.data()),
                                  mpi_count(n, "reduce_scatter_sum"));
    return to_device(recv, out, out.size());
  }
  ncclComm_t nc = handles_of(c).nccl;
  on_comm_stream(describe("reduce_scatter_sum", c.ranks), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclReduceScatter, send, recv, n, ncclFloat, ncclSum, nc, s);
  });
}

void all_to_all(const Comm &c, const float *send, float *recv, int64_t count) {
  size_t n = as_count(count, "all_to_all");
  if (g_staged) {
    HostWatch watch("all_to_all", c.ranks);
    size_t bytes = n * c.ranks.size() * sizeof(float);
    std::vector<char> in = to_host(send, bytes), out(bytes);
    CLEAVE_MPI(MPI_Alltoall, in.data(), mpi_count(n, "all_to_all"), MPI_FLOAT, out.data(), mpi_count(n, "all_to_all"),
               MPI_FLOAT, handles_of(c).mpi);
    return to_device(recv, out, bytes);
  }
  ncclComm_t nc = handles_of(c).nccl;
  on_comm_stream(describe("all_to_all", c.ranks), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclAlltoAll, send, recv, n, ncclFloat, nc, s);
  });
}

void broadcast(const Comm &c, float *buf, int64_t count, int root) {
  if (root < 0 || root >= c.size()) fail("broadcast root " + std::to_string(root) + " is not a group index");
  size_t n = as_count(count, "broadcast");
  if (g_staged) {
    HostWatch watch("broadcast", c.ranks);
    std::vector<char> h = to_host(buf, n * sizeof(float));
    CLEAVE_MPI(MPI_Bcast, h.data(), mpi_count(n, "broadcast"), MPI_FLOAT, root, handles_of(c).mpi);
    return to_device(buf, h, h.size());
  }
  ncclComm_t nc = handles_of(c).nccl;
  on_comm_stream(describe("broadcast", c.ranks), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclBroadcast, buf, buf, n, ncclFloat, root, nc, s);
  });
}

void send_recv(const std::vector<Transfer> &transfers) {
  const Context &ctx = context();
  std::vector<int> peers;
  std::vector<const Transfer *> self_sends, self_recvs;
  for (const Transfer &t : transfers) {
    if (t.peer < 0 || t.peer >= ctx.world) fail("send_recv peer " + std::to_string(t.peer) + " is not a rank");
    if (t.bytes < 0) fail("send_recv: negative size");
    peers.push_back(t.peer);
    if (t.peer == ctx.rank) (t.dir == Transfer::send ? self_sends : self_recvs).push_back(&t);
  }
  if (transfers.empty()) return;
  if (g_staged) {
    // As the CPU backend: every transfer (to this rank itself too) one non-blocking MPI call, on host copies.
    HostWatch watch("send_recv", peers);
    std::vector<std::vector<char>> bufs(transfers.size());
    std::vector<MPI_Request> requests(transfers.size(), MPI_REQUEST_NULL);
    for (size_t i = 0; i < transfers.size(); ++i) {
      const Transfer &t = transfers[i];
      size_t bytes = static_cast<size_t>(t.bytes);
      if (t.dir == Transfer::send) {
        bufs[i] = to_host(t.ptr, bytes);
        CLEAVE_MPI(MPI_Isend, bufs[i].data(), mpi_count(bytes, "send_recv"), MPI_BYTE, t.peer, 0, g_p2p, &requests[i]);
      } else {
        bufs[i].resize(bytes);
        CLEAVE_MPI(MPI_Irecv, bufs[i].data(), mpi_count(bytes, "send_recv"), MPI_BYTE, t.peer, 0, g_p2p, &requests[i]);
      }
    }
    CLEAVE_MPI(MPI_Waitall, static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (size_t i = 0; i < transfers.size(); ++i)
      if (transfers[i].dir == Transfer::recv) to_device(transfers[i].ptr, bufs[i], bufs[i].size());
    return;
  }
  // Transfers to this rank itself match in order, as between two ranks; they are device copies.
  if (self_sends.size() != self_recvs.size()) fail("send_recv: unmatched transfers between this rank and itself");
  for (size_t i = 0; i < self_sends.size(); ++i)
    if (self_sends[i]->bytes != self_recvs[i]->bytes) fail("send_recv: a transfer to itself changes size");
  on_comm_stream(describe("send_recv", peers), [&](cudaStream_t s) {
    CLEAVE_NCCL(ncclGroupStart);
    for (const Transfer &t : transfers) {
      if (t.peer == ctx.rank || t.bytes == 0) continue;
      if (t.dir == Transfer::send)
        CLEAVE_NCCL(ncclSend, t.ptr, static_cast<size_t>(t.bytes), ncclUint8, t.peer, g_world, s);
      else
        CLEAVE_NCCL(ncclRecv, t.ptr, static_cast<size_t>(t.bytes), ncclUint8, t.peer, g_world, s);
    }
    CLEAVE_NCCL(ncclGroupEnd);
    for (size_t i = 0; i < self_sends.size(); ++i)
      if (self_sends[i]->bytes > 0)
        CLEAVE_CUDA(cudaMemcpyAsync, self_recvs[i]->ptr, self_sends[i]->ptr, static_cast<size_t>(self_sends[i]->bytes),
                    cudaMemcpyDeviceToDevice, s);
  });
}

void barrier() {
  detail::sync_compute();
  HostWatch watch("barrier", {});
  CLEAVE_MPI(MPI_Barrier, MPI_COMM_WORLD);
}

void synchronize() { detail::sync_compute(); }

double loss_weight_total_synced(const Comm &g, const LossShape &s, const int64_t *labels, const float *weights) {
  // As the CPU backend: a float sum over the group (over MPI: it is a host value).
  float total = static_cast<float>(loss_weight_total(s, labels, weights));
  HostWatch watch("loss_weight_total_synced", g.ranks);
  CLEAVE_MPI(MPI_Allreduce, MPI_IN_PLACE, &total, 1, MPI_FLOAT, MPI_SUM, handles_of(g).mpi);
  return total;
}

}  // namespace cleave::rt
