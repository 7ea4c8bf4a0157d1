#!/bin/bash
# A plan's GPU run equals its CPU run: the MLP and CNN under data, tofu and random plans on 1, 2 and 4 ranks, built
# for cpu and for cuda from the same bundle, train 3 SGD steps; losses must agree within relative 1e-4 and the saved
# weights within 1e-4 of their scale. Ranks beyond the visible GPUs share them and communicate through host memory
# (runtime/cuda/nccl.cu, staged); where every rank has a GPU of its own they use NCCL. Exit 77 (SKIPPED) without a GPU.
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
status=0
# model ranks planner seed
cases="mlp 1 data 0
mlp 2 data 0
mlp 2 tofu 0
mlp 4 random 3
cnn 1 data 0
cnn 2 data 0
cnn 2 tofu 0
cnn 2 random 5"
# (mpirun reads standard input: the cases come on descriptor 3)
while read -r model ranks planner seed <&3; do
  {
    ok=1
    b=$tmp/${model}_${ranks}_$planner
    seeded=()
    [ "$planner" = random ] && seeded=(--seed "$seed")
    "$CLEAVE" compile "$SRC/models/$model.onnx" --devices "$ranks" --planner "$planner" "${seeded[@]}" --batch 16 \
      --optimizer sgd --lr 0.1 --backend cuda -o "$b" 2>/dev/null
    cmake -S "$b" -B "$b/build_cpu" -G Ninja -DCLEAVE_BACKEND=cpu -DCLEAVE_RUNTIME_DIR="$3" > /dev/null
    cmake -S "$b" -B "$b/build_cuda" -G Ninja -DCLEAVE_BACKEND=cuda -DCLEAVE_RUNTIME_DIR="$4" \
      -DCMAKE_CUDA_COMPILER="$5" > /dev/null
    ninja -C "$b/build_cpu" > /dev/null
    ninja -C "$b/build_cuda" > /dev/null
    data=data_$model
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build_cpu" --steps 3 ${!data} --save "$b/cpu" > "$b/cpu.txt" ||
      { echo "FAIL: $model $planner at $ranks rank(s): the CPU run failed"; ok=0; }
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build_cuda" --steps 3 ${!data} --save "$b/cuda" > "$b/cuda.txt" ||
      { echo "FAIL: $model $planner at $ranks rank(s): the GPU run failed"; ok=0; }
    if ! python3 - "$b/cuda.txt" "$b/cpu.txt" <<'PY'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
b = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step ")]
print(f"losses gpu {a} cpu {b}")
assert len(a) == len(b) == 3, (a, b)
assert all(abs(p - q) <= 1e-4 * abs(q) for p, q in zip(a, b)), (a, b)
PY
    then
      echo "FAIL: $model $planner at $ranks rank(s): GPU losses differ from CPU losses"
      ok=0
    fi
    for ((r = 0; r < ranks; ++r)); do
      python3 "$SRC/tests/gpu/compare_checkpoints.py" "$b/cuda.rank_$r.bin" "$b/cpu.rank_$r.bin" | tail -1 |
        grep -q '^ok$' || { echo "FAIL: $model $planner at $ranks rank(s): rank $r weights differ"; ok=0; }
    done
    [ $ok -eq 1 ] && echo "ok: $model $planner at $ranks rank(s) on $gpus GPU(s): GPU run equals CPU run"
    [ $ok -eq 1 ] || status=1
  }
done 3<<< "$cases"
exit $status
