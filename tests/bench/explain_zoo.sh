#!/usr/bin/env bash
# Benchmark (on demand, not in CI): the cost model's totals for the data plan of the zoo models at 8 devices on
# k80x8 (`cleave explain --planner data --devices 8 --topology k80x8 --format json`), with explain's wall seconds.
# Weights are never written (generate.py --weights none). Prints one row per model.
# Usage: tests/bench/explain_zoo.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Other models: ZOO_MODELS="family:variant:batch ..." (default below: Tofu's WResNet-152-10 at batch 8, RNN-4-8K and
# RNN-10-8K at batch 512 and 128, TensorOpt's Transformer at batch 8).
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
models=${ZOO_MODELS:-"wresnet:152-10:8 rnn:4-8K:512 rnn:10-8K:128 transformer:tensoropt:8"}
printf '%-24s %8s %18s %18s %14s %10s  %s\n' model ops comm_bytes peak_memory_bytes step_s explain_s status
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant"
  onnx="$work/$name.onnx"
  if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$onnx" 2>"$work/$name.gen.log"; then
    printf '%-24s %8s %18s %18s %14s %10s  %s\n' "$name" - - - - - "generator failed"
    continue
  fi
  start=$(date +%s.%N)
  "$cleave" explain "$onnx" --planner data --devices 8 --topology k80x8 --format json >"$work/$name.json" \
    2>"$work/$name.err"
  code=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  if [ "$code" -ne 0 ]; then
    printf '%-24s %8s %18s %18s %14s %10.2f  %s\n' "$name" - - - - "$secs" "$(head -c 200 "$work/$name.err")"
    continue
  fi
  python3 - "$work/$name.json" "$name" "$secs" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print('%-24s %8d %18d %18d %14s %10.2f  ok' % (sys.argv[2], len(r['ops']), r['comm_bytes'], max(r['peak_memory_bytes']),
                                               r['predicted_step_seconds'], float(sys.argv[3])))
PY
done
