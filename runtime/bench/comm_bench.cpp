// The collective benchmark of `cleave profile` (planner/cost/profile.h): times every collective the generated programs
// call, through the same runtime functions (MPI on the cpu backend, NCCL on cuda), for each group size 2..world
// (group = world ranks 0..p-1) and message sizes 4, 8, ..., --max-bytes (TensorOpt measures sizes 2^i and
// interpolates). Sizes are what the cost model
// prices: the all-reduced buffer, one member's block of an all-gather / reduce-scatter, one pair's part of an
// all-to-all, one transfer of a send/recv (each member sends to the next in the group and receives from the
// previous, all at once). A case's time is the median over --reps repetitions of the slowest member's time, after
// one untimed warm-up. Rank 0 prints one line per case on stdout: `<kind> <group size> <bytes> <seconds>`.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace rt = cleave::rt;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char **argv) {
  const rt::Context &ctx = rt::init(&argc, &argv);
  int64_t max_bytes = int64_t{1} << 22;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-bytes" && i + 1 < argc) max_bytes = std::atoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else rt::fail("unknown argument " + a + " (usage: comm_bench [--max-bytes N] [--reps K])");
  }
  if (max_bytes < 4 || reps < 1) rt::fail("--max-bytes must be >= 4 and --reps >= 1");
  // Groups 0..p-1 for p = 2..world, created together by every rank (create_groups is collective over the world).
  std::vector<std::vector<int>> members;
  for (int p = 2; p <= ctx.world; ++p) {
    members.emplace_back();
    for (int r = 0; r < p; ++r) members.back().push_back(r);
  }
  rt::create_groups(members);
  std::vector<const rt::Comm *> groups(static_cast<size_t>(ctx.world) + 1, nullptr);
  for (int p = 2; p <= ctx.world; ++p)
    if (ctx.rank < p) groups[static_cast<size_t>(p)] = &rt::group(members[static_cast<size_t>(p - 2)]);
  int64_t max_floats = max_bytes / 4;
  // Backend memory (device memory on cuda), zero-filled: the values do not change the time.
  size_t buffer_bytes = static_cast<size_t>(max_floats * ctx.world) * 4;
  rt::Arena send_arena(buffer_bytes), recv_arena(buffer_bytes);
  float *send = send_arena.reals(0), *recv = recv_arena.reals(0);
  const char *kinds[] = {"all_gather", "all_reduce", "all_to_all", "reduce_scatter", "send_recv"};
  for (int p = 2; p <= ctx.world; ++p) {
    const rt::Comm *g = groups[static_cast<size_t>(p)];
    for (const char *kind : kinds) {
      std::string k = kind;
      for (int64_t bytes = 4; bytes <= max_bytes; bytes *= 2) {
        int64_t count = bytes / 4;
        auto once = [&] {
          if (!g) return;
          if (k == "all_reduce") rt::all_reduce_sum(*g, send, recv, count);
          else if (k == "all_gather") rt::all_gather(*g, send, recv, count);
          else if (k == "reduce_scatter") rt::reduce_scatter_sum(*g, send, recv, count);
          else if (k == "all_to_all") rt::all_to_all(*g, send, recv, count);
          else {
            int me = ctx.rank, next = (me + 1) % p, prev = (me + p - 1) % p;
            rt::send_recv({{rt::Transfer::send, next, send, bytes}, {rt::Transfer::recv, prev, recv, bytes}});
          }
        };
        std::vector<double> times;
        for (int rep = 0; rep <= reps; ++rep) {
          rt::barrier();
          double t0 = MPI_Wtime();
          once();
          rt::synchronize();  // cuda: the collective ran on the device, after the host call returned
          double mine = MPI_Wtime() - t0, slowest = 0;
          CLEAVE_MPI(MPI_Allreduce, &mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          if (rep > 0) times.push_back(slowest);
        }
        if (ctx.rank == 0) std::printf("%s %d %lld %.6e\n", kind, p, static_cast<long long>(bytes), median(times));
      }
    }
  }
  std::fflush(stdout);
  rt::finalize();
  return 0;
}
