#!/usr/bin/env bash
# `cleave profile --backend cuda`. Everywhere: the collective benchmark builds for cuda (NCCL) against the prebuilt
# libcleave_rt_cuda, and with no GPU visible (CUDA_VISIBLE_DEVICES empty) the command ends with one error line, a
# non-zero exit and no profile. With a GPU: the MLP's data plan on min(2, GPUs) ranks is profiled on the GPUs; the
# profile says cuda, has a positive time for every op of the plan, curves of every collective over 2 ranks at
# every size (with 2 GPUs) and of the copies and data reads; explain --profile counts every share as measured; and
# asking for more ranks than GPUs is one error line.
# Usage: profile_cuda.sh CLEAVE SOURCE_DIR CUDA_RUNTIME_LIB_DIR NVCC
set -u
cleave=$1 src=$2 rtdir=$3 nvcc=$4
# One arch, the first GPU's (90 without one), unless the caller chose: the bundles' and the benchmark's builds read
# CUDAARCHS.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
export PATH="$(dirname "$nvcc"):$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export CUDAARCHS=${CUDAARCHS:-${arch:-90}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; return 1; fi; echo "ok: $1"; }
mlp=$src/models/mlp.onnx

cmake -S "$src/runtime/bench" -B "$tmp/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_BACKEND=cuda \
  -DCLEAVE_RUNTIME_DIR="$rtdir" >"$tmp/bench.log" 2>&1 &&
  cmake --build "$tmp/bench" >>"$tmp/bench.log" 2>&1
check "the collective benchmark builds for cuda and links NCCL" \
  "[ -x '$tmp/bench/comm_bench' ] && ldd '$tmp/bench/comm_bench' | grep -q libnccl" || tail -20 "$tmp/bench.log"

CUDA_VISIBLE_DEVICES= "$cleave" profile "$mlp" --backend cuda --batch 8 -o "$tmp/none.json" \
  --runtime-dir "$rtdir" >"$tmp/none.out" 2>"$tmp/none.err"
code=$?
check "no GPU visible: exit 1, one error line, no profile" \
  "[ $code -eq 1 ] && [ \"\$(cat '$tmp/none.err')\" = 'error: --backend cuda: no GPU is visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES)' ] && [ ! -e '$tmp/none.json' ]" ||
  cat "$tmp/none.err"

# As cleave counts them: nvidia-smi's GPUs, capped by CUDA_VISIBLE_DEVICES's entries where it is set.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
gpus=${gpus:-0}
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  entries=0
  [ -n "$CUDA_VISIBLE_DEVICES" ] && entries=$(($(tr -cd , <<<"$CUDA_VISIBLE_DEVICES" | wc -c) + 1))
  [ "$entries" -lt "$gpus" ] && gpus=$entries
fi
if [ "$gpus" -lt 1 ]; then
  echo "no GPU here: the profiling run on GPUs was not tested"
  exit $fail
fi
ranks=$((gpus < 2 ? gpus : 2))
"$cleave" profile "$mlp" --backend cuda --devices $((gpus + 1)) --batch 8 -o "$tmp/over.json" --runtime-dir "$rtdir" \
  2>"$tmp/over.err"
code=$?
want="error: --devices $((gpus + 1)): --backend cuda runs one rank per GPU, and $gpus GPU$([ "$gpus" -eq 1 ] && echo ' is' || echo 's are') visible"
check "more ranks than GPUs: one error line" "[ $code -eq 1 ] && [ \"\$(cat '$tmp/over.err')\" = '$want' ]" || cat "$tmp/over.err"

"$cleave" plan "$mlp" --devices $ranks --batch 8 --planner data -o "$tmp/data.plan" 2>/dev/null
"$cleave" profile "$mlp" --backend cuda --devices $ranks --batch 8 --plan "$tmp/data.plan" -o "$tmp/p.json" \
  --steps 5 --max-bytes 65536 --reps 3 --work-dir "$tmp/work" --runtime-dir "$rtdir" 2>"$tmp/profile.err"
code=$?
check "cleave profile --backend cuda succeeds on $ranks GPU(s)" "[ $code -eq 0 ]" || tail -20 "$tmp/profile.err"
copy_sites=$(cat "$tmp"/work/*/src/*.c* 2>/dev/null | grep -c 'ProfileSite::copy' || true)
check "the profile is a cuda profile of every op, collective and local statement" "/usr/bin/python3 - '$tmp/p.json' '$tmp/data.plan' $ranks ${copy_sites:-0} <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ranks = int(sys.argv[3])
assert p['backend'] == 'cuda', p['backend']
ops = [l.split()[1] for l in open(sys.argv[2]) if l.startswith('op ')]
missing = [o for o in ops if not p['compute'].get(o)]
assert ops and not missing, 'ops without a measured time: %s' % missing[:5]
assert all(v > 0 for o in p['compute'].values() for v in o.values())
if ranks == 2:
    sizes = [4 << i for i in range(15)]
    for k in ['all_gather', 'all_reduce', 'all_to_all', 'reduce_scatter', 'send_recv']:
        curve = p['collectives'][k]['2']
        assert [x for x, _ in curve] == sizes and all(t > 0 for _, t in curve), (k, curve)
        print(k, 'over 2 GPUs: %.3g s at 4 B, %.3g s at 64 KB' % (curve[0][1], curve[-1][1]))
# Data reads time every run; copies only where the rank programs have copy sites (a 1-rank MLP has none).
kinds = ['copy', 'data'] if int(sys.argv[4]) > 0 else ['data']
for k in kinds:
    assert p['statements'].get(k) and all(t > 0 for _, t in p['statements'][k]), k
print('step %.3g s on %d GPU(s)' % (p['plans'][0]['step_seconds'], ranks))
PY"
"$cleave" explain "$mlp" --batch 8 --plan "$tmp/data.plan" --format json --profile "$tmp/p.json" >"$tmp/meas.json" \
  2>/dev/null
check "explain --profile measures every share from the cuda profile" "/usr/bin/python3 - '$tmp/meas.json' $ranks <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
n, ranks = len(m['ops']), int(sys.argv[2])
assert m['profile']['measured_op_shares'] == ranks * n and m['profile']['roofline_op_shares'] == 0, m['profile']
PY"
exit $fail
