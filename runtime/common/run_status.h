#pragma once
// Run status (not part of the API): what a launcher needs to say in one line why a job failed. When
// CLEAVE_STATUS_DIR names a directory (`cleave run` passes one), each rank keeps there
//  - rank_<r>.status: a live record, mapped shared so that a stopped or killed rank's last stamps outlive it: a
//    heartbeat (the watchdog thread's, every 200 ms), its step, the collectives it entered in this step and the whole
//    last step, and the communication call in progress with its start;
//  - rank_<r>.failure, written once when the rank fails: `<unix ms> <message>`, the message one line for a person
//    (`rank 1: loss: label 12 is out of range [0, 10)`, `step 12: loss is nan`, `rank 2 stopped responding ...`).
// A rank whose communication times out reads its peers' records to name the rank that stopped or did not arrive.
// Without CLEAVE_STATUS_DIR every function here does nothing (status_stall returns "").
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::host {

/** A heartbeat older than this (ms) means its rank is not running: ten of the watchdog's periods, and long enough
 *  that a busy machine's scheduling delays do not count. The watchdogs also do not count a gap this long in their own
 *  beats against a timeout (this process was stopped, not its peers). */
constexpr int64_t kStaleMs = 2000;

/** Creates this rank's status record in $CLEAVE_STATUS_DIR; called by init_process once the rank is known. A
 *  directory it cannot write is reported on stderr and the record is skipped (status is a diagnosis, not a need). */
void status_open(int rank, int world);
/** A step begins (rt::profile_step_begin, through detail::run_status_step): counts it, and the collectives of the
 *  step before. */
void status_step();
/** The run starts at step `step` (a resumed run: rt::TrainingRun::load), so the steps it reports are the run's. */
void status_first_step(int64_t step);
/** A communication call (`what`, e.g. "all_reduce_sum on group [0,1]") begins on this rank / has returned. */
void status_comm_begin(const std::string &what);
void status_comm_end();
/** The watchdog thread's beat (every 200 ms): a rank whose beat is older than kStaleMs is not running. */
void status_heartbeat();
/** finalize(): this rank ended normally, so its silence afterwards is not a stall. */
void status_finished();
/** Writes rank_<r>.failure (`<unix ms> <message>`) unless this process wrote one already; never fails itself. `rank`
 *  is passed in because the watchdog thread must not ask MPI. */
void status_failure(int rank, const std::string &message);
/** Why a communication call on `group` (world ranks; empty = every rank) has waited `waited_s` seconds on this rank,
 *  from the peers' records: the ranks that stopped responding (stale heartbeat), else the members that did not
 *  arrive, e.g. `rank 2 stopped responding in step 7 (its last collective: 41 of 96; others waited 10 s)`. ""
 *  when there are no records or they name no one. */
std::string status_stall(const std::vector<int> &group, int64_t waited_s);

}  // namespace cleave::rt::host
