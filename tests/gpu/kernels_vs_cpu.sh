#!/bin/bash
# The CUDA backend's kernels against the CPU backend's on kernel_cases.cpp: exit 77 (SKIPPED) without a GPU.
# The CUDA build runs twice: as shipped (pooling and batch norm on cuDNN where runtime/cuda/pool.cu and norm.cu say
# so), and with CLEAVE_CUDNN_POOL_NORM=0 (every pooling and batch-norm call on the CUDA kernels), so both paths of
# each case in pool_norm_cases.h are compared with the CPU backend. Both builds also run --mixed (mixed precision's
# GEMMs and convolutions), the CUDA build once more with CLEAVE_LOW_MATH=tf32.
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
CLEAVE_CUDNN_POOL_NORM=0 "$2" "$tmp/cuda_kernels.bin"
"$1" "$tmp/cpu_mixed.bin" --mixed
"$2" "$tmp/cuda_mixed.bin" --mixed
CLEAVE_LOW_MATH=tf32 "$2" "$tmp/cuda_mixed_tf32.bin" --mixed
exact=(dropout_mask dropout_ratio0_mask dropout_ratio0_y transpose_i64_tiles transpose_2d_tiles
       transpose_batched_tiles transpose_reversed broadcast_rows slice_contiguous region_copy_i64
       maxpool2d_floor_indices_indices argmax argmax_last argmin argmin_last one_hot gather_elements scatter_elements
       gather_nd gather_nd_pairs)
status=0
echo "== CUDA (cuDNN for pooling and batch norm where it applies) vs CPU"
python3 "$3/tests/gpu/compare_checkpoints.py" "$tmp/cuda.bin" "$tmp/cpu.bin" --exact "${exact[@]}" || status=1
echo "== CUDA with CLEAVE_CUDNN_POOL_NORM=0 (kernels only) vs CPU"
python3 "$3/tests/gpu/compare_checkpoints.py" "$tmp/cuda_kernels.bin" "$tmp/cpu.bin" --exact "${exact[@]}" || status=1
# Products of bf16/fp16 values are exact on their tensor cores, in TF32 and in fp32, so only the sums' order differs;
# float32 operands must stay fp32 exactly (TF32's rounding would exceed 1e-5 on these sums of 512 and 576 terms).
echo "== mixed precision: CUDA (bf16/fp16 tensor cores for such operands) vs CPU"
python3 "$3/tests/gpu/compare_checkpoints.py" "$tmp/cuda_mixed.bin" "$tmp/cpu_mixed.bin" --rtol 1e-5 || status=1
echo "== mixed precision: CUDA with CLEAVE_LOW_MATH=tf32 vs CPU"
python3 "$3/tests/gpu/compare_checkpoints.py" "$tmp/cuda_mixed_tf32.bin" "$tmp/cpu_mixed.bin" --rtol 1e-5 || status=1
exit $status
