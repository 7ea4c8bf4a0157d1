#!/bin/bash
# Where a GPU exists: builds the tree with the CUDA backend, runs the GPU tests (ctest -R '^gpu\.': kernels vs the
# CPU backend, plan GPU runs vs CPU runs; with cuda.cudnn_paths: which kernel cases take cuDNN; cuda.run_cuda_bundle
# and cuda.profile_cuda: cleave run and cleave profile --backend cuda on GPUs), then times one training step of the
# MLP, CNN, tiny LSTM and tiny Transformer bundles (data plan; 1 rank, and 2 ranks: on 2 GPUs where 2 are visible, else
# sharing one): the median step the ranks time themselves over 20 steps after a warm-up, on the GPU with CUDA graphs
# (the default), on the GPU without them (--cuda-graphs off: the losses must be the same bits), and on the CPUs; the
# CNN once more with --precision tf32 (its losses within 1e-2 of fp32's), bf16 (its CPU run's within 1e-3) and on 2
# ranks with --precision fp16 (loss scaling skips the same steps as on the CPUs, losses within 1e-3). Last, tests/gpu/bench_vs_torch.sh at real
# sizes against torch eager (its bundles build while the tests run).
# Usage: tests/gpu/run.sh [--prebuilt] [BUILD_DIR]   (default build-gpu in the source tree; CUDA_ARCHS=90 to build
# one arch; GPU_RUN_PARTS, default "tests small bench", picks parts: the GPU tests, the small models, the real sizes).
# --prebuilt: BUILD_DIR is a finished CUDA build (tests/gpu/prebuilt.sh unpacked it on a machine without Cleave's
# build dependencies): no configure, no build, and the models exported there are used.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
prebuilt=0
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt=1
  shift
fi
BUILD=${1:-$SRC/build-gpu}
wants() { [[ " ${GPU_RUN_PARTS:-tests small bench} " == *" $1 "* ]]; }
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $prebuilt -eq 1 ]; then
  cp "$BUILD"/gpu_models/* "$tmp"/
else
  /usr/bin/python3 "$SRC/tests/cuda/export_models.py" "$SRC" "$tmp" > /dev/null 2>&1
fi
if wants bench; then
  # The real-size bundles build on the CPUs while the tests run.
  BENCH_DIR=$tmp/bench CUDA_ARCHS=${archs%%;*} "$SRC/tests/gpu/bench_vs_torch.sh" "$BUILD" build \
    > "$tmp/bench_build.log" 2>&1 &
  bench_build=$!
fi

# The tests' verdict is the exit status; the step times below are printed whatever it is.
status=0
if wants tests; then
  ctest --test-dir "$BUILD" -j4 -R '^(gpu\.|cuda\.(cudnn_paths|run_cuda_bundle|profile_cuda))' --output-on-failure ||
    status=1
fi
# The small models (the block below, to the matching fi, is not indented: it holds Python heredocs).
if wants small; then
# 2 ranks: on their own GPUs (NCCL) where 2 are visible, else sharing one (MPI through host memory).
# The step time the rank programs measure themselves (CLEAVE_PROFILE, rt.h: the median step after a warm-up one,
# wall clock after a device synchronize), on the GPU with and without CUDA graphs and, for scale, on this machine's
# CPUs from the same bundle.
step_ms() { sed -n 's/.*profile: step median \([0-9.e+-]*\) s.*/\1/p' "$1" | awk '{printf "%.3f", $1 * 1000}'; }
cases="mlp 1 fp32
mlp 2 fp32
cnn 1 fp32
cnn 2 fp32
cnn 1 tf32
cnn 1 bf16
cnn 2 fp16
lstm 1 fp32
lstm 2 fp32
transformer 1 fp32
transformer 2 fp32"
data_of() {
  case $1 in
    mlp) echo "x=$SRC/models/data/digits_flat_train_x.npy y=$SRC/models/data/digits_train_y.npy" ;;
    cnn) echo "x=$SRC/models/data/digits_train_x.npy y=$SRC/models/data/digits_train_y.npy" ;;
    lstm) echo "x=$tmp/lstm_x.npy y=$tmp/lstm_y.npy" ;;
    transformer) echo "x=$tmp/tf_x.npy y=$tmp/tf_y.npy" ;;
  esac
}
build_case() {
  local model=$1 ranks=$2 prec=$3 onnx batch
  case $model in
    mlp | cnn) onnx=$SRC/models/$model.onnx; batch=16 ;;
    lstm) onnx=$tmp/lstm.onnx; batch=4 ;;
    transformer) onnx=$tmp/transformer.onnx; batch=8 ;;
  esac
  local b=$tmp/${model}_${ranks}_$prec scaling=()
  # fp16: a first loss scale so large that the first steps overflow and are skipped, on the GPU as on the CPUs.
  [ "$prec" = fp16 ] && scaling=(--loss-scale 16777216 --loss-scale-growth-interval 3)
  "$BUILD/tools/cleave" compile "$onnx" --devices "$ranks" --planner data --batch $batch --optimizer sgd --lr 0.1 \
    --backend cuda --precision "$prec" "${scaling[@]}" -o "$b" 2> /dev/null
  cmake -S "$b" -B "$b/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_RUNTIME_DIR="$BUILD/runtime" \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs" > /dev/null
  cmake -S "$b" -B "$b/build_cpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_BACKEND=cpu \
    -DCLEAVE_RUNTIME_DIR="$BUILD/runtime" > /dev/null
  ninja -C "$b/build" > /dev/null
  ninja -C "$b/build_cpu" > /dev/null
}
pids=()
while read -r model ranks prec <&3; do
  build_case "$model" "$ranks" "$prec" &
  pids+=($!)
