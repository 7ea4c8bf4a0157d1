#pragma once
// Internal to the CPU backend: what its files share beyond rt.h.
#include <string>
#include <vector>

namespace cleave::rt::detail {

/** Creates the point-to-point communicator (mpi.cpp); called by init() on every rank. */
void init_communication();
/** Shares the node's cores among its ranks' BLAS threads (gemm.cpp); called by init(). */
void configure_blas_threads();
/** Frees the cached group communicators (mpi.cpp); called by finalize(). */
void release_communicators();

/** Starts the communication watchdog (watchdog.cpp) unless CLEAVE_COMM_TIMEOUT is 0. The timeout in seconds comes
 *  from CLEAVE_COMM_TIMEOUT (default 900). Called once by init(). */
void start_watchdog(int rank);

/** Marks a blocking communication call in progress for the watchdog: if it lasts longer than the timeout, the
 *  process prints `cleave rank R: <what> on group [..] timed out after N s ...` and exits, which makes the launcher
 *  end the whole job, so a dead or stuck peer never hangs the others. */
class CommWatch {
 public:
  CommWatch(const char *what, const std::vector<int> &ranks);
  ~CommWatch();
  CommWatch(const CommWatch &) = delete;
  CommWatch &operator=(const CommWatch &) = delete;
};

}  // namespace cleave::rt::detail
