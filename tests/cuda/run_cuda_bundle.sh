#!/usr/bin/env bash
# `cleave run` on a bundle compiled with --backend cuda configures it for cuda (CLEAVE_BACKEND=cuda, nvcc, the prebuilt
# libcleave_rt_cuda) and launches it under mpirun. With a GPU the run must equal `cleave eval` (losses within relative
# 1e-4: cuBLAS sums in another order than the CPU); without one every rank must fail at start-up with one message
# naming the rank and the CUDA call (in the run's log), and `cleave run` must end with one error line that names them
# and a non-zero exit, not hang.
# Usage: run_cuda_bundle.sh CLEAVE SOURCE_DIR CUDA_RUNTIME_LIB_DIR NVCC
set -u
cleave=$1 src=$2 rtdir=$3 nvcc=$4
export PATH="$(dirname "$nvcc"):$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="x=$src/models/data/digits_flat_train_x.npy,y=$src/models/data/digits_train_y.npy"
# Two ranks, one GPU each: fewer where the machine has only one GPU.
ranks=2
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${gpus:-0}" -eq 1 ] && ranks=1
"$cleave" compile "$src/models/mlp.onnx" --devices "$ranks" --batch 16 --backend cuda -o "$work/b" 2>/dev/null ||
  { echo "FAIL: compile --backend cuda"; exit 1; }
timeout 600 "$cleave" run "$work/b" --data "$data" --steps 2 --build-type Debug --runtime-dir "$rtdir" \
  >"$work/out" 2>"$work/err"
rc=$?
grep -q '^CLEAVE_BACKEND:STRING=cuda$' "$work/b/build/CMakeCache.txt" ||
  { echo "FAIL: the bundle was not configured for cuda"; exit 1; }
if nvidia-smi -L >/dev/null 2>&1; then
  [ "$rc" -eq 0 ] || { echo "FAIL: cleave run exit $rc on a GPU machine"; tail -20 "$work/err"; exit 1; }
  "$cleave" eval "$src/models/mlp.onnx" --data "$data" --batch 16 --steps 2 >"$work/eval" 2>/dev/null
  python3 - "$work/out" "$work/eval" <<'PY' || exit 1
import sys
def losses(p): return [float(l.split()[3]) for l in open(p) if l.startswith("step ")]
got, ref = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref)) if len(got) == len(ref) == 2 else float("inf")
print(f"GPU run: losses {got} vs eval {ref}, worst rel {worst:.3g}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
  echo "ok: the cuda bundle's run equals cleave eval"
else
  [ "$rc" -ne 0 ] || { echo "FAIL: no GPU here, yet cleave run succeeded"; exit 1; }
  log=$work/b/build/run.log
  grep -q '^cleave rank [01]: cuda[A-Za-z]* failed at ' "$log" ||
    { echo "FAIL: no rank named the failing CUDA call in the log"; tail -20 "$log"; exit 1; }
  [ "$(grep -c '^error:' "$work/err")" -eq 1 ] &&
    grep -Eq "^error: rank [01]: cuda[A-Za-z]* failed at .*; log: $log\$" "$work/err" ||
    { echo "FAIL: not one error line naming the rank and the CUDA call:"; grep '^error' "$work/err"; exit 1; }
  echo "ok (no GPU): built for cuda, then: $(grep '^error:' "$work/err")"
fi
