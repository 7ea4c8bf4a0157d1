#pragma once
// The process side every backend shares (not part of the API): the launch environment, MPI start-up, and reporting
// a failure so that the whole job ends. fail(), check_mpi() and log_info() are defined with them (common/process.cpp).
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt::host {

/** The integer value of an environment variable, or -1. */
int env_int(const char *name);
/** This process's rank for messages: MPI's when initialised, else the launcher's, else -1. */
int message_rank();
/** Prints `cleave rank R: CALL failed at FILE:LINE: TEXT` and ends the job (the checks behind the CLEAVE_* macros). */
[[noreturn]] void report(const char *call, const char *file, int line, const std::string &text);
/** MPI_Init (unless done), MPI errors as return codes, this process's rank and world size, its run status record
 *  (common/run_status.h), and the launcher's claim (OMPI_*, SLURM_*, RANK/WORLD_SIZE), which must agree with MPI's:
 *  the part of init() every backend shares. */
void init_process(int *argc, char ***argv, Context &c);
/** Rank 0's `step <k> loss <v>` line; a loss that is not finite then ends the job (`step <k>: loss is nan`, as a
 *  failure record for the launcher: common/run_status.h). init_process makes stdout fully buffered; lines are flushed
 *  after the first step, then at most once a second, at exit, and when this rank aborts or its watchdog ends it. Up to
 *  a second of them is lost when the process is killed (another rank aborting the job, a signal). Why: under mpirun a
 *  rank's stdout is a pseudo-terminal forwarded by the launcher, and a flush per step cost rank 0 30-80 us (a write,
 *  and waking the forwarding process, which took a core from the ranks of a small host) on steps of 0.2-4 ms. */
void print_loss(int64_t step, double value);
/** Loss scaling's outcome for this step (TrainingRun::unscale_grads), before its print_loss: the line then ends with
 *  ` loss_scale S` (the scale the step used) and ` skipped` for a skipped step, whose loss may be inf or NaN without
 *  ending the job (the scaler skipped its updates, as torch's GradScaler does). */
void note_loss_scale(double scale, bool skipped);
/** The scale last noted (0 before any). */
double noted_loss_scale();
/** The value of the last print_loss (NaN before the first). */
double last_loss();
/** Flushes the loss lines printed so far (finalize, the watchdogs). */
void flush_losses();
/** This process's index in group `ranks` (world ranks), or -1 when it is not a member, after checking that the group
 *  is not empty, every member is a rank and none is listed twice (else fail()). */
int group_position(const std::vector<int> &ranks, const Context &c);
/** group_position, failing when this process is not a member: what rt::group checks. */
int member_index(const std::vector<int> &ranks, const Context &c);
/** Fails on every rank unless every rank of the world passed the same `groups` (compared by a hash all-reduced over
 *  MPI_COMM_WORLD): rt::create_groups is collective over the world, and ranks that disagree on its list would pair
 *  different groups' creations and deadlock or mix communicators. */
void check_same_groups(const std::vector<std::vector<int>> &groups);
/** "[0,2,3]": a group's members for messages. */
std::string ranks_text(const std::vector<int> &ranks);
/** The node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, LOCAL_RANK), else the world rank. */
int local_rank(int world_rank);

}  // namespace cleave::rt::host
