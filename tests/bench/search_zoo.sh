#!/usr/bin/env bash
# Benchmark (on demand, not in CI): the search planners at 8 devices on the papers' big models (generate.py
# --weights none: shapes only). Per model: tofu's search time apart from loading (import + autodiff), wall and CPU,
# and the bytes each planner's plan moves per training step (planner/search/strategies.h plan_comm_bytes), as `cleave plan -o`
# reports on stderr; then the cost model on $TOPOLOGY (default k80x8, Tofu's machine; `cleave explain --plan`): bytes
# sent per step, the slowest device's α-β communication seconds, and the largest per-device peak memory. Tofu should
# move no more than any baseline (status "BELOW TOFU" otherwise, on either byte count). A last row per model is the
# 1-device peak memory (`single`), and tofu's row says its peak over (1-device peak / devices), which Tofu's memory
# target keeps at most 1.15.
# The two byte counts agree up to the statistics synced inside kernels (BatchNorm, losses), which only the cost model
# counts: both fetch an assembled box once per step per device and reuse it (the RNNs' unrolled timesteps read the
# same weight boxes), and reduce a tensor partial on several mesh axes by one collective over their product.
# Usage: tests/bench/search_zoo.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Other models: ZOO_MODELS="family:variant:batch ..."; other planners: PLANNERS="..."; DEVICES (default 8).
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
models=${ZOO_MODELS:-"wresnet:152-10:8 rnn:10-8K:128 rnn:4-8K:512"}
planners=${PLANNERS:-"tofu data icml18 owt allrow spartan equalchop"}
devices=${DEVICES:-8}
topology=${TOPOLOGY:-k80x8}
row() { printf '%-18s %-10s %8s %8s %8s %18s %18s %10s %14s  %s\n' "$@"; }
row model planner load_s plan_s cpu_s bytes_per_step "${topology}_bytes" comm_s peak_memory status
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant-b$batch"
  onnx="$work/$name.onnx"
  if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$onnx" 2>"$work/$name.gen.log"; then
    printf '%-18s %s\n' "$name" "generator failed: $(grep -m1 -i error "$work/$name.gen.log")"
    continue
  fi
  # The 1-device peak first: tofu's row compares with it.
  single_peak=$("$cleave" explain "$onnx" --planner single --devices 1 --topology "$topology" --format json \
    2>"$work/$name.single.err" | python3 -c 'import json, sys; print(max(json.load(sys.stdin)["peak_memory_bytes"]))')
  tofu_bytes="" tofu_cost=""
  for planner in $planners; do
    log="$work/$name.$planner.log"
    if "$cleave" plan "$onnx" --planner "$planner" --devices "$devices" -o "$work/$name.$planner.plan" 2>"$log"; then
      read -r load plan cpu bytes < <(sed -n \
        's/.*(load \([0-9.]*\) s, plan \([0-9.]*\) s, plan cpu \([0-9.]*\) s, \([0-9]*\) bytes.*/\1 \2 \3 \4/p' "$log")
      read -r cost secs peak < <("$cleave" explain "$onnx" --plan "$work/$name.$planner.plan" --topology "$topology" \
        --format json 2>>"$log" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(r["comm_bytes"], "%.3e" % max(float(d["comm_seconds"]) for d in r["per_device"]), max(r["peak_memory_bytes"]))')
      status=ok
      if [ "$planner" = tofu ]; then
        tofu_bytes=$bytes tofu_cost=$cost
        status="ok, peak/(1-device/$devices) = $(python3 -c "print('%.4f' % ($peak / ($single_peak / $devices)))")"
      elif [ -n "$tofu_bytes" ] && { [ "$bytes" -lt "$tofu_bytes" ] || [ "$cost" -lt "$tofu_cost" ]; }; then
        status="BELOW TOFU"
      fi
      row "$name" "$planner" "$load" "$plan" "$cpu" "$bytes" "$cost" "$secs" "$peak" "$status"
    else
      row "$name" "$planner" - - - - - - - "$(grep -m1 '^error' "$log" | cut -c1-150)"
    fi
  done
  row "$name" single - - - - - - "$single_peak" "1 device"
done
