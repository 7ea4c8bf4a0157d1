#!/usr/bin/env bash
# The main job: compile the bundled CNN (models/cnn.onnx, BatchNorm in training mode) for 2 CPU ranks with a plan
# found by TensorOpt's frontier search, train it under mpirun on the 8x8 handwritten digits (printing the loss per
# step), then report its accuracy on the 297 held-back digits. Before training it prints what the cost model
# (`cleave explain`, on the k80x8 topology) says of three plans: data parallelism; the frontier's fastest plan, which
# on so small a model replicates every op (no communication, twice the memory); and the frontier's fastest plan that
# fits in the data-parallel plan's memory, the one it trains. Builds only what it runs: the cleave CLI and the CPU
# runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CLEAVE_BUILD_DIR:-build}
bash tools/setup.sh >&2
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j "$(nproc)" cleave cleave_rt_cpu >&2
cleave=$build/tools/cleave
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
train=(--batch 16 --optimizer adam --lr 0.01)

plan() {  # NAME PLANNER-FLAGS...: writes $out/NAME.plan and its report $out/NAME.explain
  local name=$1
  shift
  "$cleave" plan models/cnn.onnx --devices 2 "$@" "${train[@]}" -o "$out/$name.plan" 2>/dev/null
  "$cleave" explain models/cnn.onnx --plan "$out/$name.plan" "${train[@]}" >"$out/$name.explain"
}
# One row from explain's totals (comm_bytes sent per step over all devices, peak_memory_bytes per device,
# predicted_step_seconds) and the plan's op lines (ops whose config splits a loop variable).
row() {
  awk -v title="$2" '
    FNR == NR && $1 == "op" { ++ops; if ($NF != "[-]") ++nsplit }
    FNR != NR && $1 == "comm_bytes" { comm = $2 }
    FNR != NR && $1 == "peak_memory_bytes" { mem = $2; for (i = 3; i <= NF; ++i) mem = mem "/" $i }
    FNR != NR && $1 == "predicted_step_seconds" { step = $2 }
    END { printf "%-36s %10s  %-15s %-12s %d of %d\n", title, comm, mem, step, nsplit, ops }' \
    "$out/$1.plan" "$out/$1.explain"
}
max_peak() { awk '$1 == "peak_memory_bytes" { m = $2; for (i = 3; i <= NF; ++i) if ($i > m) m = $i; print m }' "$1"; }

plan data --planner data
plan fastest --planner frontier
plan fitting --planner frontier --memory-limit "$(max_peak "$out/data.explain")"
echo "CNN, batch 16, 2 devices of k80x8: what cleave explain predicts per training step"
printf '%-36s %10s  %-15s %-12s %s\n' plan comm_bytes peak_memory predicted_s ops_split
row data "data parallel"
row fastest "frontier, fastest"
row fitting "frontier, fastest in data's memory"
echo "training the last one"

"$cleave" compile models/cnn.onnx --plan "$out/fitting.plan" "${train[@]}" -o "$out/bundle"
"$cleave" run "$out/bundle" --runtime-dir "$build/runtime" \
  --data x=models/data/digits_train_x.npy,y=models/data/digits_train_y.npy --steps 400 \
  --save-model "$out/trained.onnx"
"$cleave" test "$out/trained.onnx" --batch 16 \
  --data x=models/data/digits_test_x.npy,y=models/data/digits_test_y.npy
