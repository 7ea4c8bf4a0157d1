#!/usr/bin/env bash
# Same input => byte-identical IR; the printed IR reads back to the same text (print(parse(x)) == x).
# Usage: determinism.sh CLEAVE_BINARY SOURCE_DIR
set -eu
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in "$src"/models/*.onnx; do
  for args in "" "--train --optimizer adam" "--train --optimizer momentum --weight-decay 0.01"; do
    "$cleave" ir "$model" --batch 16 $args >"$work/a.ir"
    "$cleave" ir "$model" --batch 16 $args >"$work/b.ir"
    cmp "$work/a.ir" "$work/b.ir" || { echo "FAIL: $model $args: two runs differ"; exit 1; }
    "$cleave" ir "$work/a.ir" >"$work/c.ir"
    cmp "$work/a.ir" "$work/c.ir" || { echo "FAIL: $model $args: print(parse(x)) != x"; diff "$work/a.ir" "$work/c.ir" | head; exit 1; }
    echo "ok $(basename "$model") $args: $(wc -l <"$work/a.ir") lines, stable and round-trips"
  done
done
