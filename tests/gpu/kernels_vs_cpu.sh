#!/bin/bash
# The CUDA backend's kernels against the CPU backend's on kernel_cases.cpp: exit 77 (SKIPPED) without a GPU.
# Usage: kernels_vs_cpu.sh KERNEL_CASES_CPU KERNEL_CASES_CUDA SOURCE_DIR
set -euo pipefail
source "$3/tests/gpu/gpu_count.sh"
if [ "$(gpu_count)" -lt 1 ]; then
  echo "SKIPPED: no GPU visible (nvidia-smi -L lists none)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$1" "$tmp/cpu.bin"
"$2" "$tmp/cuda.bin"
python3 "$3/tests/gpu/compare_checkpoints.py" "$tmp/cuda.bin" "$tmp/cpu.bin" --exact dropout_mask region_copy_i64
