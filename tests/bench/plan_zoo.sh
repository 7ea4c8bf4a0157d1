#!/usr/bin/env bash
# Benchmark (on demand, not in CI): `cleave plan --planner data --devices 8` on the papers' big models, whose weights
# are never written (generate.py --weights none: the external data file is absent). Prints one row per model:
# parameters, plan wall seconds and peak RSS (from /usr/bin/time -v), or the error that stopped the plan.
# Usage: tests/bench/plan_zoo.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Other models: ZOO_MODELS="family:variant:batch ..." (default: the three below); more plan flags: PLAN_FLAGS (e.g.
# "--optimizer adam": the optimizer state is zero-initialised without allocating it, so RSS must not grow).
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
models=${ZOO_MODELS:-"wresnet:152-10:8 rnn:10-8K:128 transformer:tensoropt:8"}
printf '%-24s %16s %10s %12s  %s\n' model params plan_s peak_rss_MB status
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant"
  onnx="$work/$name.onnx"
  if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$onnx" 2>"$work/$name.gen.log"; then
    printf '%-24s %16s %10s %12s  %s\n' "$name" - - - "generator failed: $(grep -m1 -i error "$work/$name.gen.log")"
    continue
  fi
  params=$(grep -o '[0-9]* parameters' "$work/$name.gen.log" | head -1 | cut -d' ' -f1)
  /usr/bin/time -v "$cleave" plan "$onnx" --planner data --devices 8 ${PLAN_FLAGS:-} -o "$work/$name.plan" \
    >"$work/$name.out" 2>"$work/$name.time"
  code=$?
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0
                                               for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/$name.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$work/$name.time")
  if [ "$code" -eq 0 ]; then status="ok ($(wc -l <"$work/$name.plan") plan lines)"
  else status=$(grep -m1 '^error' "$work/$name.time" | cut -c1-200); fi
  printf '%-24s %16s %10s %12s  %s\n' "$name" "$params" "$secs" "$rss" "$status"
done
