#!/usr/bin/env bash
# The CPU backend against torch 1.13 (on demand, not in CI: ~15 min on 2 cores). Per model, the median SGD step
# (forward, loss, backward, update) of a 1-rank bundle, with the runtime of this tree ("after") and with the runtime
# of $BASELINE ("before": the same bundle, its runtime/ replaced by that revision's), next to torch 1.13 on the same
# ONNX model, batch and optimizer (SGD, lr 0.01), everyone at $THREADS thread(s). Then ResNet-18's throughput on 1 rank
# (all of the machine's cores: one rank alone owns them) and 2 data-parallel ranks (a core each), same global batch.
#
# Models (tests/bench/cpu_vs_torch.py exports them in training mode with a cross-entropy loss, and times torch):
# mlp 784-2048-2048-10 batch 128; torchvision resnet18 at 32x32 batch 32; nn.TransformerEncoder d=256, 4 heads,
# 4 layers, seq 64, batch 16.
# Protocol: this machine's speed drifts by tens of percent over seconds (other tenants), so every configuration runs
# once per round, side by side, over $ROUNDS rounds; each cell is the median over the rounds of a run's median step
# after its first (warm-up) step (the runtime's CLEAVE_PROFILE, rank 0; time.perf_counter around torch's step), and
# `spread` is max/min - 1 over the rounds of the "after" runs.
# Usage: tests/bench/cpu_vs_torch.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Environment: MODELS (default "mlp resnet18 transformer"), STEPS (default 8), ROUNDS (default 3), THREADS (default 1),
# BASELINE (a git revision of SOURCE_DIR, default main; empty: no "before" column), DP (default 1: the ResNet-18
# ranks table; 0: skip it).
set -u
cleave=$(readlink -f "$1")
src=$(readlink -f "$2")
work=${3:-$(mktemp -d)}
mkdir -p "$work"
work=$(readlink -f "$work")
models=${MODELS:-"mlp resnet18 transformer"}
steps=${STEPS:-8}
rounds=${ROUNDS:-3}
threads=${THREADS:-1}
baseline=${BASELINE-main}
dp=${DP:-1}
helper=$src/tests/bench/cpu_vs_torch.py
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$work/log
: >"$log"

if [ -n "$baseline" ]; then
  rm -rf "$work/baseline" && mkdir -p "$work/baseline"
  git -C "$src" archive "$baseline" runtime | tar -x -C "$work/baseline" ||
    { echo "error: cannot read runtime/ of $baseline in $src" >&2; exit 1; }
fi

# The bundles: <model>.after (this tree's runtime), <model>.before (the baseline's), resnet18.dp2 (2 ranks, data).
declare -A batch
for m in $models; do
  if [ ! -f "$work/$m.onnx" ]; then
    /usr/bin/python3 "$helper" export "$m" "$work" >"$work/$m.batch" 2>>"$log" ||
      { echo "skip $m: export failed (see $log)" >&2; continue; }
  fi
  batch[$m]=$(cat "$work/$m.batch")
  "$cleave" compile "$work/$m.onnx" --devices 1 --batch "${batch[$m]}" --optimizer sgd --lr 0.01 \
    -o "$work/$m.after" 2>>"$log" ||
    { echo "skip $m: cleave compile failed (see $log)" >&2; unset "batch[$m]"; continue; }
  if [ -n "$baseline" ]; then
    rm -rf "$work/$m.before" && cp -r "$work/$m.after" "$work/$m.before"
    rm -rf "$work/$m.before/runtime" "$work/$m.before/build" && cp -r "$work/baseline/runtime" "$work/$m.before/runtime"
  fi
done
if [ "$dp" = 1 ] && [ -n "${batch[resnet18]:-}" ]; then
  "$cleave" compile "$work/resnet18.onnx" --devices 2 --planner data --batch "${batch[resnet18]}" --optimizer sgd \
    --lr 0.01 -o "$work/resnet18.dp2" 2>>"$log" || { echo "skip the 2-rank run: cleave compile failed" >&2; dp=0; }
fi

