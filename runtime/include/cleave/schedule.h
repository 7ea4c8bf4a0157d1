#pragma once
// The learning-rate schedules and the order samples are read in (common/schedule.cpp): the ranks use them
// (rt::TrainingRun) and so does `cleave eval` (tools/cli/eval_command.cpp), so a partitioned run and the interpreter
// train alike. Part of the runtime's headers (rt.h holds a TrainingRun's), it includes only the standard library.
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::sched {

/** torch.optim.lr_scheduler's schedules over a run of `total` steps (see lr()). */
struct LrSchedule {
  std::string kind = "constant";  // constant | step | multistep | cosine | linear | onecycle
  int64_t warmup = 0;             // linear warm-up steps before the schedule (onecycle: its rising phase)
  int64_t step_size = 1;          // step
  std::vector<int64_t> milestones;  // multistep, increasing
  double gamma = 0.1;             // step, multistep
  double min_lr = 0;              // cosine, linear: the final rate
  int64_t total = 1;              // the run's last step

  /** Why these settings are not a schedule ("--lr-schedule multistep: needs --milestones"), or "". */
  std::string problem() const;
  /** The rate step `step` (from 1) updates with for base rate `base`: torch's after step - 1 calls of
   *  scheduler.step(). Warm-up W: SequentialLR of LinearLR(start_factor=1/W, total_iters=W-1) and the schedule from
   *  step W on; cosine and linear span the steps after warm-up; onecycle is OneCycleLR(max_lr=base,
   *  total_steps=total, pct_start=W/total or 0.3, cycle_momentum=False). */
  double lr(double base, int64_t step) const;
};

/** Which sample of a file of `count` samples position `at` of the sample stream reads: `at mod count`, or with
 *  shuffling, position `at mod count` of epoch `at / count`'s permutation, a Fisher-Yates shuffle driven by
 *  splitmix64 from (seed, epoch) alone, so every plan and rank count reads the same batches. */
class SampleOrder {
 public:
  SampleOrder() = default;
  SampleOrder(bool shuffle, uint64_t seed) : shuffle_(shuffle), seed_(seed) {}
  int64_t sample(int64_t at, int64_t count);
  bool shuffled() const { return shuffle_; }

 private:
  bool shuffle_ = false;
  uint64_t seed_ = 0;
  int64_t epoch_ = -1, count_ = 0;
  std::vector<int64_t> perm_;
};

}  // namespace cleave::rt::sched
