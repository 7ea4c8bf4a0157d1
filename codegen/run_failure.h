#pragma once
// Why a training job failed, in one line for `cleave run`, from what the job left behind: the failure records its
// ranks wrote in the run status directory (runtime/common/run_status.h) and the launcher's log (mpirun's and the
// ranks' stderr).
#include <string>

namespace cleave::codegen {

/** The cause of a failed run of `ranks` ranks, then `; log: LOG_FILE`. The rank mpirun reports first (MPI_Abort,
 *  a signal, a non-zero exit) is the cause: its failure record when it wrote one (`rank 1: loss: label 12 is out of
 *  range [0, 10)`, `step 12: loss is nan`, `rank 2 stopped responding in step 7 (...)`), else what mpirun says
 *  (`rank 2 was killed by signal 9 (Killed)`, `rank 3 exited with code 4`). Without such a report, the earliest
 *  failure record, else the first `cleave rank R: ...` line of the log, else `BUNDLE: the training job failed (mpirun
 *  exit status N)`. */
std::string explain_run_failure(const std::string &bundle, int ranks, const std::string &status_dir,
                                const std::string &log_file, int exit_status);

}  // namespace cleave::codegen
