#!/bin/bash
# Where a GPU exists: builds the tree with the CUDA backend, runs the GPU tests (ctest -R '^gpu\.': kernels vs the
# CPU backend, plan GPU runs vs CPU runs; with cuda.cudnn_paths: which kernel cases take cuDNN; cuda.run_cuda_bundle
# and cuda.profile_cuda: cleave run and cleave profile --backend cuda on GPUs), then times one
# training step of the MLP, CNN, tiny LSTM and tiny Transformer bundles (data plan; 1 rank, and 2 ranks: on 2 GPUs
# where 2 are visible, else sharing one): the median step the ranks time themselves over 20 steps after a warm-up, on the GPU and on the CPUs.
# Usage: tests/gpu/run.sh [--prebuilt] [BUILD_DIR]   (default build-gpu in the source tree; CUDA_ARCHS=90 to build
# one arch). --prebuilt: BUILD_DIR is a finished CUDA build (tests/gpu/prebuilt.sh unpacked it on a machine without
# Cleave's build dependencies): no configure, no build, and the LSTM and Transformer models exported there are used.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
prebuilt=0
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt=1
  shift
fi
BUILD=${1:-$SRC/build-gpu}
source "$SRC/tests/gpu/gpu_count.sh"
gpus=$(gpu_count)
if [ "$gpus" -lt 1 ]; then
  echo "SKIPPED: no GPU visible (nvidia-smi -L lists none)"
  exit 77
fi
nvidia-smi -L
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
archs=${CUDA_ARCHS:-80;90}
if [ $prebuilt -eq 0 ]; then
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_ENABLE_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs" > "$BUILD.configure.log"
  ninja -C "$BUILD" cleave cleave_rt_cpu cleave_rt_cuda kernel_cases_cpu kernel_cases_cuda cudnn_paths
fi
# The tests' verdict is the exit status; the step times below are printed whatever it is.
status=0
ctest --test-dir "$BUILD" -j4 -R '^(gpu\.|cuda\.(cudnn_paths|run_cuda_bundle|profile_cuda))' --output-on-failure ||
  status=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $prebuilt -eq 1 ]; then
  cp "$BUILD"/gpu_models/* "$tmp"/
else
  /usr/bin/python3 "$SRC/tests/cuda/export_models.py" "$SRC" "$tmp" > /dev/null 2>&1
fi
# 2 ranks: on their own GPUs (NCCL) where 2 are visible, else sharing one (MPI through host memory).
rank_counts="1 2"
# The step time the rank programs measure themselves (CLEAVE_PROFILE, rt.h: the median step after a warm-up one,
# wall clock after a device synchronize), on the GPU and, for scale, on this machine's CPUs from the same bundle; the
# whole run's wall time (process start, MPI, CUDA context, data) beside it.
step_ms() { sed -n 's/.*profile: step median \([0-9.e+-]*\) s.*/\1/p' "$1" | awk '{printf "%.3f", $1 * 1000}'; }
printf '%-12s %5s %12s %12s %12s\n' model ranks "gpu ms/step" "cpu ms/step" "gpu run s"
for model in mlp cnn lstm transformer; do
  case $model in
    mlp) onnx=$SRC/models/mlp.onnx; batch=16; data="x=$SRC/models/data/digits_flat_train_x.npy y=$SRC/models/data/digits_train_y.npy" ;;
    cnn) onnx=$SRC/models/cnn.onnx; batch=16; data="x=$SRC/models/data/digits_train_x.npy y=$SRC/models/data/digits_train_y.npy" ;;
    lstm) onnx=$tmp/lstm.onnx; batch=4; data="x=$tmp/lstm_x.npy y=$tmp/lstm_y.npy" ;;
    transformer) onnx=$tmp/transformer.onnx; batch=8; data="x=$tmp/tf_x.npy y=$tmp/tf_y.npy" ;;
  esac
  for ranks in $rank_counts; do
    b=$tmp/${model}_$ranks
    "$BUILD/tools/cleave" compile "$onnx" --devices "$ranks" --planner data --batch $batch --optimizer sgd --lr 0.1 \
      --backend cuda -o "$b" 2> /dev/null
    cmake -S "$b" -B "$b/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_RUNTIME_DIR="$BUILD/runtime" \
      "-DCMAKE_CUDA_ARCHITECTURES=$archs" > /dev/null
    cmake -S "$b" -B "$b/build_cpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_BACKEND=cpu \
      -DCLEAVE_RUNTIME_DIR="$BUILD/runtime" > /dev/null
    ninja -C "$b/build" > /dev/null
    ninja -C "$b/build_cpu" > /dev/null
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    CLEAVE_PROFILE=$b/gpu "$b/launch/mpirun.sh" "$b/build" --steps 21 $data > "$tmp/losses.txt" 2> "$b/gpu.err"
    t1=$(date +%s.%N)
    # shellcheck disable=SC2086
    CLEAVE_PROFILE=$b/cpu "$b/launch/mpirun.sh" "$b/build_cpu" --steps 21 $data > /dev/null 2> "$b/cpu.err"
    printf '%-12s %5d %12s %12s %12.2f   (last: %s)\n' "$model" "$ranks" "$(step_ms "$b/gpu.err")" \
      "$(step_ms "$b/cpu.err")" "$(python3 -c "print($t1 - $t0)")" "$(tail -1 "$tmp/losses.txt")"
  done
done
exit $status
