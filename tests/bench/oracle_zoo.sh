#!/usr/bin/env bash
# Benchmark (on demand, not in CI): ParaDL's oracle (cleave oracle) on the papers' CNNs (generate.py --weights none:
# shapes only): per model the strategy table over DEVICES (default 1..16) on TOPOLOGY (default p100-4x4) and the
# oracle's wall and CPU seconds.
# Usage: tests/bench/oracle_zoo.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Other models: ZOO_MODELS="family:variant:batch ...".
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
models=${ZOO_MODELS:-"resnet:50:64 vgg16:full:64 alexnet:full:128"}
devices=${DEVICES:-1..16}
topology=${TOPOLOGY:-p100-4x4}
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant-b$batch"
  onnx="$work/$name.onnx"
  if ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$onnx" 2>"$work/$name.gen.log"; then
    echo "$name: generator failed: $(grep -m1 -i error "$work/$name.gen.log")"
    continue
  fi
  echo "== $name on $topology"
  /usr/bin/time -f "%e %U" -o "$work/$name.time" "$cleave" oracle "$onnx" --devices "$devices" --topology "$topology"
  read -r wall cpu <"$work/$name.time"
  echo "oracle: wall ${wall} s, cpu ${cpu} s"
done
