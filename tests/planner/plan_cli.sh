#!/usr/bin/env bash
# `cleave plan`: prints the golden plans, -o writes the same bytes through a temp file and leaves nothing on error,
# two runs are byte-identical, bad flags fail with a one-line error.
# Usage: plan_cli.sh CLEAVE_BINARY SOURCE_DIR   (to be registered with the CLI tests, like tests/cli/*.sh)
set -eu
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$cleave" plan "$src/models/mlp.onnx" --devices 2 --batch 16 >"$work/mlp.plan"
cmp "$work/mlp.plan" "$src/tests/planner/golden/mlp_data_2.plan" || fail "mlp plan differs from its golden file"
"$cleave" plan "$src/models/cnn.onnx" --devices 2 --batch 8 --planner data -o "$work/cnn.plan" 2>"$work/err"
cmp "$work/cnn.plan" "$src/tests/planner/golden/cnn_data_2.plan" || fail "cnn plan (-o) differs from its golden file"
[ "$(ls "$work" | grep -c tmp)" = 0 ] || fail "-o left a temporary file"
for planner in single data; do
  "$cleave" plan "$src/models/cnn.onnx" --devices 4 --batch 8 --planner $planner --optimizer adam >"$work/a"
  "$cleave" plan "$src/models/cnn.onnx" --devices 4 --batch 8 --planner $planner --optimizer adam >"$work/b"
  cmp "$work/a" "$work/b" || fail "$planner: two runs differ"
done
# The random planner: the same seed draws the same bytes, another seed another plan; a summary goes to stderr.
"$cleave" plan "$src/models/cnn.onnx" --devices 8 --batch 8 --planner random --seed 7 >"$work/a" 2>"$work/err"
"$cleave" plan "$src/models/cnn.onnx" --devices 8 --batch 8 --planner random --seed 7 >"$work/b" 2>/dev/null
cmp "$work/a" "$work/b" || fail "random: two runs with seed 7 differ"
"$cleave" plan "$src/models/cnn.onnx" --devices 8 --batch 8 --planner random --seed 8 >"$work/b" 2>/dev/null
! cmp -s "$work/a" "$work/b" || fail "random: seeds 7 and 8 drew the same plan"
grep -q '^random plan, seed 7: 33 ops: .* replicated, .* split an output var' "$work/err" || fail "$(cat "$work/err")"

# Errors: non-zero exit, one line on stderr, no output file (not even a partial one).
if "$cleave" plan "$src/models/mlp.onnx" --devices 3 --batch 16 -o "$work/bad.plan" 2>"$work/err"; then
  fail "batch 16 over 3 devices accepted"
fi
grep -qx 'error: data planner: batch 16 of input "x" is not divisible by 3 devices' "$work/err" || fail "$(cat "$work/err")"
[ ! -e "$work/bad.plan" ] || fail "a failed run left its output file"
[ -z "$(ls "$work" | grep tmp || true)" ] || fail "a failed run left a temporary file"
if "$cleave" plan "$src/models/mlp.onnx" --devices 2 --planner flexflow 2>"$work/err"; then fail "planner flexflow accepted"; fi
if "$cleave" plan "$src/models/mlp.onnx" --devices 2 --batch 16 -o "$work/no/such/dir/x.plan" 2>"$work/err"; then
  fail "-o into a missing directory accepted"
fi
grep -q 'error: -o: directory .* does not exist' "$work/err" || fail "$(cat "$work/err")"
if "$cleave" plan "$src/models/mlp.onnx" --devices 2 --batch 16 --seed 3 2>"$work/err"; then
  fail "--seed with the data planner accepted"
fi
grep -qx 'error: --seed applies to --planner random or flexflow only' "$work/err" || fail "$(cat "$work/err")"
echo "ok cleave plan: golden, -o, determinism, random seeds, errors"
