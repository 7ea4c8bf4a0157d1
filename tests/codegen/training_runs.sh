#!/usr/bin/env bash
# Training runs that stop and go on (rt::TrainingRun, codegen/checkpoint.h), on the tiny MLP (batch 16, 6 steps):
#  - resume: 4 steps checkpointing every 2, then --resume to step 6, prints the uninterrupted run's steps 5-6 to
#    every digit, for data at 1 and 2 ranks, tofu at 2 and 4, and a random plan at 4;
#  - reshard: a 2-rank data checkpoint of step 4 resumed by 4-rank tofu, and a 4-rank tofu one by 2-rank data and by
#    1 rank, equal the uninterrupted run to 6 significant digits (another reduction order);
#  - --epochs 1 --shuffle 7 runs 1500/16 = 93 steps in the same per-epoch permutation at 1 rank, 2 ranks data and 4
#    ranks tofu (losses equal to 6 significant digits), unlike the unshuffled order;
#  - cleave eval with the same knobs (cosine with warm-up, clipping, accumulation, shuffling) equals a 2-rank run to
#    6 significant digits (the interpreter's arithmetic);
#  - kill -9 of a rank half-way through writing the step-4 checkpoint (CLEAVE_TEST_KILL_IN_CHECKPOINT): the step-2
#    checkpoint stays complete and --resume auto continues from it to the uninterrupted run's losses;
#  - SIGUSR1 (Slurm's warning) to one rank: every rank checkpoints after the step in progress and `cleave run` exits
#    75; --resume auto then finishes with the uninterrupted run's losses;
#  - launch/slurm.sbatch under a stand-in srun (mpirun) and scontrol: USR1 to a rank checkpoints, the script requeues
#    the job (scontrol requeue), and the requeued script resumes bit-identically;
#  - `cleave checkpoint export` writes the same initializers as `--save-model`; bad --resume gives one error line.
# Usage: training_runs.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
src=$2
work=$(mktemp -d)
# The stop tests start runs of 10^8 steps: whatever is left of them (a failed check) must not outlive the test.
trap 'pkill -KILL -f "$work/" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
export CLEAVE_CACHE_DIR=${CLEAVE_CACHE_DIR:-$work/cache}
d=$src/models/data
data="x=$d/digits_flat_train_x.npy,y=$d/digits_train_y.npy"
model=$src/models/mlp.onnx

compile() {  # NAME DEVICES PLANNER
  local seed=()
  [ "$3" = random ] && seed=(--seed 3)
  "$cleave" compile "$model" --batch 16 --devices "$2" --planner "$3" "${seed[@]}" -o "$work/$1" 2>"$work/$1.compile.err" ||
    { fail "$1: compile: $(tail -1 "$work/$1.compile.err")"; return 1; }
}
run() {  # NAME OUT ARGS...: cleave run, loss lines to OUT
  local name=$1 out=$2
  shift 2
  "$cleave" run "$work/$name" --data "$data" "$@" >"$out" 2>"$out.err"
}
losses() { grep '^step' "$1"; }
# rank_pid PROGRAM RANK: the pid of PROGRAM running as MPI rank RANK (every rank of a data plan runs one program,
# with one weights file: its environment tells the ranks apart).
rank_pid() {
  local q
  for q in $(pgrep -f "^$1 "); do
    tr '\0' '\n' < "/proc/$q/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$q"; return 0; }
  done
  return 1
}
same6() {  # A B: the loss lines agree to 6 significant digits
  diff <(awk '/^step/{printf "%s %.6g\n", $2, $4}' "$1") <(awk '/^step/{printf "%s %.6g\n", $2, $4}' "$2") >/dev/null
}

