// codegen/run_failure.h on logs as Open MPI 4.1's mpirun writes them and the ranks' failure records: the rank mpirun
// reports first is the cause, its own record wins over mpirun's words, and without either the earliest record or a
// rank's `cleave rank R:` line is. Real jobs fail in tests/cli/run_failures.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "codegen/run_failure.h"

namespace cleave::codegen {
namespace {
namespace fs = std::filesystem;

class RunFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cleave_run_failure_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "run");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void log(const std::string &text) { std::ofstream(dir_ / "run.log") << text; }
  void record(int rank, const std::string &line) {
    std::ofstream(dir_ / "run" / ("rank_" + std::to_string(rank) + ".failure")) << line << "\n";
  }
  /** The cause, without the `; log: ...` every line ends with (checked here). */
  std::string cause(int exit_status = 1) {
    std::string log_file = (dir_ / "run.log").string();
    std::string line = explain_run_failure("b", 4, (dir_ / "run").string(), log_file, exit_status);
    std::string tail = "; log: " + log_file;
    EXPECT_TRUE(line.ends_with(tail)) << line;
    return line.substr(0, line.size() - tail.size());
  }

  fs::path dir_;
};

const char kSignal[] =
    "[vm:00411] Read -1, expected 4096, errno = 3\n"
    "--------------------------------------------------------------------------\n"
    "Primary job  terminated normally, but 1 process returned\n"
    "a non-zero exit code. Per user-direction, the job has been aborted.\n"
    "--------------------------------------------------------------------------\n"
    "--------------------------------------------------------------------------\n"
    "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).\n"
    "--------------------------------------------------------------------------\n";

const char kExitCode[] =
    "cleave rank 1: all_reduce_sum on group [0,1,2,3] timed out after 10 s: rank 2 stopped responding\n"
    "--------------------------------------------------------------------------\n"
    "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    "the job to be terminated. The first process to do so was:\n"
    "\n"
    "  Process name: [[26859,1],1]\n"
    "  Exit code:    1\n"
    "--------------------------------------------------------------------------\n";

const char kAbort[] =
    "cleave rank 1: loss: label 12 is out of range [0, 10)\n"
    "--------------------------------------------------------------------------\n"
    "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
    "with errorcode 1.\n";

TEST_F(RunFailure, AKilledRankIsNamedWithItsSignal) {
  log(kSignal);
  record(3, "1700000000001 rank 3: MPI_Allreduce failed at mpi.cpp:120: a peer died");  // a consequence
  EXPECT_EQ(cause(), "rank 2 was killed by signal 9 (Killed)");
}

TEST_F(RunFailure, TheFirstRankToExitTellsItsRecord) {
  log(kExitCode);
  record(0, "1700000000005 rank 2 stopped responding in step 7 (its last collective: 4 of 7; others waited 10 s)");
  record(1, "1700000000004 rank 2 stopped responding in step 7 (its last collective: 4 of 7; others waited 9 s)");
  EXPECT_EQ(cause(), "rank 2 stopped responding in step 7 (its last collective: 4 of 7; others waited 9 s)");
}

TEST_F(RunFailure, AnExitCodeWithoutARecord) {
  std::string text = kExitCode;
  text.replace(text.find("Exit code:    1"), 15, "Exit code:    3");
  log(text);
  EXPECT_EQ(cause(), "rank 1 exited with code 3");
}

TEST_F(RunFailure, AnAbortingRankTellsItsRecordElseItsLine) {
  log(kAbort);
  EXPECT_EQ(cause(), "rank 1: loss: label 12 is out of range [0, 10)");
  record(1, "1700000000000 step 12: loss is nan");
  EXPECT_EQ(cause(), "step 12: loss is nan");
}

TEST_F(RunFailure, WithoutMpirunsWordTheEarliestRecord) {
  log("");
  record(2, "1700000000009 rank 2: later");
  record(3, "1700000000002 rank 3: earlier");
  EXPECT_EQ(cause(), "rank 3: earlier");
}

TEST_F(RunFailure, NothingToGoOn) {
  log("something else\n");
  EXPECT_EQ(cause(137), "b: the training job failed (mpirun exit status 137)");
}

}  // namespace
}  // namespace cleave::codegen
