// MPI communication: communicators for ordered device groups (split from the world at startup), collectives, grouped send/recv.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>

#include "cleave/rt.h"
#include "common/process.h"
#include "common/reduce_scatter.h"
#include "cpu/internal.h"

namespace cleave::rt {
namespace {

/** Cached groups, keyed by their ordered rank list (std::map: no hashing, stable teardown order). */
std::map<std::vector<int>, std::unique_ptr<Comm>> &comm_cache() {
  static std::map<std::vector<int>, std::unique_ptr<Comm>> cache;
  return cache;
}

MPI_Comm handle_of(const Comm &c) {
  if (!c.handle) fail("use of a communicator that was not created by cleave::rt::create_groups");
  return *static_cast<MPI_Comm *>(c.handle);
}

/** MPI counts are int: a larger message is a bug of the caller's chunking, reported rather than truncated. */
int as_count(int64_t count, const char *what) {
  if (count < 0 || count > INT_MAX)
    fail(std::string(what) + ": count " + std::to_string(count) + " is outside [0, INT_MAX]");
  return static_cast<int>(count);
}

/** The communicator for point-to-point transfers: a duplicate of world (so its messages never match another
 *  library's), created by init() because duplicating is collective over every rank. */
MPI_Comm g_p2p = MPI_COMM_NULL;

MPI_Comm p2p_comm() {
  if (g_p2p == MPI_COMM_NULL) fail("send_recv before cleave::rt::init");
  return g_p2p;
}

/** Every group create_groups has split off so far, on every rank alike (members or not): the list that decides
 *  which groups a later call skips, so that all ranks skip the same ones. */
std::vector<std::vector<int>> &created() {
  static std::vector<std::vector<int>> all;
  return all;
}

}  // namespace

void detail::init_communication() {
  CLEAVE_MPI(MPI_Comm_dup, MPI_COMM_WORLD, &g_p2p);
  CLEAVE_MPI(MPI_Comm_set_errhandler, g_p2p, MPI_ERRORS_RETURN);
}

void detail::release_communicators() {
  if (g_p2p != MPI_COMM_NULL) MPI_Comm_free(&g_p2p);
  for (auto &[ranks, comm] : comm_cache()) {
    MPI_Comm *h = static_cast<MPI_Comm *>(comm->handle);
    if (*h != MPI_COMM_NULL) MPI_Comm_free(h);
    delete h;
  }
  comm_cache().clear();
}

void create_groups(const std::vector<std::vector<int>> &groups) {
  detail::CommWatch watch("group creation", {});
  host::check_same_groups(groups);
  for (const auto &ranks : groups) {
    int index = host::group_position(ranks, context());
    if (std::find(created().begin(), created().end(), ranks) != created().end()) continue;
    created().push_back(ranks);
    // Collective over the world: members take colour 0 and key their index, so the new communicator orders them as
    // `ranks` does; the others pass MPI_UNDEFINED and get MPI_COMM_NULL.
    MPI_Comm split = MPI_COMM_NULL;
    CLEAVE_MPI(MPI_Comm_split, MPI_COMM_WORLD, index < 0 ? MPI_UNDEFINED : 0, index, &split);
    if (index < 0) continue;
    CLEAVE_MPI(MPI_Comm_set_errhandler, split, MPI_ERRORS_RETURN);
    int check = -1;
    CLEAVE_MPI(MPI_Comm_rank, split, &check);
    if (check != index) fail("communicator rank order differs from the group order");
    auto comm = std::make_unique<Comm>();
    comm->ranks = ranks;
    comm->index = index;
    comm->handle = new MPI_Comm(split);
    comm_cache().emplace(ranks, std::move(comm));
  }
}

const Comm &group(const std::vector<int> &ranks) {
  host::member_index(ranks, context());
  auto it = comm_cache().find(ranks);
  if (it == comm_cache().end()) fail("group " + host::ranks_text(ranks) + " was not made by cleave::rt::create_groups");
  return *it->second;
}

void all_reduce_sum(const Comm &c, const real *send, real *recv, int64_t count) {
  detail::CommWatch watch("all_reduce_sum", c.ranks);
  const void *s = send == recv ? MPI_IN_PLACE : send;
  CLEAVE_MPI(MPI_Allreduce, s, recv, as_count(count, "all_reduce_sum"), host::mpi_real(), MPI_SUM, handle_of(c));
}

namespace {
/** A started all-reduce on this backend: what wait() reduces. */
struct Deferred {
  real *buf;
  int64_t count;
};
}  // namespace

// MPI progresses a non-blocking collective only inside MPI calls, so on CPUs an MPI_Iallreduce overlaps nothing, and
// its start and wait took 2-3x a blocking MPI_Allreduce of up to 4 KB here (Open MPI 4.1, 2 ranks; 1.2x at 64 KB).
// The reduction therefore runs, blocking, inside wait(). Waits stand where the blocking all-reduces stood before
// codegen split them (codegen/overlap.h), so every member still reduces in the same order.
Pending all_reduce_sum_start(const Comm &c, real *buf, int64_t count) {
  as_count(count, "all_reduce_sum_start");
  handle_of(c);  // a bad group fails here, where it is named, not at the wait
  return Pending{&c, new Deferred{buf, count}};
}

void wait(Pending &p) {
  if (!p.request) fail("wait on a collective that was not started (or was already waited for)");
  std::unique_ptr<Deferred> d(static_cast<Deferred *>(p.request));
  p.request = nullptr;
  all_reduce_sum(*p.comm, d->buf, d->buf, d->count);  // watched: a dead peer would hang this rank here
}

void all_gather(const Comm &c, const real *send, real *recv, int64_t count) {
  detail::CommWatch watch("all_gather", c.ranks);
  int n = as_count(count, "all_gather");
  CLEAVE_MPI(MPI_Allgather, send, n, host::mpi_real(), recv, n, host::mpi_real(), handle_of(c));
}

void reduce_scatter_sum(const Comm &c, const real *send, real *recv, int64_t count) {
  detail::CommWatch watch("reduce_scatter_sum", c.ranks);
  host::pairwise_reduce_scatter(handle_of(c), c.index, c.size(), send, recv,
                                as_count(count, "reduce_scatter_sum"));
}

void all_to_all(const Comm &c, const real *send, real *recv, int64_t count) {
  detail::CommWatch watch("all_to_all", c.ranks);
  int n = as_count(count, "all_to_all");
  CLEAVE_MPI(MPI_Alltoall, send, n, host::mpi_real(), recv, n, host::mpi_real(), handle_of(c));
}

void broadcast(const Comm &c, real *buf, int64_t count, int root) {
  detail::CommWatch watch("broadcast", c.ranks);
  if (root < 0 || root >= c.size()) fail("broadcast root " + std::to_string(root) + " is not a group index");
  CLEAVE_MPI(MPI_Bcast, buf, as_count(count, "broadcast"), host::mpi_real(), root, handle_of(c));
}

void send_recv(const std::vector<Transfer> &transfers) {
  const Context &ctx = context();
  MPI_Comm comm = p2p_comm();
  std::vector<MPI_Request> requests(transfers.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer &t = transfers[i];
    if (t.peer < 0 || t.peer >= ctx.world) fail("send_recv peer " + std::to_string(t.peer) + " is not a rank");
    int n = as_count(t.bytes, "send_recv");
    if (t.dir == Transfer::send)
      CLEAVE_MPI(MPI_Isend, t.ptr, n, MPI_BYTE, t.peer, 0, comm, &requests[i]);
    else
      CLEAVE_MPI(MPI_Irecv, t.ptr, n, MPI_BYTE, t.peer, 0, comm, &requests[i]);
  }
  if (requests.empty()) return;
  std::vector<int> peers;
  for (const Transfer &t : transfers) peers.push_back(t.peer);
  detail::CommWatch watch("send_recv", peers);
  CLEAVE_MPI(MPI_Waitall, static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

void barrier() {
  detail::CommWatch watch("barrier", {});
  CLEAVE_MPI(MPI_Barrier, MPI_COMM_WORLD);
}

void synchronize() {}

}  // namespace cleave::rt