# Bit-identical resume.
for spec in data1:1:data data2:2:data tofu2:2:tofu tofu4:4:tofu random4:4:random; do
  IFS=: read -r name n planner <<<"$spec"
  compile "$name" "$n" "$planner" || continue
  run "$name" "$work/$name.full" --steps 6 || { fail "$name: run: $(tail -1 "$work/$name.full.err")"; continue; }
  run "$name" "$work/$name.a" --steps 4 --checkpoint-dir "$work/$name.ck" --checkpoint-every 2 ||
    { fail "$name: checkpointing run: $(tail -1 "$work/$name.a.err")"; continue; }
  run "$name" "$work/$name.b" --steps 6 --resume "$work/$name.ck" ||
    { fail "$name: resumed run: $(tail -1 "$work/$name.b.err")"; continue; }
  if [ "$(losses "$work/$name.b")" = "$(losses "$work/$name.full" | tail -2)" ] && [ "$(losses "$work/$name.b" | wc -l)" = 2 ]; then
    echo "ok: $name resumed at step 5 bit-identically: $(losses "$work/$name.b" | tr '\n' ' ')"
  else
    fail "$name: resumed losses differ: $(losses "$work/$name.b" | tr '\n' ' ') vs $(losses "$work/$name.full" | tail -2 | tr '\n' ' ')"
  fi
done

# Reshard.
reshard() {  # FROM TO
  run "$2" "$work/$1-$2" --steps 6 --resume "$work/$1.ck/step-00000004" ||
    { fail "reshard $1 -> $2: $(tail -1 "$work/$1-$2.err")"; return; }
  grep -q 'resharding the checkpoint of step 4' "$work/$1-$2.err" || fail "reshard $1 -> $2: no resharding line"
  if same6 "$work/$1-$2" <(losses "$work/data2.full" | tail -2); then
    echo "ok: reshard $1 -> $2: $(losses "$work/$1-$2" | tr '\n' ' ')"
  else
    fail "reshard $1 -> $2: $(losses "$work/$1-$2" | tr '\n' ' ') vs $(losses "$work/data2.full" | tail -2 | tr '\n' ' ')"
  fi
}
reshard data2 tofu4
reshard tofu4 data2
reshard tofu4 data1

# Epochs and shuffling: the same batches whatever the plan.
for name in data1 data2 tofu4; do
  run "$name" "$work/$name.shuffled" --epochs 1 --shuffle 7 || fail "$name: --epochs 1 --shuffle 7: $(tail -1 "$work/$name.shuffled.err")"
done
n=$(losses "$work/data1.shuffled" | wc -l)
[ "$n" = 93 ] || fail "--epochs 1: $n steps, expected 93"
same6 "$work/data1.shuffled" "$work/data2.shuffled" || fail "--shuffle: 1 rank and 2 ranks read different batches"
same6 "$work/data1.shuffled" "$work/tofu4.shuffled" || fail "--shuffle: 1 rank and 4 ranks tofu read different batches"
run data1 "$work/data1.ordered" --epochs 1
same6 "$work/data1.shuffled" "$work/data1.ordered" && fail "--shuffle 7 trained on the unshuffled order"
[ $failures -eq 0 ] && echo "ok: --epochs 1 --shuffle 7: 93 steps, the same at 1 rank, 2 ranks data and 4 ranks tofu"

# The interpreter trains with the same knobs.
knobs=(--steps 8 --lr-schedule cosine --warmup-steps 2 --clip-grad-norm 0.5 --accumulate 2 --shuffle 5)
run data2 "$work/knobs.run" "${knobs[@]}" || fail "knobs: run: $(tail -1 "$work/knobs.run.err")"
"$cleave" eval "$model" --batch 16 --data "$data" "${knobs[@]}" >"$work/knobs.eval" 2>"$work/knobs.eval.err" ||
  fail "knobs: eval: $(tail -1 "$work/knobs.eval.err")"
if [ "$(losses "$work/knobs.run" | wc -l)" = 8 ] && same6 "$work/knobs.run" "$work/knobs.eval"; then
  echo "ok: cleave eval with schedule, clipping, accumulation and shuffling equals the 2-rank run: $(losses "$work/knobs.eval" | tail -1)"
else
  fail "knobs: run $(losses "$work/knobs.run" | tail -1) vs eval $(losses "$work/knobs.eval" | tail -1)"
fi

# kill -9 while writing a checkpoint.
CLEAVE_TEST_KILL_IN_CHECKPOINT=4:1 run data2 "$work/kill" --steps 6 --checkpoint-dir "$work/kill.ck" --checkpoint-every 2 &&
  fail "kill -9 during the checkpoint: the run succeeded"