done 3<<< "$cases"
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: a small-model bundle did not build"; status=1; }; done
printf '%-12s %5s %5s %12s %12s %12s %12s\n' model ranks prec "gpu ms/step" "no graphs" "cpu ms/step" "gpu run s"
# (The cases come on descriptor 3: mpirun reads standard input.)
while read -r model ranks prec <&3; do
  b=$tmp/${model}_${ranks}_$prec
  data=$(data_of "$model")
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  CLEAVE_PROFILE=$b/gpu "$b/launch/mpirun.sh" "$b/build" --steps 21 $data > "$b/losses.txt" 2> "$b/gpu.err" ||
    { echo "FAIL: $model $ranks $prec: the GPU run failed"; grep -v '^ *$' "$b/gpu.err" | tail -4; status=1; }
  t1=$(date +%s.%N)
  # shellcheck disable=SC2086
  CLEAVE_PROFILE=$b/eager "$b/launch/mpirun.sh" "$b/build" --steps 21 --cuda-graphs off $data > "$b/losses_eager.txt" \
    2> "$b/eager.err" || { echo "FAIL: $model $ranks $prec: the GPU run without graphs failed"; status=1; }
  # shellcheck disable=SC2086
  CLEAVE_PROFILE=$b/cpu "$b/launch/mpirun.sh" "$b/build_cpu" --steps 21 $data > "$b/losses_cpu.txt" 2> "$b/cpu.err" ||
    { echo "FAIL: $model $ranks $prec: the CPU run failed"; status=1; }
  printf '%-12s %5d %5s %12s %12s %12s %12.2f   (last: %s)\n' "$model" "$ranks" "$prec" "$(step_ms "$b/gpu.err")" \
    "$(step_ms "$b/eager.err")" "$(step_ms "$b/cpu.err")" "$(python3 -c "print($t1 - $t0)")" \
    "$(tail -1 "$b/losses.txt")"
  grep -h "CUDA graphs" "$b/gpu.err" | head -1 | sed 's/^/    /' || true
  cmp -s "$b/losses.txt" "$b/losses_eager.txt" ||
    { echo "FAIL: $model $ranks $prec: losses with CUDA graphs differ from those without"; status=1; }
