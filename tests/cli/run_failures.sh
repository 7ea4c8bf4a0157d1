#!/usr/bin/env bash
# `cleave run` when its job fails (codegen/run_failure.h): the MLP on 4 data-parallel ranks. In each case the run
# exits non-zero within 60 s of the failure, with exactly one `error:` line on stderr that names the cause and the
# log (mpirun's banners and the ranks' messages go to BUNDLE/build/run.log):
#  - kill -9 of rank 2 mid-run: `rank 2 was killed by signal 9 (Killed)`;
#  - SIGSTOP of rank 2 mid-run, CLEAVE_COMM_TIMEOUT=5: `rank 2 stopped responding in step K (its last collective: ...`;
#  - a label out of range in rank 1's samples of step 3: `rank 1: loss: label 12 is out of range [0, 10)`;
#  - a NaN in an input of step 12: `step 12: loss is nan`, after the loss lines of steps 1-12 on stdout;
#  - run by hand under a launcher whose rank or size disagrees with MPI's: one line naming both (rt::init).
# It prints the seconds from the kill and from the stop to the exit.
# Usage: run_failures.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
src=$2
work=$(mktemp -d)
stopped=""
# A rank left stopped by a failed check would hold its job: end that one process.
trap '[ -n "$stopped" ] && kill -9 "$stopped" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
# The main build's runtime, so the bundle compiles only its rank sources (Debug: the fastest to compile).
rt=$(dirname "$(dirname "$(readlink -f "$cleave")")")/runtime
rtflag=()
[ -f "$rt/libcleave_rt_cpu.a" ] && rtflag=(--runtime-dir "$rt")
d=$src/models/data
/usr/bin/python3 -c "
import numpy as np
y = np.load('$d/digits_train_y.npy'); y[2 * 16 + 5] = 12; np.save('$work/bad_y.npy', y)
x = np.load('$d/digits_flat_train_x.npy'); x[11 * 16 + 2, 5] = np.nan; np.save('$work/nan_x.npy', x)"
good="x=$d/digits_flat_train_x.npy,y=$d/digits_train_y.npy"
"$cleave" compile "$src/models/mlp.onnx" --devices 4 --batch 16 --planner data -o "$work/b" 2>/dev/null ||
  { echo "FAIL compile"; exit 1; }
run() {  # ARGS...: cleave run of the bundle, stdout and stderr to $work/out and $work/err
  timeout 120 "$cleave" run "$work/b" "${rtflag[@]}" --build-type Debug "$@" > "$work/out" 2> "$work/err"
}
run --data "$good" --steps 1 || { cat "$work/err"; echo "FAIL a good run"; exit 1; }  # builds the ranks

# expect CASE CODE PATTERN: exit status CODE (not 0, not timeout's 124), and one error line on stderr, matching PATTERN
expect() {
  local n
  n=$(grep -c '^error:' "$work/err")
  [ "$2" -ne 0 ] && [ "$2" -ne 124 ] || fail "$1: exit status $2"
  [ "$n" -eq 1 ] || fail "$1: $n error lines"
  grep -Eq "$3; log: .*/build/run\.log$" "$work/err" || fail "$1: no error line matching: $3"
  grep '^error:' "$work/err"
}

# find_rank ANCESTOR RANK: the pid of rank RANK's process below ANCESTOR (not another job's): rank_RANK, or the
# program every rank runs, "ranks", whose environment mpirun gave OMPI_COMM_WORLD_RANK=RANK
find_rank() {
  local p a
  for p in $(pgrep -x "rank_$2") $(for q in $(pgrep -x ranks); do
             tr '\0' '\n' < "/proc/$q/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$q"; done); do
    a=$p
    while [ -n "$a" ] && [ "$a" -gt 1 ]; do
      a=$(ps -o ppid= -p "$a" | tr -d ' ')
      [ "$a" = "$1" ] && { echo "$p"; return 0; }
    done
  done
  return 1
}

alive() {  # PID: the process exists and is not a zombie (an orphan's zombie waits for init to reap it)
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${stat#Z}" = "$stat" ]
}

# signal_mid_run CASE SIGNAL: a long run, SIGNAL to rank 2 once the losses flow; sets code and seconds (to the exit)
signal_mid_run() {
  : > "$work/out"  # not the last run's losses
  run --data "$good" --steps 100000000 &
  local job=$! rank="" i start
  for i in $(seq 600); do grep -q '^step 2 ' "$work/out" && rank=$(find_rank "$job" 2) && break; sleep 0.1; done
  if [ -z "$rank" ]; then
    fail "$1: no loss lines or no rank 2 process after 60 s"
    cat "$work/err"
    kill $(ps -o pid= --ppid "$job") 2>/dev/null  # timeout, which passes it on to the run
    wait "$job"
    code=0
    return
  fi
  [ "$2" = STOP ] && stopped=$rank
  start=$(date +%s.%N)
  kill -"$2" "$rank"
  wait "$job"
  code=$?
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  for i in $(seq 50); do alive "$rank" || break; sleep 0.1; done
  alive "$rank" && fail "$1: rank 2 outlived the run by 5 s"
  stopped=""
  echo "$1: exit status $code after $seconds s"
  [ "$(echo "$seconds <= 60" | bc)" -eq 1 ] || fail "$1: took $seconds s"
}

# A launcher whose variables disagree with MPI (a singleton run of the program here, with RANK/WORLD_SIZE set): every
# rank chooses its weights file by the launcher's rank, so init refuses, naming both.
launcher_refused() {  # ENV MESSAGE
  local out code
  out=$(env $1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 "$work/b/build/ranks" \
        --weights "$work/b/weights/ranks.bin" --steps 1 2>&1)
  code=$?
  [ "$code" -ne 0 ] && [ "$code" -ne 124 ] || fail "launcher $1: exit status $code"
  grep -qxF "cleave rank 0: $2" <<<"$out" || fail "launcher $1: no line 'cleave rank 0: $2' in: $(head -3 <<<"$out")"
}
launcher_refused "RANK=1 WORLD_SIZE=1" "the launcher (env) says this process is rank 1 but MPI made it rank 0"
launcher_refused "RANK=0 WORLD_SIZE=3" \
  "the launcher (env) reports 3 ranks but MPI has 1 (is MPI built with this launcher's support?)"

signal_mid_run kill KILL
expect kill "$code" '^error: rank 2 was killed by signal 9 \(Killed\)'

CLEAVE_COMM_TIMEOUT=5 signal_mid_run stop STOP
where='(in step [0-9]+|before its first step) \(its last collective: [0-9]+( of [0-9]+)?; others waited 5 s\)'
expect stop "$code" "^error: rank 2 stopped responding $where"

run --data "x=$d/digits_flat_train_x.npy,y=$work/bad_y.npy" --steps 5
expect label $? '^error: rank 1: loss: label 12 is out of range \[0, 10\)'

run --data "x=$work/nan_x.npy,y=$d/digits_train_y.npy" --steps 20
expect nan $? '^error: step 12: loss is nan'
[ "$(grep -c '^step ' "$work/out")" -eq 12 ] && grep -q '^step 12 loss nan$' "$work/out" ||
  fail "nan: stdout does not end with the loss lines of steps 1-12"

[ $failures -eq 0 ] && echo "ok: one error line for a killed rank, a stopped rank, a bad label, a NaN loss and a launcher that disagrees with MPI"
exit $((failures > 0))
