#!/bin/bash
# A bundle builds on its own (its runtime/ copy, no compiler tree) and its launch/mpirun.sh trains like cleave eval.
# Usage: bundle_standalone.sh CLEAVE SOURCE_DIR
set -euo pipefail
CLEAVE=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
x=$SRC/models/data/digits_flat_train_x.npy
y=$SRC/models/data/digits_train_y.npy
"$CLEAVE" compile "$SRC/models/mlp.onnx" --devices 2 --planner data --batch 16 --optimizer sgd --lr 0.1 -o "$tmp/bundle" 2>/dev/null
# Move it away from where it was written, as a user shipping it to a cluster would.
mv "$tmp/bundle" "$tmp/shipped"
cmake -S "$tmp/shipped" -B "$tmp/build" -G Ninja -DCLEAVE_BACKEND=cpu >/dev/null
ninja -C "$tmp/build" -j2 >/dev/null
"$tmp/shipped/launch/mpirun.sh" "$tmp/build" --steps 3 x="$x" y="$y" > "$tmp/run.txt"
"$CLEAVE" eval "$SRC/models/mlp.onnx" --data "x=$x,y=$y" --batch 16 --steps 3 --optimizer sgd --lr 0.1 > "$tmp/eval.txt"
if ! /usr/bin/python3 - "$tmp/run.txt" "$tmp/eval.txt" <<'PY'
import sys
a = [float(l.split()[3]) for l in open(sys.argv[1]) if l.startswith("step ")]
b = [float(l.split()[3]) for l in open(sys.argv[2]) if l.startswith("step ")]
assert len(a) == len(b) == 3, (a, b)
assert all(abs(p - q) <= 1e-5 * abs(q) for p, q in zip(a, b)), (a, b)
PY
then
  echo "FAIL: standalone bundle losses differ"; cat "$tmp/run.txt" "$tmp/eval.txt"; exit 1
fi
# Backends: cuda configures where nvcc exists (else it is refused naming nvcc), and is refused with a reason when the
# bundled runtime lacks its cuda/ backend; unknown names are refused.
if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cmake -S "$tmp/shipped" -B "$tmp/build-cuda" -G Ninja -DCLEAVE_BACKEND=cuda -DCMAKE_CUDA_ARCHITECTURES=80 \
    > "$tmp/cuda.txt" 2>&1 || { echo "FAIL: CLEAVE_BACKEND=cuda did not configure"; cat "$tmp/cuda.txt"; exit 1; }
else
  if cmake -S "$tmp/shipped" -B "$tmp/build-cuda" -G Ninja -DCLEAVE_BACKEND=cuda > "$tmp/cuda.txt" 2>&1; then
    echo "FAIL: CLEAVE_BACKEND=cuda configured without nvcc"; exit 1
  fi
  grep -q "CLEAVE_BACKEND=cuda: nvcc not found" "$tmp/cuda.txt" || { cat "$tmp/cuda.txt"; exit 1; }
fi
cp -r "$tmp/shipped" "$tmp/no_cuda"
rm -rf "$tmp/no_cuda/runtime/cuda"
if cmake -S "$tmp/no_cuda" -B "$tmp/build-no-cuda" -G Ninja -DCLEAVE_BACKEND=cuda > "$tmp/no_cuda.txt" 2>&1; then
  echo "FAIL: CLEAVE_BACKEND=cuda configured without runtime/cuda"; exit 1
fi
grep -q "CLEAVE_BACKEND=cuda: this runtime has no cuda backend" "$tmp/no_cuda.txt" || { cat "$tmp/no_cuda.txt"; exit 1; }
if cmake -S "$tmp/shipped" -B "$tmp/build-tpu" -G Ninja -DCLEAVE_BACKEND=tpu > "$tmp/tpu.txt" 2>&1; then
  echo "FAIL: CLEAVE_BACKEND=tpu configured"; exit 1
fi
grep -q "CLEAVE_BACKEND=tpu: expected cpu or cuda" "$tmp/tpu.txt" || { cat "$tmp/tpu.txt"; exit 1; }
echo "ok: standalone bundle built with its own runtime and trained like cleave eval"
