#!/usr/bin/env bash
# `cleave explain`, `cleave diff` (--fail-on) and `cleave plan --check` / --topology: golden output, determinism,
# and one-line errors for bad input. Usage: explain_diff.sh CLEAVE_BINARY SOURCE_DIR
#
# Where the golden numbers come from (MLP 64-32-10, batch 16, 2 devices, k80x8):
#  - mlp_col_2 (tests/codegen/plans): comm_bytes 2048 = the Relu output [16,32], split by column, all-gathered so
#    the replicated second Gemm can read it whole: each rank sends its 16x16 f32 block, 2 x 1024 bytes; nothing else
#    moves (the gradients come out split where their params live).
#  - the data plan (tests/planner/golden/mlp_data_2.plan): comm_bytes 19304 = every gradient all-reduced by ring over
#    2 ranks, each sending 2(p-1)/p = 1x the param bytes, 4 x (32*64 + 32 + 10*32 + 10) = 9640, plus the loss kernels'
#    three one-float syncs (12 bytes), on each of the 2 ranks.
#  - FLOPs per op: the op descriptions' count (`cleave describe`), summed over the op's devices.
#  - peak_memory_bytes [16024, 16024] (mlp_col_2) and 22232 (data): the max over instructions of the bytes of the
#    buffers codegen's programs hold live (tests/planner/cost_model_test.cpp computes that from the lowered programs
#    and checks the estimate equals it on these plans; the arena adds alignment and fragmentation).
#  Seconds are the cost model's own (alpha-beta and roofline from the topology's numbers).
set -eu
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mlp="$src/models/mlp.onnx"
data_plan="$src/tests/planner/golden/mlp_data_2.plan"
col_plan="$src/tests/codegen/plans/mlp_col_2.plan"
golden="$src/tests/cli/golden"

# explain: golden table and totals; byte-identical across runs; json carries the same totals.
"$cleave" explain "$mlp" --batch 16 --plan "$col_plan" >"$work/explain.txt"
diff "$work/explain.txt" "$golden/explain_mlp_col_2.txt" || fail "explain output differs from its golden file"
"$cleave" explain "$mlp" --batch 16 --planner data --devices 2 >"$work/data.txt"
grep -qx 'comm_bytes 19304' "$work/data.txt" || fail "data plan comm_bytes: $(grep '^comm_bytes ' "$work/data.txt")"
"$cleave" explain "$mlp" --batch 16 --plan "$data_plan" >"$work/data2.txt"
cmp "$work/data.txt" "$work/data2.txt" || fail "explain of the data planner and of its golden plan file differ"
"$cleave" explain "$mlp" --batch 16 --plan "$col_plan" --format json >"$work/a.json"
"$cleave" explain "$mlp" --batch 16 --plan "$col_plan" --format json >"$work/b.json"
cmp "$work/a.json" "$work/b.json" || fail "two json runs differ"
python3 - "$work/a.json" <<'PY' || fail "json totals"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["comm_bytes"] == 2048 and r["comm_bytes_per_level"] == {"pcie": 2048}, r["comm_bytes"]
assert r["peak_memory_bytes"] == [16024, 16024], r["peak_memory_bytes"]
assert sum(o["comm_bytes"] for o in r["ops"]) + r["end_comm_bytes"] == r["comm_bytes"]
assert sum(d["flops"] for d in r["per_device"]) == r["flops"] == sum(o["flops"] for o in r["ops"])
PY
# Another topology moves the same bytes in other seconds.
"$cleave" explain "$mlp" --batch 16 --plan "$col_plan" --topology "$src/models/topologies/h100x8.json" >"$work/h.txt"
grep -qx 'comm_bytes.nvlink 2048' "$work/h.txt" || fail "h100x8: $(grep comm_bytes "$work/h.txt")"

# diff: the changes and the totals' deltas (golden); --fail-on passes and fails as the deltas say.
"$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 >"$work/diff.txt"
diff "$work/diff.txt" "$golden/diff_mlp_data_col_2.txt" || fail "diff output differs from its golden file"
"$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 --fail-on comm=+5%,memory=+0%,time=+5% >/dev/null \
  || fail "a plan that shrinks every total failed --fail-on"
"$cleave" diff "$data_plan" "$data_plan" --model "$mlp" --batch 16 --fail-on comm=+0%,memory=+0%,time=+0% >"$work/same" \
  || fail "identical plans failed --fail-on +0%"
grep -qx '0 changes' "$work/same" || fail "identical plans: $(head -1 "$work/same")"
rc=0
"$cleave" diff "$col_plan" "$data_plan" --model "$mlp" --batch 16 --fail-on comm=+5%,time=+2000% >/dev/null \
  2>"$work/err" || rc=$?
[ "$rc" = 1 ] || fail "comm growth of +842% with --fail-on comm=+5%: exit $rc, not 1"
[ "$(cat "$work/err")" = 'error: --fail-on: comm_bytes grew +842.58% (limit +5.00%)' ] || fail "$(cat "$work/err")"
if "$cleave" diff "$col_plan" "$data_plan" --model "$mlp" --batch 16 --fail-on comm=+900%,memory=+10% >/dev/null \
    2>"$work/err"; then
  fail "memory growth of +39% passed --fail-on memory=+10%"
