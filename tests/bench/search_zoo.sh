#!/usr/bin/env bash
# Benchmark (on demand, not in CI): the search planners at 8 devices on the papers' big models (generate.py
# --weights none: shapes only). Per model: tofu's search time apart from loading (import + autodiff), and the bytes
# each planner's plan moves per training step (planner/strategies.h plan_comm_bytes), as `cleave plan -o` reports on
# stderr. Tofu should move no more than any baseline.
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
printf '%-18s %-10s %8s %8s %8s %18s  %s\n' model planner load_s plan_s cpu_s bytes_per_step status
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant-b$batch"
  onnx="$work/$name.onnx"
  if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$onnx" 2>"$work/$name.gen.log"; then
    printf '%-18s %s\n' "$name" "generator failed: $(grep -m1 -i error "$work/$name.gen.log")"
    continue
  fi
  tofu_bytes=""
  for planner in $planners; do
    log="$work/$name.$planner.log"
    if "$cleave" plan "$onnx" --planner "$planner" --devices "$devices" -o "$work/$name.$planner.plan" 2>"$log"; then
      read -r load plan cpu bytes < <(sed -n \
        's/.*(load \([0-9.]*\) s, plan \([0-9.]*\) s, plan cpu \([0-9.]*\) s, \([0-9]*\) bytes.*/\1 \2 \3 \4/p' "$log")
      status=ok
      if [ "$planner" = tofu ]; then tofu_bytes=$bytes
      elif [ -n "$tofu_bytes" ] && [ "$bytes" -lt "$tofu_bytes" ]; then status="BELOW TOFU"; fi
      printf '%-18s %-10s %8s %8s %8s %18s  %s\n' "$name" "$planner" "$load" "$plan" "$cpu" "$bytes" "$status"
    else
      printf '%-18s %-10s %8s %8s %8s %18s  %s\n' "$name" "$planner" - - - - "$(grep -m1 '^error' "$log" | cut -c1-150)"
    fi
  done
done
