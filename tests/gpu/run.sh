#!/bin/bash
# Where a GPU exists: builds the tree with the CUDA backend, runs the GPU tests (ctest -R '^gpu\.': kernels vs the
# CPU backend, plan GPU runs vs CPU runs; with cuda.cudnn_paths: which kernel cases take cuDNN; cuda.run_cuda_bundle
# and cuda.profile_cuda: cleave run and cleave profile --backend cuda on GPUs), then times one
# training step of the MLP, CNN, tiny LSTM and tiny Transformer bundles (data plan; 1 rank, and 2 ranks where 2 GPUs
# are visible): the wall time of 22 steps minus that of 2 steps, over 20, so startup and first-step costs cancel.
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
now() { date +%s.%N; }
rank_counts="1"
[ "$gpus" -ge 2 ] && rank_counts="1 2"
printf '%-12s %5s %12s\n' model ranks "ms/step"
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
    ninja -C "$b/build" > /dev/null
    t0=$(now)
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build" --steps 2 $data > /dev/null
    t1=$(now)
    # shellcheck disable=SC2086
    "$b/launch/mpirun.sh" "$b/build" --steps 22 $data > "$tmp/losses.txt"
    t2=$(now)
    ms=$(python3 -c "print(f'{((($t2) - ($t1)) - (($t1) - ($t0))) / 20 * 1000:.3f}')")
    printf '%-12s %5d %12s   (last: %s)\n' "$model" "$ranks" "$ms" "$(tail -1 "$tmp/losses.txt")"
  done
done
exit $status
