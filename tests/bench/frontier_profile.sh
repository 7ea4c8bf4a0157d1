#!/usr/bin/env bash
# Benchmark (on demand, not in CI): what a full profile costs the frontier search. Builds tests/bench/
# frontier_profile.cpp (target frontier_profile, not built by default) in BUILD_DIR, generates TensorOpt's Transformer
# (shapes only) and runs the search at 16 devices of v100-2x8 without a profile and with a synthetic profile of every
# op's data-parallel and whole shares (the .cpp says how it is made), printing each one's seconds (cost graph, FT,
# re-scoring) and the fastest plan's predicted step.
# Usage: tests/bench/frontier_profile.sh BUILD_DIR SOURCE_DIR [WORK_DIR]
# Environment: MODEL (family:variant:batch, default transformer:tensoropt:32), DEVICES (16), TOPOLOGY (v100-2x8).
set -euo pipefail
build=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
IFS=: read -r family variant batch <<<"${MODEL:-transformer:tensoropt:32}"
cmake --build "$build" --target frontier_profile > "$work/build.log"
onnx=$work/$family-$variant-b$batch.onnx
[ -f "$onnx" ] || /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" \
  --batch "$batch" --weights none -o "$onnx" > "$work/generate.log" 2>&1
"$build/tests/frontier_profile" "$onnx" "$batch" "${DEVICES:-16}" "${TOPOLOGY:-v100-2x8}" "$work/profile.json"
