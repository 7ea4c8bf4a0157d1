#!/usr/bin/env bash
# The main job, for now: import the bundled CNN (models/cnn.onnx, BatchNorm in training mode) and train it a few
# steps on the 8x8 digits with the reference interpreter, printing the loss per step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh >&2
build=${CLEAVE_BUILD_DIR:-build}
"$build/tools/cleave" eval models/cnn.onnx \
  --data x=models/data/digits_train_x.npy,y=models/data/digits_train_y.npy \
  --batch 16 --steps 60 --optimizer adam --lr 0.01
