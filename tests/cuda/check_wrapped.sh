#!/bin/bash
# Every CUDA/cuBLAS/cuDNN/NCCL call and kernel launch in runtime/ and in generated rank code (the MLP and CNN bundles,
# 2 ranks, with their bundled runtime copy) is wrapped in a checking macro. Usage: check_wrapped.sh CLEAVE SOURCE_DIR
set -euo pipefail
CLEAVE=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$CLEAVE" compile "$SRC/models/mlp.onnx" --devices 2 --batch 16 --backend cuda -o "$tmp/mlp" 2>/dev/null
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --batch 16 --backend cuda -o "$tmp/cnn" 2>/dev/null
python3 "$SRC/tests/cuda/check_wrapped.py" "$SRC" "$tmp/mlp" "$tmp/cnn"
