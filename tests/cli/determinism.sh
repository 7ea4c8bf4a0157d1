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
# Plans: every planner, twice and under different thread counts (the planners are single-threaded; OpenMP/OpenBLAS
# settings must not leak into them), byte-identical; tofu also on a two-level topology (its hierarchy-aware search).
for model in "$src"/models/*.onnx; do
  for spec in "data 4" "tofu 8" "icml18 8" "owt 8" "allrow 8" "spartan 8" "equalchop 8" "tofu 16 p100-4x4" "frontier 4" "frontier 16 v100-2x8"; do
    read -r planner devices topo <<<"$spec"
    args=(--batch 16 --planner "$planner" --devices "$devices")
    [ -n "$topo" ] && args+=(--topology "$topo")
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$cleave" plan "$model" "${args[@]}" >"$work/a.plan"
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$cleave" plan "$model" "${args[@]}" >"$work/b.plan"
    "$cleave" plan "$model" "${args[@]}" >"$work/c.plan"
    cmp "$work/a.plan" "$work/b.plan" || { echo "FAIL: $model $spec: plans differ across thread counts"; exit 1; }
    cmp "$work/a.plan" "$work/c.plan" || { echo "FAIL: $model $spec: two runs differ"; exit 1; }
    echo "ok $(basename "$model") plan $spec: $(wc -l <"$work/a.plan") lines, stable across runs and thread counts"
  done
done
# The oracle's table (every strategy, device counts 1..8, the search planners' best) is printed for machines too.
for model in "$src"/models/*.onnx; do
  "$cleave" oracle "$model" --batch 16 --devices 1..8 >"$work/a.oracle"
  OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$cleave" oracle "$model" --batch 16 --devices 1..8 >"$work/b.oracle"
  cmp "$work/a.oracle" "$work/b.oracle" || { echo "FAIL: $model: oracle tables differ"; exit 1; }
  echo "ok $(basename "$model") oracle: $(wc -l <"$work/a.oracle") lines, stable"
done
# The frontier planner's table, plot and profile (planner/search/frontier.h): byte-identical across runs.
for model in "$src"/models/*.onnx; do
  for run in a b; do
    "$cleave" plan "$model" --batch 16 --planner frontier --devices 4 --frontier-baselines data,owt \
      --frontier-table "$work/$run.table" --frontier-svg "$work/$run.svg" >/dev/null 2>&1
    "$cleave" plan "$model" --batch 16 --planner frontier --mode profile --devices 1..4 >"$work/$run.profile" 2>/dev/null
  done
  for f in table svg profile; do
    cmp "$work/a.$f" "$work/b.$f" || { echo "FAIL: $model: frontier $f differs between two runs"; exit 1; }
  done
  echo "ok $(basename "$model") frontier table, plot and profile: stable across runs"
done
# flexflow (a fixed --iterations, no wall cap): the same plan bytes twice and across thread counts.
mlp=$src/models/mlp.onnx
args=(--batch 16 --planner flexflow --devices 4 --iterations 200 --seed 3)
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$cleave" plan "$mlp" "${args[@]}" >"$work/a.plan" 2>/dev/null
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$cleave" plan "$mlp" "${args[@]}" >"$work/b.plan" 2>/dev/null
cmp "$work/a.plan" "$work/b.plan" || { echo "FAIL: mlp flexflow: plans differ across runs"; exit 1; }
echo "ok mlp.onnx plan flexflow 4 --iterations 200: $(wc -l <"$work/a.plan") lines, stable across runs and thread counts"
# simulate: stdout, timeline and SVG byte-identical across runs, for a searched plan and a plan file.
for spec in "--planner data --devices 4" "--planner tofu --devices 8" "--plan $work/a.plan"; do
  for run in a b; do
    "$cleave" simulate "$mlp" --batch 16 $spec --topology p100-4x4 --timeline "$work/$run.timeline" \
      --svg "$work/$run.svg" >"$work/$run.sim"
  done
  for f in sim timeline svg; do
    cmp "$work/a.$f" "$work/b.$f" || { echo "FAIL: simulate $spec: two runs' $f differ"; exit 1; }
  done
  python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$work/a.svg" ||
    { echo "FAIL: simulate $spec: the SVG is not well-formed XML"; exit 1; }
  echo "ok mlp.onnx simulate $spec: $(wc -l <"$work/a.timeline") timeline lines, output stable across runs"
done
