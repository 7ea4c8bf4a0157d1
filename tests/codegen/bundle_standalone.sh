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
# Backends: cuda is refused with a reason while the bundled runtime has no cuda/ backend; unknown names are refused.
for backend in cuda tpu; do
  if cmake -S "$tmp/shipped" -B "$tmp/build-$backend" -G Ninja -DCLEAVE_BACKEND=$backend > "$tmp/$backend.txt" 2>&1; then
    echo "FAIL: CLEAVE_BACKEND=$backend configured"; exit 1
  fi
done
grep -q "CLEAVE_BACKEND=cuda: this bundle's runtime has no cuda backend" "$tmp/cuda.txt" || { cat "$tmp/cuda.txt"; exit 1; }
grep -q "CLEAVE_BACKEND=tpu: expected cpu or cuda" "$tmp/tpu.txt" || { cat "$tmp/tpu.txt"; exit 1; }
echo "ok: standalone bundle built with its own runtime and trained like cleave eval"
