#!/usr/bin/env bash
# The main job: compile the bundled CNN (models/cnn.onnx, BatchNorm in training mode) for 2 CPU ranks with the
# data-parallel plan, train it under mpirun on the 8x8 handwritten digits (printing the loss per step), then report
# its accuracy on the 297 held-back digits.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh >&2
build=${CLEAVE_BUILD_DIR:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/tools/cleave" compile models/cnn.onnx --devices 2 --planner data --batch 16 --optimizer adam --lr 0.01 \
  -o "$out/bundle"
"$build/tools/cleave" run "$out/bundle" --runtime-dir "$build/runtime" \
  --data x=models/data/digits_train_x.npy,y=models/data/digits_train_y.npy --steps 400 \
  --save-model "$out/trained.onnx"
"$build/tools/cleave" test "$out/trained.onnx" --batch 16 \
  --data x=models/data/digits_test_x.npy,y=models/data/digits_test_y.npy
