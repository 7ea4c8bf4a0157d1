#!/usr/bin/env bash
# Writes everything Cleave prints for machines on a fixed set of cases into OUT_DIR, so that two builds can be
# compared byte for byte (`diff -r`): a refactoring that must not change any output runs it before and after.
# Cases: models/mlp.onnx, models/cnn.onnx and every tiny zoo model (models/zoo/generate.py, exported once into
# OUT_DIR/models), each with every planner on 2 and 4 devices: the bundle `cleave compile` writes (every file's
# sha256, plan.txt and the rank sources in full), `cleave explain --format json` and text of its plan; the oracle's
# table; the hand-written plans of tests/codegen/plans compiled with --plan.
# What goes to stderr (progress for people, timings) is kept in *.err files with temporary paths masked, but is not
# output for machines: compare with `diff -r -x '*.err' BEFORE AFTER`.
# Usage: tools/output_snapshot.sh CLEAVE_BINARY OUT_DIR [MODELS_DIR]   (MODELS_DIR: reuse exported tiny models)
set -euo pipefail
cleave=$(realpath "$1")
out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(realpath "$out")
models=${3:-$out/models}
mkdir -p "$models"
cp "$src/models/mlp.onnx" "$src/models/cnn.onnx" "$models/"
families="wresnet resnet alexnet vgg16 inception3 rnn rnntc rnnlm nmt transformer"
for f in $families; do
  [ -f "$models/$f.onnx" ] ||
    /usr/bin/python3 "$src/models/zoo/generate.py" --family "$f" --variant tiny -o "$models/$f.onnx" > /dev/null
done
planners="single data tofu icml18 owt allrow spartan equalchop random flexflow frontier"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
for model in mlp cnn $families; do
  for devices in 2 4; do
    for planner in $planners; do
      case=$out/$model.$planner.$devices
      mkdir -p "$case"
      if ! "$cleave" compile "$models/$model.onnx" --devices $devices --planner $planner --batch 8 \
        -o "$tmp/bundle" > "$case/compile.out" 2> "$case/compile.err"; then
        failures=$((failures + 1))
        continue
      fi
      (cd "$tmp/bundle" && find . -type f ! -path './runtime/*' | sort | xargs sha256sum) > "$case/bundle.sha256"
      cp "$tmp/bundle/plan.txt" "$tmp/bundle/manifest.json" "$case/"
      cp "$tmp/bundle"/src/*.cpp "$case/" 2> /dev/null || true
      "$cleave" explain "$models/$model.onnx" --plan "$tmp/bundle/plan.txt" --batch 8 --format json \
        > "$case/explain.json" 2> "$case/explain.err" || failures=$((failures + 1))
      "$cleave" explain "$models/$model.onnx" --plan "$tmp/bundle/plan.txt" --batch 8 \
        > "$case/explain.txt" 2> /dev/null || true
      rm -rf "$tmp/bundle"
      sed -i "s|$tmp|TMP|g" "$case/compile.err"
    done
    "$cleave" oracle "$models/$model.onnx" --batch 8 --devices $devices --format json \
      > "$out/$model.oracle.$devices.json" 2> /dev/null || true
  done
done
for plan in "$src"/tests/codegen/plans/*.plan; do
  name=$(basename "$plan" .plan)
  model=$src/models/${name%%_*}.onnx
  [ -f "$model" ] || continue
  mkdir -p "$out/plan.$name"
  "$cleave" compile "$model" --plan "$plan" --batch 8 -o "$tmp/bundle" > /dev/null 2> "$out/plan.$name/compile.err" ||
    continue
  (cd "$tmp/bundle" && find . -type f ! -path './runtime/*' | sort | xargs sha256sum) > "$out/plan.$name/bundle.sha256"
  rm -rf "$tmp/bundle"
done
echo "output_snapshot: $(find "$out" -type f ! -path "$models/*" | wc -l) files in $out ($failures compile/explain failures)"
