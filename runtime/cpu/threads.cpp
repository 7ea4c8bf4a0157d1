// How many threads a rank's kernels run on (OpenBLAS's and oneDNN's OpenMP pool): the cores the rank owns. One rank
// per core by default; a rank alone on its node owns all of the node's cores. CLEAVE_THREADS overrides the count;
// otherwise OMP_NUM_THREADS (both libraries read it) or OPENBLAS_NUM_THREADS (OpenBLAS) set by the user are obeyed.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#if defined(CLEAVE_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#include "cleave/rt.h"
#include "cpu/internal.h"

#if defined(CLEAVE_HAVE_DNNL)
// Debian's libdnnl runs on GNU OpenMP; cleave_runtime.cmake links libgomp itself, so no omp.h (clang's would be
// libomp's) is needed.
extern "C" void omp_set_num_threads(int);
#endif

namespace cleave::rt {
namespace {

int positive_env(const char *name) {
  const char *v = std::getenv(name);
  int n = v ? std::atoi(v) : 0;
  return n > 0 ? n : 0;
}

/** Ranks on this node, from the launcher (1 when none says). */
int local_ranks() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"})
    if (int n = positive_env(name)) return n;
  return 1;
}

}  // namespace

int detail::threads_per_rank() {
  int machine = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t owned;
  int bound = sched_getaffinity(0, sizeof owned, &owned) == 0 ? CPU_COUNT(&owned) : machine;
  if (int n = positive_env("CLEAVE_THREADS")) return n;
  int local = local_ranks();
  if (local == 1) return machine;
  // Several ranks share the node: a core each at least, and no more than the cores the launcher bound us to.
  return std::max(1, std::min(bound, machine / local));
}

void detail::configure_threads() {
  int threads = threads_per_rank();
  // OpenMPI binds a lone rank (mpirun -np 1 or 2) to one core: the threads of a rank that owns more cores than it is
  // bound to would share that one. Widen the binding to the node's cores (a cpuset still limits it).
  cpu_set_t owned;
  if (sched_getaffinity(0, sizeof owned, &owned) == 0 && CPU_COUNT(&owned) < threads) {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int i = 0; i < CPU_SETSIZE; ++i) CPU_SET(i, &all);
    sched_setaffinity(0, sizeof all, &all);
  }
  bool chosen = positive_env("CLEAVE_THREADS") > 0;
#if defined(CLEAVE_HAVE_OPENBLAS)
  if (chosen || (!std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")))
    openblas_set_num_threads(threads);
#endif
#if defined(CLEAVE_HAVE_DNNL)
  if (chosen || !std::getenv("OMP_NUM_THREADS")) omp_set_num_threads(threads);
#endif
  (void)chosen;
}

}  // namespace cleave::rt
