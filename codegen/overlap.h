#pragma once
// Overlap of reductions with compute (DESIGN §7: "transfers overlap compute where the plan allows").
//
// Lowering reduces a partial tensor where it is first read (lower.h), by a blocking in-place all-reduce right before
// the reader's kernel. Nothing touches the partial buffer between the kernel that produced it and that all-reduce,
// so the reduction can start as soon as the producer is done: this pass splits each such all-reduce into
// `rt::all_reduce_sum_start` right after the last earlier statement that uses its buffer (or communicates) and `rt::wait` where the
// all-reduce was. Typical win: data parallelism's gradient all-reduces, issued at the update ops, now start when each
// gradient is produced and run under the rest of the backward pass (on the cuda backend's communication stream).
//
// Collectives must start in the same order on every member of a group (and, under NCCL's one communication stream,
// in the same order relative to other groups' collectives and to transfers). A start is never moved past a
// statement that communicates (a blocking collective, a kernel exchanging inside, a transfer, a barrier), so every
// rank issues its communication in exactly the order it did before the pass, the plan's op order; where the
// producer lies before such a statement, the start lands right after that statement instead. (Moving starts only to
// the producer broke this: a random plan's ranks 0 and 2 started group 3's collectives in different orders.) Earlier
// waits do not count as communication here, so a start may move before the wait of an earlier start of its group,
// never before that start: the starts keep the all-reduces' order. Each wait keeps its all-reduce's place, so the
// blocking points of a rank (waits, blocking collectives, transfers) keep the order they had before the pass too:
// the cpu backend, which has nothing to overlap with (MPI progresses non-blocking collectives only inside MPI
// calls), runs the reduction at the wait (runtime rt.h). check_collective_order verifies, per group over the whole
// program, both the start order and the completion order; the order across groups is consistent by construction
// (lowering emits each collective for all its members at the same op).
#include "codegen/lower.h"

namespace cleave::codegen {

/** Rewrites rank `prog`'s in-place all-reduces (`rt::all_reduce_sum(G, $b$, $b$, n);`) into start/wait pairs where
 *  at least one statement lies between the last earlier use of the buffer and the all-reduce. Run before memory
 *  planning: the buffer's live range is unchanged (it is in use from its producer to the wait anyway). */
void overlap_reductions(RankProgram &prog);

/** Internal error unless, for every group, its members start its collectives (blocking, started, and those inside
 *  kernels) in the same sequence, and complete them in the same sequence (a started all-reduce at its wait, where
 *  the cpu backend runs it). */
void check_collective_order(const Lowered &l);

}  // namespace cleave::codegen
