#!/usr/bin/env bash
# The CPU backend against torch 1.13 (on demand, not in CI: ~15 min on 2 cores). Per model, the median SGD step
# (forward, loss, backward, update) of a 1-rank bundle, with the runtime of this tree ("after") and with the runtime
# of $BASELINE ("before": the same bundle, its runtime/ replaced by that revision's), next to torch 1.13 on the same
# ONNX model, batch and optimizer (SGD, lr 0.01), everyone at $THREADS thread(s). Then, for ResNet-18 and the
# Transformer, scaling at the same global batch: 1 rank on 1 core, 1 rank on all of the machine's cores (one rank
# alone owns them), 2 data-parallel ranks (`--planner data`, each owning half the cores), 2 ranks under Tofu's plan
# (`--planner tofu`), and torch on all the cores: one process's threads, and DistributedDataParallel over 2 processes
# of 1 thread (gloo; "best 2 ranks/torch" compares with the faster of the two).
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
# BASELINE (a git revision of SOURCE_DIR, default main; empty: no "before" column), DP (default 1: the scaling
# table; 0: skip it), DP_MODELS (default "resnet18 transformer").
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
dp_models=${DP_MODELS:-"resnet18 transformer"}
cores=$(nproc)
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
# The 2-rank bundles of the scaling table: <model>.dp2 (data), <model>.tofu2 (tofu).
scaled=()
if [ "$dp" = 1 ]; then
  for m in $dp_models; do
    [ -n "${batch[$m]:-}" ] || continue
    "$cleave" compile "$work/$m.onnx" --devices 2 --planner data --batch "${batch[$m]}" --optimizer sgd \
      --lr 0.01 -o "$work/$m.dp2" 2>>"$log" &&
      "$cleave" compile "$work/$m.onnx" --devices 2 --planner tofu --batch "${batch[$m]}" --optimizer sgd \
        --lr 0.01 -o "$work/$m.tofu2" 2>>"$log" && scaled+=("$m") ||
      echo "skip the 2-rank runs of $m: cleave compile failed (see $log)" >&2
  done
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
  for m in "${scaled[@]}"; do
    echo "round $((r + 1))/$rounds: $m on 1 and 2 ranks" >&2
    t[$m.dp1]+="$(run_bundle "$work/$m.after" "$m" "${one_thread[@]}") "
    t[$m.dpall]+="$(run_bundle "$work/$m.after" "$m") "
    t[$m.dp2]+="$(run_bundle "$work/$m.dp2" "$m") "
    t[$m.tofu2]+="$(run_bundle "$work/$m.tofu2" "$m") "
    t[$m.torchall]+="$(/usr/bin/python3 "$helper" torch "$m" "$steps" "$cores" 2>>"$log" || echo nan) "
    t[$m.ddp]+="$(OMP_NUM_THREADS=1 /usr/bin/python3 "$helper" ddp "$m" "$steps" 2 2>>"$log" || echo nan) "
  done
done

# median and spread of a list of seconds
stats() {
  /usr/bin/python3 -c 'import math, statistics, sys
v = [float(x) for x in sys.argv[1:] if not math.isnan(float(x))]
print("%.6f %.0f" % (statistics.median(v), 100 * (max(v) / min(v) - 1)) if v else "nan nan")' "$@"
}
ms() { awk -v s="$1" 'BEGIN { if (s == "nan") print "-"; else printf "%.1f", 1000 * s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan") print "-"; else printf "%.2f", a / b }'; }
# the smaller of two seconds, either of which may be nan
min_of() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan") print b; else if (b == "nan" || a < b) print a; else print b }'; }

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
if [ ${#scaled[@]} -gt 0 ]; then
  echo
  echo "Scaling on $cores cores, same global batch (ms per step; speed-up: throughput relative to 1 rank on 1 core;" \
    "torch's DistributedDataParallel, gloo, 2 processes of 1 thread, relative to torch at $threads thread(s) above)"
  echo
  echo "| model | batch | 1 rank, 1 core | 1 rank, $cores cores | 2 ranks (data) | data speed-up | 2 ranks (tofu) |" \
    "tofu speed-up | torch, $cores threads | torch DDP, 2 processes | DDP speed-up | best 2 ranks/torch |" \
    "spread (data, tofu) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for m in "${scaled[@]}"; do
    read -r s1 _ <<<"$(stats ${t[$m.dp1]})"
    read -r sa _ <<<"$(stats ${t[$m.dpall]})"
    read -r s2 p2 <<<"$(stats ${t[$m.dp2]})"
    read -r sf pf <<<"$(stats ${t[$m.tofu2]})"
    read -r st _ <<<"$(stats ${t[$m.torchall]})"
    read -r sd _ <<<"$(stats ${t[$m.ddp]})"
    read -r s1t _ <<<"$(stats ${t[$m.torch]})"
    echo "| $m | ${batch[$m]} | $(ms "$s1") | $(ms "$sa") | $(ms "$s2") | $(ratio "$s1" "$s2")x | $(ms "$sf") |" \
      "$(ratio "$s1" "$sf")x | $(ms "$st") | $(ms "$sd") | $(ratio "$s1t" "$sd")x |" \
      "$(ratio "$(min_of "$s2" "$sf")" "$(min_of "$st" "$sd")") | ${p2}%, ${pf}% |"
  done
fi