fi
[ "$(cat "$work/err")" = 'error: --fail-on: peak_memory_bytes grew +38.74% (limit +10.00%)' ] || fail "$(cat "$work/err")"

# plan --check: the planner's output against a committed plan.
"$cleave" plan "$mlp" --devices 2 --batch 16 --check "$data_plan" || fail "--check rejected the golden plan"
sed 's/^op \/net\/net.0\/Gemm devices=\[0,1\] mesh=\[2\] \[m\]/op \/net\/net.0\/Gemm devices=[0,1] mesh=[2] [n]/' \
  "$data_plan" >"$work/edited.plan"
! cmp -s "$work/edited.plan" "$data_plan" || fail "the edit did not change the plan"
line=$(grep -n '^op /net/net.0/Gemm ' "$work/edited.plan" | cut -d: -f1)
if "$cleave" plan "$mlp" --devices 2 --batch 16 --check "$work/edited.plan" >"$work/out" 2>"$work/err"; then
  fail "--check accepted an edited plan"
fi
[ "$(cat "$work/err")" = "error: --check: the data plan differs from $work/edited.plan at line $line (regenerate it with -o)" ] \
  || fail "$(cat "$work/err")"
[ ! -s "$work/out" ] || fail "--check printed the plan"

# compile --topology prints the same prediction as explain.
"$cleave" compile "$mlp" --batch 16 --plan "$col_plan" --topology k80x8 -o "$work/bundle" 2>"$work/err"
step=$(awk '$1 == "predicted_step_seconds" {print $2}' "$work/explain.txt")
grep -qx "predicted on k80x8: step $step s, comm 2048 bytes, peak memory 16024 bytes per device" "$work/err" \
  || fail "compile: $(cat "$work/err")"

# Bad input: one error line each.
expect_error() {  # expect_error EXPECTED_LINE COMMAND...
  local want=$1
  shift
  if "$@" >/dev/null 2>"$work/err"; then fail "accepted: $*"; fi
  [ "$(wc -l <"$work/err")" = 1 ] || fail "not one line: $(cat "$work/err")"
  [ "$(cat "$work/err")" = "$want" ] || fail "got: $(cat "$work/err") want: $want"
}
printf '{"name": "t", "device": {"name": "d", "memory_bytes": 1, "peak_flops": 1e9}, "levels": []}' >"$work/t.json"
expect_error "error: $work/t.json: device.memory_bandwidth: missing" \
  "$cleave" explain "$mlp" --batch 16 --topology "$work/t.json"
expect_error "error: $work/t.json: device.memory_bandwidth: missing" \
  "$cleave" plan "$mlp" --batch 16 --topology "$work/t.json"
printf '{"name": "t", "device": {"name": "d", "memory_bytes": 1, "peak_flops": 1e9, "memory_bandwidth": 1e9, "read_latency": -1}, "levels": [{"name": "l", "count": 2, "bandwidth": 1e9, "latency": 0}]}' >"$work/r.json"
expect_error "error: $work/r.json: device.read_latency: must be a number >= 0" \
  "$cleave" simulate "$mlp" --batch 16 --topology "$work/r.json"
expect_error "error: $work/t.json: device.memory_bandwidth: missing" \
  "$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 --topology "$work/t.json"
expect_error "error: $work/t.json: device.memory_bandwidth: missing" \
  "$cleave" compile "$mlp" --batch 16 --topology "$work/t.json" -o "$work/bundle2"
[ ! -e "$work/bundle2" ] || fail "compile with a bad topology wrote a bundle"
expect_error 'error: unknown topology "dgx" (presets: h100x8, k80x8, p100-4x4, v100-2x8; or a .json file)' \
  "$cleave" explain "$mlp" --batch 16 --topology dgx
expect_error "error: $work/none.json: cannot open topology file" \
  "$cleave" explain "$mlp" --batch 16 --topology "$work/none.json"
expect_error 'error: the plan uses 16 devices, topology k80x8 has 8' \
  "$cleave" explain "$mlp" --batch 16 --planner data --devices 16
expect_error 'error: --devices 16: topology k80x8 has 8 devices' \
  "$cleave" plan "$mlp" --batch 16 --devices 16 --topology k80x8
expect_error 'error: --fail-on: "comm=5": the limit must be a percentage ending in %, e.g. +5%' \
  "$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 --fail-on comm=5
expect_error 'error: --fail-on: "speed=+5%": expected comm|memory|time=<percent>%, e.g. comm=+5%' \
  "$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 --fail-on speed=+5%
expect_error 'error: --fail-on: "time=+x%": "+x" is not a number' \
  "$cleave" diff "$data_plan" "$col_plan" --model "$mlp" --batch 16 --fail-on time=+x%
expect_error "error: $work/none.plan: cannot open plan file" \
  "$cleave" diff "$data_plan" "$work/none.plan" --model "$mlp" --batch 16
expect_error "error: --check: cannot open $work/none.plan" \
  "$cleave" plan "$mlp" --devices 2 --batch 16 --check "$work/none.plan"
echo "ok cleave explain/diff/plan --check: golden, determinism, thresholds, errors"