[ -e "$work/kill.ck/step-00000002/manifest.json" ] || fail "kill -9: the step-2 checkpoint is not complete"
[ -e "$work/kill.ck/step-00000004/manifest.json" ] && fail "kill -9: the half-written step-4 checkpoint has a manifest"
run data2 "$work/kill.b" --steps 6 --checkpoint-dir "$work/kill.ck" --checkpoint-every 2 --resume auto ||
  fail "kill -9: resume: $(tail -1 "$work/kill.b.err")"
if [ "$(losses "$work/kill.b")" = "$(losses "$work/data2.full" | tail -4)" ]; then
  echo "ok: killed in the step-4 checkpoint, resumed from step 2: $(losses "$work/kill.b" | tr '\n' ' ')"
else
  fail "kill -9: resumed losses $(losses "$work/kill.b" | tr '\n' ' ')"
fi

# A stop signal: checkpoint, exit 75, resume.
run data2 "$work/sig" --steps 100000000 --checkpoint-dir "$work/sig.ck" --checkpoint-every 100000000 &
pid=$!
for _ in $(seq 600); do  # up to 2 minutes: a loaded machine starts mpirun slowly
  rank=$(rank_pid "$work/data2/build/ranks" 1)
  [ -n "$rank" ] && grep -q '^step 3 ' "$work/sig" 2>/dev/null && break
  sleep 0.2
