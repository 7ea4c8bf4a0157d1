#!/usr/bin/env bash
# Benchmark (on demand, not in CI): the flexflow planner on FlexFlow's NMT (models/zoo nmt full, --weights none:
# shapes only) at 16 devices on p100-4x4 (4 nodes x 4 P100), against tofu and data parallelism. Per planner: the
# search's wall and CPU seconds apart from loading (`cleave plan -o` on stderr), then `cleave simulate` of its plan:
# the simulated step (planner/cost/simulator.h) and cost model v1's (compute + communication summed per device).
# Targets (issue 7): flexflow searches in <= 30 s to a plan no slower than tofu's under the simulator; status says
# whether each holds. flexflow keeps the best plan of its chains, one of which starts from tofu's plan, so "no slower
# than tofu" holds by construction; the last line says what each chain (data, tofu, random start) found on its own.
# Usage: tests/bench/flexflow_nmt.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Knobs: BATCH (default 64), DEVICES (16), TOPOLOGY (p100-4x4), ITERATIONS (flexflow --iterations, default 1000),
# SEED (0).
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
batch=${BATCH:-64}
devices=${DEVICES:-16}
topology=${TOPOLOGY:-p100-4x4}
iterations=${ITERATIONS:-1000}
seed=${SEED:-0}
onnx="$work/nmt-full-b$batch.onnx"
if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family nmt --variant full --batch "$batch" --weights none \
    -o "$onnx" 2>"$work/gen.log"; then
  echo "generator failed: $(grep -m1 -i error "$work/gen.log")"
  exit 1
fi
row() { printf '%-10s %8s %8s %16s %16s  %s\n' "$@"; }
echo "# nmt full, batch $batch, $devices devices on $topology; flexflow --iterations $iterations --seed $seed"
row planner plan_s cpu_s simulated_s v1_sum_s status
declare -A sim
for planner in data tofu flexflow; do
  log="$work/$planner.log"
  args=(--planner "$planner" --devices "$devices" --topology "$topology")
  [ "$planner" = flexflow ] && args+=(--iterations "$iterations" --seed "$seed")
  if ! "$cleave" plan "$onnx" "${args[@]}" -o "$work/$planner.plan" 2>"$log"; then
    row "$planner" - - - - "$(grep -m1 '^error' "$log" | cut -c1-150)"
    continue
  fi
  read -r plan_s cpu_s < <(sed -n 's/.*plan \([0-9.]*\) s, plan cpu \([0-9.]*\) s.*/\1 \2/p' "$log")
  "$cleave" simulate "$onnx" --plan "$work/$planner.plan" --topology "$topology" >"$work/$planner.sim" 2>>"$log"
  s=$(awk '$1 == "simulated_step_seconds" {print $2}' "$work/$planner.sim")
  v1=$(awk '$1 == "cost_model_v1_step_seconds" {print $2}' "$work/$planner.sim")
  sim[$planner]=$s
  status=ok
  if [ "$planner" = flexflow ]; then
    status=$(python3 -c "
t, f, secs = float('${sim[tofu]:-inf}'), float('$s'), float('$plan_s')
print(('ok' if f <= t else 'SLOWER THAN TOFU') + ' (%.3fx tofu), ' % (f / t) +
      ('search <= 30 s' if secs <= 30 else 'SEARCH OVER 30 s'))")
    status="$status; $(grep -m1 '^flexflow:' "$log" | cut -d';' -f1)"
  fi
  row "$planner" "$plan_s" "$cpu_s" "$s" "$v1" "$status"
done
# What each flexflow chain found on its own (the result is the best of them).
grep -m1 '^flexflow:' "$work/flexflow.log" | sed 's/.*chains/# flexflow chains/'
