#!/usr/bin/env bash
# Benchmark (on demand, not in CI): how well a profile predicts a batch it did not measure, on one device of this
# machine (cpu, or cuda on one GPU). Per model, `cleave profile` measures the 1-device data plan at batches B, 2B and 4B;
# then `cleave explain` predicts the step at 2B from
#   self     the profile of 2B itself (every share measured: what is left is the model's own error),
#   ratio    the profile of B alone (one share per op: the op's measured/roofline ratio scales its roofline),
#   line     the profiles of B and 4B merged (two shares per op: cost_model.cpp calibration()'s line through them;
#            statement_gap their mean),
# and prints each with its error against the step measured at 2B. A one-GPU machine stands in for a many-GPU one this
# way: the shares of a data plan over 4 devices at batch 4B are those of the 1-device plan at B.
# Usage: tests/bench/batch_calibration.sh BUILD_DIR SOURCE_DIR [BACKEND] [WORK_DIR]
# Environment: MODELS (space-separated name:onnx:B, default "mlp:models/mlp.onnx:16 cnn:models/cnn.onnx:16"),
#              TOPOLOGY (the roofline's machine, default h100x8 on cuda, k80x8 on cpu), STEPS (60), REPEATS (3).
set -euo pipefail
build=$(readlink -f "$1")
src=$(readlink -f "$2")
backend=${3:-cpu}
work=${4:-$(mktemp -d)}
mkdir -p "$work"
cleave=$build/tools/cleave
topology=${TOPOLOGY:-$([ "$backend" = cuda ] && echo h100x8 || echo k80x8)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=$(command -v /usr/bin/python3 || command -v python3)

merge() {  # merge A.json B.json OUT.json: compute shares and local-statement curves of both, the mean gap
  "$py" - "$@" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for op, keys in b['compute'].items():
    a['compute'].setdefault(op, {}).update(keys)
for kind, pts in b.get('statements', {}).items():
    m = dict(map(tuple, a.setdefault('statements', {}).get(kind, [])))
    for x, y in pts:
        m[x] = (m[x] + y) / 2 if x in m else y
    a['statements'][kind] = sorted([list(p) for p in m.items()])
gaps = [p.get('statement_gap', 0) for p in (a, b)]
if any(gaps):
    a['statement_gap'] = sum(gaps) / 2
a['plans'] += b['plans']
json.dump(a, open(sys.argv[3], 'w'), sort_keys=True)
PY
}
measured() { "$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['plans'][0]['step_seconds'])" "$1"; }
predicted() {  # predicted ONNX BATCH PLAN PROFILE
  "$cleave" explain "$1" --batch "$2" --plan "$3" --topology "$topology" --format json --profile "$4" 2>/dev/null |
    "$py" -c "import json,sys; print(json.load(sys.stdin)['predicted_step_seconds'])"
}
cell() { "$py" -c "import sys; p, m = float(sys.argv[1]), float(sys.argv[2]); print('%.4g (%+.1f%%)' % (p, 100 * (p - m) / m))" "$1" "$2"; }

printf '%-12s %5s %11s %20s %20s %20s %10s\n' model batch measured self ratio line gap_us
for spec in ${MODELS:-mlp:models/mlp.onnx:16 cnn:models/cnn.onnx:16}; do
  IFS=: read -r name onnx b1 <<<"$spec"
  [[ $onnx = /* ]] || onnx=$src/$onnx
  for b in $b1 $((2 * b1)) $((4 * b1)); do
    "$cleave" plan "$onnx" --devices 1 --batch $b --planner data -o "$work/$name.$b.plan" 2>/dev/null
    "$cleave" profile "$onnx" --backend "$backend" --devices 1 --batch $b --plan "$work/$name.$b.plan" \
      -o "$work/$name.$b.json" --steps "${STEPS:-60}" --repeats "${REPEATS:-3}" --work-dir "$work/$name.$b" \
      --runtime-dir "$build/runtime" 2>"$work/$name.$b.err" || { tail -5 "$work/$name.$b.err"; exit 1; }
  done
  b2=$((2 * b1))
  merge "$work/$name.$b1.json" "$work/$name.$((4 * b1)).json" "$work/$name.line.json"
  m=$(measured "$work/$name.$b2.json")
  gap=$("$py" -c "import json,sys; print('%.3f' % (1e6 * json.load(open(sys.argv[1])).get('statement_gap', 0)))" \
    "$work/$name.line.json")
  printf '%-12s %5s %11.4g %20s %20s %20s %10s\n' "$name" $b2 "$m" \
    "$(cell "$(predicted "$onnx" $b2 "$work/$name.$b2.plan" "$work/$name.$b2.json")" "$m")" \
    "$(cell "$(predicted "$onnx" $b2 "$work/$name.$b2.plan" "$work/$name.$b1.json")" "$m")" \
    "$(cell "$(predicted "$onnx" $b2 "$work/$name.$b2.plan" "$work/$name.line.json")" "$m")" "$gap"
done