done 3<<< "$cases"
# Replays that feed shuffled samples, and a learning rate that steps (the step is captured again): the same bits as
# running every step as it comes.
b=$tmp/mlp_1_fp32
knobs="--steps 7 --shuffle 3 --lr-schedule step --step-size 2 --gamma 0.5 $(data_of mlp)"
# shellcheck disable=SC2086
"$b/launch/mpirun.sh" "$b/build" $knobs > "$b/knobs.txt" 2> "$b/knobs.err" || status=1
# shellcheck disable=SC2086
"$b/launch/mpirun.sh" "$b/build" $knobs --cuda-graphs off > "$b/knobs_eager.txt" 2> /dev/null || status=1
if cmp -s "$b/knobs.txt" "$b/knobs_eager.txt" && [ "$(grep -c '^step ' "$b/knobs.txt")" = 7 ]; then
  echo "ok: mlp with --shuffle and a stepped lr: CUDA graph replays equal eager steps ($(tail -1 "$b/knobs.txt"))"
else
  echo "FAIL: mlp with --shuffle and a stepped lr: CUDA graph replays differ from eager steps"
  tail -3 "$b/knobs.err"
  status=1
fi
if ! python3 - "$tmp/cnn_1_tf32/losses.txt" "$tmp/cnn_1_fp32/losses.txt" <<'PY'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
b = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step ")]
worst = max(abs(p - q) / abs(q) for p, q in zip(a, b))
print(f"cnn tf32 vs fp32 over {len(a)} steps: largest relative loss difference {worst:.2e}")
assert len(a) == len(b) == 21 and worst <= 1e-2
PY
then
  echo "FAIL: tf32 losses are not within 1e-2 of fp32's"
  status=1
fi

# fp16 (float16 rounding, loss scaling's skipped steps): the GPU run skips the steps the CPU run skips, with the same
# scales, and its losses are the CPU run's within float16's precision.
if ! python3 - "$tmp/cnn_2_fp16/losses.txt" "$tmp/cnn_2_fp16/losses_cpu.txt" <<'PY'
import sys
def lines(path):
    return [l.split() for l in open(path) if l.startswith("step ")]
gpu, cpu = lines(sys.argv[1]), lines(sys.argv[2])
worst = max(abs(float(g[3]) - float(c[3])) / max(1.0, abs(float(c[3]))) for g, c in zip(gpu, cpu))
skipped = sum(l[-1] == "skipped" for l in cpu)
print(f"cnn fp16 on 2 ranks, gpu vs cpu over {len(gpu)} steps: {skipped} skipped on the CPUs, largest relative loss "
      f"difference {worst:.2e}")
assert len(gpu) == len(cpu) == 21 and [g[4:] for g in gpu] == [c[4:] for c in cpu] and skipped > 0 and worst <= 1e-3
PY
then
  echo "FAIL: fp16 GPU run does not follow the CPU run"
  status=1
fi

# bf16: the GPU multiplies the rounded operands on bf16 tensor cores (exact products, float32 sums), the CPUs in
# float32: only the order of the sums differs, so the losses agree to far better than bfloat16's precision.
if ! python3 - "$tmp/cnn_1_bf16/losses.txt" "$tmp/cnn_1_bf16/losses_cpu.txt" <<'PY'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
b = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step ")]
worst = max(abs(p - q) / max(1.0, abs(q)) for p, q in zip(a, b))
print(f"cnn bf16, gpu (bf16 tensor cores) vs cpu over {len(a)} steps: largest relative loss difference {worst:.2e}")
assert len(a) == len(b) == 21 and worst <= 1e-3
PY
then
  echo "FAIL: bf16 GPU run does not follow the CPU run"
  status=1
fi

fi  # small

if wants bench; then
  wait $bench_build || { echo "FAIL: the real-size bundles did not build"; cat "$tmp/bench_build.log"; status=1; }
  tail -1 "$tmp/bench_build.log"
  BENCH_DIR=$tmp/bench "$SRC/tests/gpu/bench_vs_torch.sh" "$BUILD" run || status=1
fi
exit $status
