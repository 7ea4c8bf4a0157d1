#!/usr/bin/env bash
# Accuracy of the cost model (issue 7, item 6; on demand, not in CI: ~10-15 min). On real MPI ranks on this machine,
# for distinct plans of several models (planners single, data, owt, tofu and random seeds at 1, 2 and 4 ranks,
# --oversubscribe), the measured step time next to each predictor's: mean absolute % error and Spearman rank
# correlation per predictor, over the plans whose ranks have a core each and over all, and a table of every plan.
#
# Protocol (this machine's speed drifts by tens of percent over seconds, so every figure is a median over rounds spread
# in time, and each round profiles a group of plans and then measures them, seconds apart):
#  1. per model and rank count, `cleave plan -o` writes each plan; then $REPEATS rounds of
#     a. `cleave profile --plan ...` (one call per group and round, the bundles built once in the group's work dir)
#        runs each plan once, keeps the expected (mean) kernel, copy and data-read times, and times the collectives on
#        2..N ranks: profile_<round>.json;
#     b. each plan runs once more (`cleave run`, --steps $STEPS, CLEAVE_PROFILE set): rank 0's median step after the
#        warm-up step;
#  2. measured: the median over the rounds of 1b; `spread%` is how far the rounds were apart (max / min - 1). The
#     profile's kernel times come from the profiling runs of the same plans (in sample, as FlexFlow profiles every op
#     config it later simulates), the step times from the runs after them;
#  3. predicted: the median over the rounds of each function named in $PREDICTORS given that round's profile
#     (predict_<name> MODEL BATCH PLAN PROFILE -> seconds on stdout).
#     repeat: the profiling runs' own step time of the plan (no model: the noise floor, how well this machine
#     reproduces a measurement); roofline: `cleave explain --topology models/topologies/cpu-local.json`; profile: the
#     same with --profile; profileavg: the same with every rank at the profile's mean speed (its rank_scale dropped);
#     simulate: `cleave simulate` (the task-graph simulator, roofline); simprofile: the same with --profile. A new
#     predictor is one more function and one more word in PREDICTORS;
#  4. where the time goes: per plan, WORK/<group>/<plan>.breakdown.txt (tests/bench/step_breakdown.py) lists each
#     rank's step in the first round's measured run by kind of statement (kernel, comm, copy, data, untimed) next to
#     explain --profile's with that round's profile.
# Usage: tests/bench/accuracy.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Environment: STEPS (default 40), REPEATS (default 3), PREDICTORS (default "repeat roofline profile profileavg
# simulate simprofile"), CASES (default below: model:batch:ranks:planner[/seed] ...), RUNTIME_DIR (a prebuilt runtime;
# default the one next to CLEAVE_BINARY's build).
set -u
source "$(dirname "$0")/rank_bench_setup.sh"
steps=${STEPS:-40}
repeats=${REPEATS:-3}
predictors=${PREDICTORS:-"repeat roofline profile profileavg simulate simprofile"}