# One run of a bundle: its rank-0 median step (seconds) after the warm-up step, or "nan".
run_bundle() {  # BUNDLE MODEL ENV...
  local bundle=$1 m=$2
  rm -f "$bundle"/prof.rank_*.json
  env "${@:3}" CLEAVE_PROFILE="$bundle/prof" "$cleave" run "$bundle" --steps "$steps" \
    --data "x=$work/${m}_x.npy,y=$work/${m}_y.npy" >/dev/null 2>>"$log"
  /usr/bin/python3 -c 'import json, statistics, sys
try: print(statistics.median(json.load(open(sys.argv[1]))["steps"][1:]))
except Exception: print("nan")' "$bundle/prof.rank_0.json"
}

declare -A t
one_thread=(CLEAVE_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads")
for ((r = 0; r < rounds; r++)); do
  for m in "${!batch[@]}"; do
    echo "round $((r + 1))/$rounds: $m" >&2
    [ -n "$baseline" ] && t[$m.before]+="$(run_bundle "$work/$m.before" "$m" "${one_thread[@]}") "
    t[$m.after]+="$(run_bundle "$work/$m.after" "$m" "${one_thread[@]}") "
    t[$m.torch]+="$(OMP_NUM_THREADS=$threads /usr/bin/python3 "$helper" torch "$m" "$steps" 2>>"$log" || echo nan) "
  done
  if [ "$dp" = 1 ] && [ -n "${batch[resnet18]:-}" ]; then
    echo "round $((r + 1))/$rounds: resnet18 on 1 and 2 ranks" >&2
    t[dp.1]+="$(run_bundle "$work/resnet18.after" resnet18) "
    t[dp.2]+="$(run_bundle "$work/resnet18.dp2" resnet18) "
  fi
done

# median and spread of a list of seconds
stats() {
  /usr/bin/python3 -c 'import math, statistics, sys
v = [float(x) for x in sys.argv[1:] if not math.isnan(float(x))]
print("%.6f %.0f" % (statistics.median(v), 100 * (max(v) / min(v) - 1)) if v else "nan nan")' "$@"
}
ms() { awk -v s="$1" 'BEGIN { if (s == "nan") print "-"; else printf "%.1f", 1000 * s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan") print "-"; else printf "%.2f", a / b }'; }

echo "CPU step time, $threads thread(s), median of $rounds rounds of $steps steps" \
  "(ms; before: runtime of ${baseline:-none})"
echo
echo "| model | batch | before | after | torch 1.13 | after/torch | before/after | spread |"
echo "|---|---|---|---|---|---|---|---|"
for m in $models; do
  [ -n "${batch[$m]:-}" ] || continue
  read -r after spread <<<"$(stats ${t[$m.after]})"
  read -r torch _ <<<"$(stats ${t[$m.torch]})"
  before=nan
  [ -n "$baseline" ] && read -r before _ <<<"$(stats ${t[$m.before]})"
  echo "| $m | ${batch[$m]} | $(ms "$before") | $(ms "$after") | $(ms "$torch") | $(ratio "$after" "$torch") |" \
    "$(ratio "$before" "$after") | ${spread}% |"
done
if [ "$dp" = 1 ] && [ -n "${batch[resnet18]:-}" ]; then
  cores=$(nproc)
  echo
  echo "ResNet-18, global batch ${batch[resnet18]}, on $cores cores: 1 rank (all cores) against 2 data-parallel ranks"
  echo
  echo "| ranks | threads per rank | step (ms) | samples/s | spread |"
  echo "|---|---|---|---|---|"
  read -r s1 p1 <<<"$(stats ${t[dp.1]})"
  read -r s2 p2 <<<"$(stats ${t[dp.2]})"
  echo "| 1 | $cores | $(ms "$s1") |" \
    "$(awk -v s="$s1" -v b="${batch[resnet18]}" 'BEGIN { printf "%.0f", b / s }') | ${p1}% |"
  echo "| 2 | $(( cores / 2 > 0 ? cores / 2 : 1 )) | $(ms "$s2") |" \
    "$(awk -v s="$s2" -v b="${batch[resnet18]}" 'BEGIN { printf "%.0f", b / s }') | ${p2}% |"
fi