done
if [ -n "$rank" ]; then
  kill -USR1 "$rank"
  wait "$pid"
  rc=$?
  [ "$rc" = 75 ] || fail "SIGUSR1: cleave run exited $rc, expected 75 ($(tail -1 "$work/sig.err"))"
  stopped=$(ls "$work/sig.ck" | grep step- | tail -1)
  step=$((10#${stopped#step-} + 0))
  if [ -e "$work/sig.ck/$stopped/manifest.json" ] && [ "$step" -ge 1 ]; then
    run data2 "$work/sig.b" --steps $((step + 2)) --checkpoint-dir "$work/sig.ck" --resume auto ||
      fail "SIGUSR1: resume: $(tail -1 "$work/sig.b.err")"
    run data2 "$work/sig.full" --steps $((step + 2))
    if [ "$(losses "$work/sig.b")" = "$(losses "$work/sig.full" | tail -2)" ]; then
      echo "ok: SIGUSR1 to rank 1 stopped the run after step $step with a checkpoint (exit 75); resumed bit-identically"
    else
      fail "SIGUSR1: resumed $(losses "$work/sig.b" | tr '\n' ' ') vs $(losses "$work/sig.full" | tail -2 | tr '\n' ' ')"
    fi
  else
    fail "SIGUSR1: no complete checkpoint ($stopped)"
  fi
else
  kill "$pid"
  fail "SIGUSR1: the run did not start"
fi

# Slurm: the batch script requeues a job stopped by USR1, and the requeued job resumes.
fake=$work/fake-slurm
mkdir -p "$fake"
cat >"$fake/srun" <<'SH'
#!/bin/sh
exec mpirun --allow-run-as-root --oversubscribe -np "$SLURM_NTASKS" sh -c 'SLURM_PROCID=$OMPI_COMM_WORLD_RANK; export SLURM_PROCID; exec "$@"' sh "$@"
SH
printf '#!/bin/sh\necho "$@" >>"%s/scontrol.log"\n' "$work" >"$fake/scontrol"
chmod +x "$fake/srun" "$fake/scontrol"
sbatch_run() {  # OUT STEPS: the bundle's batch script as Slurm would start it
  (cd "$work" && SLURM_SUBMIT_DIR=$work/data2 SLURM_JOB_ID=42 SLURM_NTASKS=2 PATH=$fake:$PATH \
    sh "$work/data2/launch/slurm.sbatch" "$work/data2/build" --steps "$2" --checkpoint-dir "$work/slurm.ck" \
    --checkpoint-every 100000000 "x=$d/digits_flat_train_x.npy" "y=$d/digits_train_y.npy" >"$1" 2>"$1.err")
}
sbatch_run "$work/slurm1" 100000000 &
pid=$!
rank=
for _ in $(seq 600); do  # up to 2 minutes: a loaded machine starts mpirun slowly
  rank=$(rank_pid "$work/data2/build/ranks" 1)
  [ -n "$rank" ] && grep -q '^step 3 ' "$work/slurm1" 2>/dev/null && break
  sleep 0.2
done
if [ -n "$rank" ]; then
  kill -USR1 "$rank"
  wait "$pid" || fail "slurm: the batch script exited $? after the stop"
  grep -qx 'requeue 42' "$work/scontrol.log" 2>/dev/null || fail "slurm: the job was not requeued"
  stopped=$(ls "$work/slurm.ck" | grep step- | tail -1)
  step=$((10#${stopped#step-} + 0))
  sbatch_run "$work/slurm2" $((step + 2)) || fail "slurm: the requeued job failed: $(tail -1 "$work/slurm2.err")"
  run data2 "$work/slurm.full" --steps $((step + 2))
  if [ "$(losses "$work/slurm2")" = "$(losses "$work/slurm.full" | tail -2)" ]; then
    echo "ok: slurm.sbatch: USR1 after step $step, requeued, resumed bit-identically"
  else
    fail "slurm: resumed $(losses "$work/slurm2" | tr '\n' ' ') vs $(losses "$work/slurm.full" | tail -2 | tr '\n' ' ')"
  fi
else
  kill "$pid"
  fail "slurm: the batch script did not start the ranks: $(tail -2 "$work/slurm1.err")"
fi

# Export equals --save-model.
run data2 "$work/save" --steps 6 --save-model "$work/saved.onnx" --checkpoint-dir "$work/save.ck" || fail "save: run"
"$cleave" checkpoint export "$work/save.ck" -o "$work/exported.onnx" 2>"$work/export.err" ||
  fail "export: $(cat "$work/export.err")"
/usr/bin/python3 - "$work/saved.onnx" "$work/exported.onnx" <<'PY' || fail "export differs from --save-model"
import sys, onnx
from onnx import numpy_helper
a, b = ({i.name: numpy_helper.to_array(i).tobytes() for i in onnx.load(p).graph.initializer} for p in sys.argv[1:])
sys.exit(0 if a == b else 1)
PY
[ $failures -eq 0 ] && echo "ok: checkpoint export equals --save-model"

# Bad --resume: one error line, exit 1.
bad() {  # WHAT EXPECTED ARGS...
  local what=$1 want=$2
  shift 2
  "$cleave" run "$work/data2" --data "$data" --steps 6 "$@" >/dev/null 2>"$work/bad.err"
  rc=$?
  n=$(grep -c '^error:' "$work/bad.err")
  if [ "$rc" = 1 ] && [ "$n" = 1 ] && grep -q "$want" "$work/bad.err"; then echo "ok: $what: $(grep '^error:' "$work/bad.err")"
  else fail "$what: rc $rc, $n error lines: $(tail -2 "$work/bad.err")"; fi
}
bad "resume from a directory without checkpoints" "no complete checkpoint there" --resume "$work"
mkdir -p "$work/badck/step-00000001" && echo '{"format": "nope"}' >"$work/badck/step-00000001/manifest.json"
bad "resume from a malformed manifest" "not a cleave checkpoint manifest" --resume "$work/badck"
"$cleave" compile "$src/models/cnn.onnx" --batch 16 --devices 2 -o "$work/cnn" 2>/dev/null
"$cleave" run "$work/cnn" --data "x=$d/digits_train_x.npy,y=$d/digits_train_y.npy" --steps 6 --resume "$work/data2.ck" \
  >/dev/null 2>"$work/bad.err"
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c '^error:' "$work/bad.err")" = 1 ] && grep -q 'in the checkpoint, this bundle needs' "$work/bad.err"; then
  echo "ok: another model's checkpoint: $(grep '^error:' "$work/bad.err")"
else
  fail "another model's checkpoint: rc $rc: $(tail -2 "$work/bad.err")"
fi

exit $((failures > 0))
