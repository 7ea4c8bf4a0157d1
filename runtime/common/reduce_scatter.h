#pragma once
// The reduce-scatter both backends run over MPI: the CPU backend's, and the CUDA backend's host-staged one (ranks
// sharing a GPU). Open MPI 4.1's MPI_Reduce_scatter_block took 42-54 ms for a 9.4 MB send buffer over 2 ranks of one
// host, whatever its tuned algorithm but recursive doubling (2.4-5.6 ms), and 0.6 ms for 256 KB, where the exchange
// below takes 1.2 ms and 0.01 ms: its all-reduce of the same 9.4 MB takes 1.8 ms.
#include <mpi.h>

#include <cstdint>

#include "cleave/rt.h"

namespace cleave::rt::host {

/** The MPI datatype of rt::real, for every collective on tensors. */
inline MPI_Datatype mpi_real() { return sizeof(real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT; }

/** Member `index` of the `members` of `comm` receives in recv [count] the sum over the members of block `index` of
 *  their send [members * count] (send and recv must not overlap). A pairwise exchange: at round k = 1 .. members-1,
 *  member i sends its block (i + k) mod members to that member and receives its own block from member
 *  (i - k) mod members, so each block is summed by its owner alone, in a fixed order: its own contribution, then
 *  member i-1's, i-2's, ... (the result is the same bytes on every run). */
void pairwise_reduce_scatter(MPI_Comm comm, int index, int members, const real *send, real *recv, int64_t count);

}  // namespace cleave::rt::host