# model:batch:ranks:planner[/seed]. Models: mlp and cnn (models/), the zoo's tiny ResNet and Transformer.
cases=${CASES:-"mlp:64:1:single mlp:64:2:data mlp:64:2:owt mlp:64:2:tofu mlp:64:2:random/1 mlp:64:4:data mlp:64:4:random/2
cnn:16:1:single cnn:16:2:data cnn:16:2:owt cnn:16:2:random/3 cnn:16:4:data
resnet-tiny:8:1:single resnet-tiny:8:2:data resnet-tiny:8:2:tofu resnet-tiny:8:2:random/5
transformer-tiny:8:1:single transformer-tiny:8:2:data transformer-tiny:8:2:tofu transformer-tiny:8:2:random/4"}

# The predictors: MODEL BATCH PLAN PROFILE -> predicted step seconds.
explain_step() {
  "$cleave" explain "$1" --batch "$2" --plan "$3" --topology "$topology" --format json "${@:5}" |
    /usr/bin/python3 -c 'import json, sys; print(float(json.load(sys.stdin)["predicted_step_seconds"]))'
}
predict_roofline() { explain_step "$1" "$2" "$3" "$4"; }
predict_profile() { explain_step "$1" "$2" "$3" "$4" --profile "$4"; }
# The task-graph simulator (cleave simulate): overlap and cross-device waits; roofline, or measured with --profile.
predict_simulate() {
  "$cleave" simulate "$1" --batch "$2" --plan "$3" --topology "$topology" "${@:5}" |
    awk '$1 == "simulated_step_seconds" {print $2}'
}
predict_simprofile() { predict_simulate "$1" "$2" "$3" "$4" --profile "$4"; }
# The profile with every rank at the mean speed (its rank_scale dropped): what the per-rank speeds add.
predict_profileavg() {
  local avg=${4%.json}.avg.json
  /usr/bin/python3 -c 'import json, sys
p = json.load(open(sys.argv[1])); p.pop("rank_scale", None); json.dump(p, open(sys.argv[2], "w"), indent=1, sort_keys=True)' \
    "$4" "$avg"
  explain_step "$1" "$2" "$3" "$4" --profile "$avg"
}
# The noise floor: the same plan's step as its profiling runs measured it (profile.json "plans", by plan file name).
predict_repeat() {
  /usr/bin/python3 -c 'import json, sys
print([p["step_seconds"] for p in json.load(open(sys.argv[1]))["plans"] if p["name"] == sys.argv[2]][0])' "$4" "$PLAN_NAME"
}

# Plans, grouped by (model, batch, ranks): one profile per group.
declare -A group_plans
results=$work/results.tsv
: >"$results"
for c in $cases; do
  IFS=: read -r model batch ranks planner <<<"$c"
  seed=${planner#*/}
  [ "$seed" = "$planner" ] && seed=""
  name=${planner%/*}${seed:+-s$seed}
  dir=$work/$model-$batch-$ranks
  mkdir -p "$dir"
  onnx=$(model_file "$model") || { echo "skip $c: cannot generate the model" >&2; continue; }
  "$cleave" plan "$onnx" --batch "$batch" --devices "$ranks" --planner "${planner%/*}" ${seed:+--seed "$seed"} \
    -o "$dir/$name.plan" 2>>"$work/log" || { echo "skip $c: cleave plan failed" >&2; continue; }
  group_plans[$model:$batch:$ranks]+="$name "
done

for key in $(printf '%s\n' "${!group_plans[@]}" | sort); do
  IFS=: read -r model batch ranks <<<"$key"
  dir=$work/$model-$batch-$ranks
  onnx=$(model_file "$model")
  flags=()
  for name in ${group_plans[$key]}; do flags+=(--plan "$dir/$name.plan"); done
  echo "profiling $key: ${group_plans[$key]}" >&2
  # $REPEATS rounds, each a profile (one run of every plan of the group, and the collectives) then one measured run of
  # every plan, round-robin (this machine's speed drifts by tens of percent over seconds: other tenants; a round's
  # profile and measurement are seconds apart). Measured: each run's rank-0 median step after the warm-up step; the
  # plan's figure is the median over its rounds, its spread (max / min - 1) how much they disagreed. A predictor's
  # figure is the median over the rounds of its prediction from that round's profile.
  names=(${group_plans[$key]})
  declare -A measured_runs=()
  data=()
  profiled=0
  for ((k = 0; k < repeats; k++)); do
    if ! "$cleave" profile "$onnx" --backend cpu --devices "$ranks" --batch "$batch" "${flags[@]}" \
        -o "$dir/profile_$k.json" --work-dir "$dir/work" --steps "$steps" --max-bytes 1048576 --reps 3 \
        "${rtflag[@]}" 2>>"$work/log"; then
      echo "skip $key round $k: cleave profile failed (see $work/log)" >&2
      continue
    fi
    if [ "$profiled" = 0 ]; then
      for i in "${!names[@]}"; do
        bundle=$dir/work/plan_$i
        data[$i]=$(/usr/bin/python3 -c "
import json
m = json.load(open('$bundle/manifest.json'))
print(','.join('%s=$bundle/input_%d.npy' % (n, k + 1) for k, n in enumerate(m['inputs'])))")
        rm -f "$bundle"/measure_*.rank_*.json
      done
    fi
    profiled=$((profiled + 1))
    for i in "${!names[@]}"; do
      bundle=$dir/work/plan_$i
      CLEAVE_PROFILE=$bundle/measure_$k "$cleave" run "$bundle" --data "${data[$i]}" --steps "$steps" "${rtflag[@]}" \
        >/dev/null 2>>"$work/log" || echo "skip $key ${names[$i]} run $k: the measured run failed" >&2
    done
  done
  [ "$profiled" -gt 0 ] || continue
  for i in "${!names[@]}"; do
    for ((k = 0; k < repeats; k++)); do
      f=$dir/work/plan_$i/measure_$k.rank_0.json
      [ -f "$f" ] && measured_runs[${names[$i]}]+="$(/usr/bin/python3 -c "
import json, statistics
print(statistics.median(json.load(open('$f'))['steps'][1:]))") "
    done
  done
  for i in "${!names[@]}"; do
    name=${names[$i]}
    bundle=$dir/work/plan_$i
    [ -n "${measured_runs[$name]:-}" ] || continue
    read -r measured spread < <(/usr/bin/python3 -c "
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
print(statistics.median(v), max(v) / min(v) - 1)" ${measured_runs[$name]})
    # The breakdown: the first profiled round's prediction next to that round's measured run.
    for ((k = 0; k < repeats; k++)); do
      [ -f "$dir/profile_$k.json" ] && [ -f "$bundle/measure_$k.rank_0.json" ] || continue
      "$cleave" explain "$onnx" --batch "$batch" --plan "$dir/$name.plan" --topology "$topology" --format json \
        --profile "$dir/profile_$k.json" >"$dir/$name.explain.json" 2>>"$work/log" &&
        /usr/bin/python3 "$src/tests/bench/step_breakdown.py" "$bundle/measure_$k" "$dir/$name.explain.json" \
          >"$dir/$name.breakdown.txt" 2>>"$work/log"
      break
    done
    row="$model	$batch	$ranks	$name	$measured	$spread"
    for p in $predictors; do
      rounds=()
      for ((k = 0; k < repeats; k++)); do
        [ -f "$dir/profile_$k.json" ] || continue
        rounds+=("$(PLAN_NAME=$name.plan predict_$p "$onnx" "$batch" "$dir/$name.plan" "$dir/profile_$k.json" \
          2>>"$work/log" || echo nan)")
      done
      row+="	$(/usr/bin/python3 -c "
import math, statistics, sys
v = [float(x) for x in sys.argv[1:]]
print('nan' if not v or any(math.isnan(x) for x in v) else statistics.median(v))" "${rounds[@]}")"
    done
    echo "$row" >>"$results"
  done
done

/usr/bin/python3 - "$results" "$(nproc)" $predictors <<'PY'
import math, sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
cores = int(sys.argv[2])
preds = sys.argv[3:]
print('%-18s %5s %5s %-12s %12s %8s' % ('model', 'batch', 'ranks', 'plan', 'measured_s', 'spread%') +
      ''.join(' %12s %8s' % (p + '_s', 'err%') for p in preds))
for r in rows:
    m = float(r[4])
    line = '%-18s %5s %5s %-12s %12.4e %8.1f' % (r[0], r[1], r[2], r[3], m, 100 * float(r[5]))
    for k in range(len(preds)):
        v = float(r[6 + k])
        line += ' %12.4e %8.1f' % (v, 100 * (v - m) / m)
    print(line)

def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    rk = [0.0] * len(xs)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            rk[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return rk

def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va and vb else float('nan')

def summary(title, rows):
    meas = [float(r[4]) for r in rows]
    models = sorted({r[0] for r in rows})
    print('\n%s: %d plans of %d models (%s); median spread of the measured runs %.1f %%' %
          (title, len(rows), len(models), ', '.join(models),
           100 * sorted(float(r[5]) for r in rows)[len(rows) // 2] if rows else float('nan')))
    for k, p in enumerate(preds):
        pv = [float(r[6 + k]) for r in rows]
        ok = [(m, v) for m, v in zip(meas, pv) if not math.isnan(v)]
        mape = 100 * sum(abs(v - m) / m for m, v in ok) / len(ok) if ok else float('nan')
        rho = spearman([m for m, _ in ok], [v for _, v in ok]) if len(ok) > 1 else float('nan')
        print('%-10s mean abs error %7.1f %%   Spearman %6.3f   (%d plans)' % (p, mape, rho, len(ok)))

# A rank is a device only while there is a core for it: past the cores, ranks time-share them (the topology's devices
# do not exist) and their kernels and waits depend on the scheduler, which no predictor here models.
summary('ranks <= %d cores' % cores, [r for r in rows if int(r[2]) <= cores])
summary('all', rows)
PY
