#!/bin/bash
# A plan's GPU run equals its CPU run: the MLP and CNN under the data plan, built for cpu and for cuda from the same
# bundle, train 3 SGD steps; losses must agree within relative 1e-4 and the saved weights within 1e-4 of their
# scale. 1 rank on one GPU; also 2 ranks where 2 GPUs are visible. Exit 77 (SKIPPED) without a GPU.
# Usage: plan_gpu_equals_cpu.sh CLEAVE SOURCE_DIR CPU_RUNTIME_DIR CUDA_RUNTIME_DIR NVCC
set -euo pipefail
CLEAVE=$1
SRC=$2
source "$SRC/tests/gpu/gpu_count.sh"
gpus=$(gpu_count)
if [ "$gpus" -lt 1 ]; then
  echo "SKIPPED: no GPU visible (nvidia-smi -L lists none)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data_mlp="x=$SRC/models/data/digits_flat_train_x.npy y=$SRC/models/data/digits_train_y.npy"
data_cnn="x=$SRC/models/data/digits_train_x.npy y=$SRC/models/data/digits_train_y.npy"
rank_counts="1"
[ "$gpus" -ge 2 ] && rank_counts="1 2"
status=0
for model in mlp cnn; do
  for ranks in $rank_counts; do
    b=$tmp/${model}_$ranks
    "$CLEAVE" compile "$SRC/models/$model.onnx" --devices "$ranks" --planner data --batch 16 --optimizer sgd --lr 0.1 \
      --backend cuda -o "$b" 2>/dev/null
    cmake -S "$b" -B "$b/build_cpu" -G Ninja -DCLEAVE_BACKEND=cpu -DCLEAVE_RUNTIME_DIR="$3" > /dev/null
    cmake -S "$b" -B "$b/build_cuda" -G Ninja -DCLEAVE_BACKEND=cuda -DCLEAVE_RUNTIME_DIR="$4" \
      -DCMAKE_CUDA_COMPILER="$5" > /dev/null
    ninja -C "$b/build_cpu" > /dev/null
    ninja -C "$b/build_cuda" > /dev/null
    data=data_$model
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build_cpu" --steps 3 ${!data} --save "$tmp/cpu" > "$tmp/cpu.txt"
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build_cuda" --steps 3 ${!data} --save "$tmp/cuda" > "$tmp/cuda.txt"
    if ! python3 - "$tmp/cuda.txt" "$tmp/cpu.txt" <<'PY'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
b = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step ")]
print(f"losses gpu {a} cpu {b}")
assert len(a) == len(b) == 3, (a, b)
assert all(abs(p - q) <= 1e-4 * abs(q) for p, q in zip(a, b)), (a, b)
PY
    then
      echo "FAIL: $model at $ranks rank(s): GPU losses differ from CPU losses"
      status=1
    fi
    for ((r = 0; r < ranks; ++r)); do
      python3 "$SRC/tests/gpu/compare_checkpoints.py" "$tmp/cuda.rank_$r.bin" "$tmp/cpu.rank_$r.bin" | tail -1 |
        grep -q '^ok$' || { echo "FAIL: $model at $ranks rank(s): rank $r weights differ"; status=1; }
    done
    [ $status -eq 0 ] && echo "ok: $model at $ranks rank(s): GPU run equals CPU run"
  done
done
exit $status
