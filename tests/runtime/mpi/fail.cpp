// A program whose rank 1 misbehaves on purpose while the other ranks wait in a collective (argv[1]: "runtime" =
// rt::fail, "mpi" = an MPI call with a bad argument, "hang" = rank 1 never arrives, so the watchdog must end the
// job, "groups" = rank 1 passes create_groups a different list, "nogroup" = rank 1 asks for a group never created,
// "unwaited" = rank 1 starts an all-reduce and drops it without a wait, "overwritten" = rank 1 assigns a second start to
// the Pending of a first one). check_fail.sh checks that the job ends with the expected message and a non-zero status
// instead of hanging.
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cleave/rt.h"

int main(int argc, char **argv) {
  const cleave::rt::Context &ctx = cleave::rt::init(&argc, &argv);
  std::string mode = argc > 1 ? argv[1] : "runtime";
  std::vector<int> all;
  for (int r = 0; r < ctx.world; ++r) all.push_back(r);
  std::vector<std::vector<int>> groups = {all, {0, 1}};
  if (mode == "groups" && ctx.rank == 1) groups = {all, {1, 0}};
  cleave::rt::create_groups(groups);
  if (mode == "nogroup" && ctx.rank == 1) cleave::rt::group({1, 2});
  const cleave::rt::Comm &world = cleave::rt::group(all);
  std::vector<float> buf(4, 1.0f);
  if (ctx.rank == 1) {
    if (mode == "mpi") CLEAVE_MPI(MPI_Send, buf.data(), 4, MPI_FLOAT, ctx.world + 5, 0, MPI_COMM_WORLD);  // bad rank
    else if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
    else if (mode == "unwaited") cleave::rt::Pending dropped = cleave::rt::all_reduce_sum_start(world, buf.data(), 4);
    else if (mode == "overwritten") {
      cleave::rt::Pending p = cleave::rt::all_reduce_sum_start(world, buf.data(), 4);
      p = cleave::rt::all_reduce_sum_start(world, buf.data(), 4);
    }
    else cleave::rt::fail("deliberate failure for the abort test");
  }
  // The others block here; only the abort (or the watchdog) can end them.
  cleave::rt::all_reduce_sum(world, buf.data(), buf.data(), 4);
  cleave::rt::finalize();
  return 0;
}
