#!/usr/bin/env bash
# Do the search planners find faster plans with a profile? (issue 7; on demand, not in CI: ~17 min.) Per model, on 2
# MPI ranks of this machine:
#  1. `cleave profile` measures the data, tofu, owt and random (seed 1) plans (--repeats 2): P1;
#  2. plans: data; tofu; flexflow and frontier planned on models/topologies/cpu-local.json without a profile (roofline
#     and α-β), with P1 (`ff+P1`, `frontier+P1`), and flexflow again with P2, a profile that also measured the `ff+P1`
#     plan (`ff+P2`: the shares P1 only calibrated are measured now, as FlexFlow measures each config it simulates);
#  3. every plan is compiled and run $ROUNDS times round-robin (--steps $STEPS, CLEAVE_PROFILE set: rank 0's median
#     step after the warm-up step); measured = the median over the rounds, `spread%` their max / min - 1;
#  4. predicted = `cleave simulate --profile P2` of the plan (the simulator flexflow searches with).
# Prints one table per model: plan, predicted, measured, spread, measured / data's.
# Usage: tests/bench/planners_profile.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Environment: STEPS (default 200), ROUNDS (default 3), ITERATIONS (flexflow's, default 2000), MODELS (default
# "mlp:64 cnn:16 transformer-tiny:8"), RUNTIME_DIR (default the runtime next to CLEAVE_BINARY's build).
set -u
source "$(dirname "$0")/rank_bench_setup.sh"
steps=${STEPS:-200}
rounds=${ROUNDS:-3}
iterations=${ITERATIONS:-2000}
models=${MODELS:-"mlp:64 cnn:16 transformer-tiny:8"}
ranks=2

# Synthetic inputs for a bundle, as `cleave profile` makes them: normal floats, zero labels and indices.
bundle_data() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
import numpy as np
b = sys.argv[1]
m = json.load(open(b + "/manifest.json"))
items = []
for i, (name, info) in enumerate(sorted(m["inputs"].items())):
    shape = info["shape"]
    a = np.zeros(shape, np.int64) if info["dtype"] == "i64" else np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    path = "%s/in_%d.npy" % (b, i)
    np.save(path, a)
    items.append("%s=%s" % (name, path))
print(",".join(items))
PY
}

for mb in $models; do
  IFS=: read -r model batch <<<"$mb"
  onnx=$(model_file "$model") || { echo "skip $model: cannot generate it" >&2; continue; }
  dir=$work/$model-$batch
  mkdir -p "$dir"
  common=("$onnx" --batch "$batch")
  plan() { "$cleave" plan "${common[@]}" --devices $ranks --topology "$topology" "$@" 2>>"$dir/log"; }
  echo "== $model (batch $batch, $ranks ranks)"
  for p in data tofu owt; do plan --planner $p -o "$dir/$p.plan"; done
  plan --planner random --seed 1 -o "$dir/random.plan"
  prof() {
    local out=$1
    shift
    "$cleave" profile "${common[@]}" --devices $ranks "$@" -o "$out" --steps 30 --repeats 2 --max-bytes 1048576 \
      --reps 3 --work-dir "$dir/profile_work_$(basename "$out" .json)" "${rtflag[@]}" 2>>"$dir/log"
  }
  prof "$dir/P1.json" --plan "$dir/data.plan" --plan "$dir/tofu.plan" --plan "$dir/owt.plan" --plan "$dir/random.plan" ||
    { echo "skip $model: profiling failed (see $dir/log)" >&2; continue; }
  plan --planner flexflow --iterations "$iterations" -o "$dir/ff.plan"
  plan --planner frontier -o "$dir/frontier.plan"
  plan --planner flexflow --iterations "$iterations" --profile "$dir/P1.json" -o "$dir/ff+P1.plan"
  plan --planner frontier --profile "$dir/P1.json" -o "$dir/frontier+P1.plan"
  prof "$dir/P2.json" --plan "$dir/data.plan" --plan "$dir/tofu.plan" --plan "$dir/owt.plan" --plan "$dir/random.plan" \
    --plan "$dir/ff+P1.plan" || { echo "skip $model: profiling failed (see $dir/log)" >&2; continue; }
  plan --planner flexflow --iterations "$iterations" --profile "$dir/P2.json" -o "$dir/ff+P2.plan"

  names=(data tofu ff frontier ff+P1 frontier+P1 ff+P2)
  declare -A runs=()
  for n in "${names[@]}"; do
    "$cleave" compile "${common[@]}" --plan "$dir/$n.plan" -o "$dir/b_$n" 2>>"$dir/log" || continue
    bundle_data "$dir/b_$n" >"$dir/b_$n/data.arg" || rm -f "$dir/b_$n/data.arg"
  done
  for ((k = 0; k < rounds; k++)); do
    for n in "${names[@]}"; do
      [ -f "$dir/b_$n/data.arg" ] || continue
      CLEAVE_PROFILE=$dir/b_$n/measure_$k "$cleave" run "$dir/b_$n" --data "$(cat "$dir/b_$n/data.arg")" \
        --steps "$steps" "${rtflag[@]}" >/dev/null 2>>"$dir/log" || continue
      runs[$n]+="$(/usr/bin/python3 -c 'import json, statistics, sys
print(statistics.median(json.load(open(sys.argv[1]))["steps"][1:]))' "$dir/b_$n/measure_$k.rank_0.json") "
    done
  done
  printf '%-12s %12s %12s %8s %9s\n' plan predicted_s measured_s spread% vs_data
  data_med=""
  for n in "${names[@]}"; do
    [ -n "${runs[$n]:-}" ] || { printf '%-12s %12s\n' "$n" "failed"; continue; }
    pred=$("$cleave" simulate "${common[@]}" --plan "$dir/$n.plan" --topology "$topology" --profile "$dir/P2.json" \
      2>/dev/null | awk '$1 == "simulated_step_seconds" {print $2}')
    read -r med spread <<<"$(/usr/bin/python3 -c 'import statistics, sys
v = [float(x) for x in sys.argv[1:]]
print("%.4e %.1f" % (statistics.median(v), (max(v) / min(v) - 1) * 100))' ${runs[$n]})"
    [ "$n" = data ] && data_med=$med
    ratio=-
    [ -n "$data_med" ] && ratio=$(/usr/bin/python3 -c "print('%.3f' % ($med / $data_med))")
    printf '%-12s %12s %12s %8s %9s\n' "$n" "${pred:--}" "$med" "$spread" "$ratio"
  done
  unset runs
done
