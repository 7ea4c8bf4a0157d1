// The pairwise reduce-scatter over MPI (common/reduce_scatter.h).
#include "common/reduce_scatter.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt::host {

void pairwise_reduce_scatter(MPI_Comm comm, int index, int members, const real *send, real *recv, int64_t count) {
  std::memcpy(recv, send + index * count, static_cast<size_t>(count) * sizeof(real));
  if (members == 1) return;
  // Received blocks go through a scratch of at most 1 Mi floats, kept across calls (no allocation per step).
  constexpr int64_t kChunk = int64_t{1} << 20;
  static thread_local std::vector<real> scratch;
  scratch.resize(static_cast<size_t>(std::min(count, kChunk)));
  real *tmp = scratch.data();
  for (int k = 1; k < members; ++k) {
    int to = (index + k) % members, from = (index - k + members) % members;
    const real *out = send + to * count;
    for (int64_t at = 0; at < count; at += kChunk) {
      int n = static_cast<int>(std::min(kChunk, count - at));
      CLEAVE_MPI(MPI_Sendrecv, out + at, n, mpi_real(), to, 0, tmp, n, mpi_real(), from, 0, comm, MPI_STATUS_IGNORE);
      real *acc = recv + at;
      for (int i = 0; i < n; ++i) acc[i] += tmp[i];
    }
  }
}

}  // namespace cleave::rt::host
