#!/bin/bash
# cleave compile: deterministic bundles, bundle layout, and errors for bad plans and splits codegen cannot lower.
# Usage: compile_cli.sh CLEAVE SOURCE_DIR
set -uo pipefail
CLEAVE=$1
SRC=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; return 1; fi; echo "ok: $1"; }

# Same inputs => byte-identical bundles (also across output directories).
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --planner data --batch 16 --optimizer adam --lr 0.01 -o "$tmp/a" 2>/dev/null
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --planner data --batch 16 --optimizer adam --lr 0.01 -o "$tmp/b" 2>/dev/null
check "two compiles are byte-identical" "diff -r '$tmp/a' '$tmp/b' >/dev/null"
for f in plan.txt manifest.json CMakeLists.txt src/ranks.cpp weights/ranks.bin \
         launch/mpirun.sh launch/slurm.sbatch runtime/CMakeLists.txt runtime/include/cleave/rt.h; do
  check "bundle has $f" "[ -f '$tmp/a/$f' ]"
done
# A data plan's ranks run the same statements: one program (src/ranks.cpp, executable ranks) runs as each, looking
# up its sample offset by rank. A random plan's ranks differ: a program per rank.
check "the data plan's ranks share one program" \
  "[ ! -e '$tmp/a/src/rank_0.cpp' ] && grep -q '\"program\": \"ranks\"' '$tmp/a/manifest.json' &&
   grep -q '^add_executable(ranks src/ranks.cpp)' '$tmp/a/CMakeLists.txt' && grep -q 'rank_v0\[rank_index\]' '$tmp/a/src/ranks.cpp' &&
   grep -q 'exec \"\$b/ranks\"' '$tmp/a/launch/mpirun.sh' && grep -q 'exec \"\$b/ranks\"' '$tmp/a/launch/slurm.sbatch'"
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --planner random --batch 16 -o "$tmp/random" 2>/dev/null
check "a random plan's ranks get a program each" \
  "[ -f '$tmp/random/src/rank_0.cpp' ] && [ -f '$tmp/random/src/rank_1.cpp' ] && [ ! -e '$tmp/random/src/ranks.cpp' ] &&
   grep -q '\"program\": \"rank_<r>\"' '$tmp/random/manifest.json' && grep -q 'exec \"\$b/rank_\$r\"' '$tmp/random/launch/mpirun.sh'"
# A data plan's ranks hold the same shards: one weights file for all (weights/ranks.bin, manifest "weights"); the
# random plan's ranks hold different ones: a file each.
check "one weights file for the data plan's ranks, one per rank for the random plan's" \
  "[ ! -e '$tmp/a/weights/rank_0.bin' ] && grep -q '\"weights\": \"ranks.bin\"' '$tmp/a/manifest.json' &&
   grep -q 'weights/ranks.bin' '$tmp/a/launch/mpirun.sh' && grep -q 'weights/ranks.bin' '$tmp/a/launch/slurm.sbatch' &&
   [ -f '$tmp/random/weights/rank_0.bin' ] && [ -f '$tmp/random/weights/rank_1.bin' ] && [ ! -e '$tmp/random/weights/ranks.bin' ] &&
   grep -q '\"weights\": \"rank_<r>.bin\"' '$tmp/random/manifest.json' && grep -q 'weights/rank_\$r.bin' '$tmp/random/launch/mpirun.sh'"
check "the launch scripts parse and are executable" \
  "sh -n '$tmp/a/launch/mpirun.sh' && sh -n '$tmp/a/launch/slurm.sbatch' && [ -x '$tmp/a/launch/slurm.sbatch' ]"
check "slurm.sbatch asks for one task per rank" "grep -qx '#SBATCH --ntasks=2' '$tmp/a/launch/slurm.sbatch'"
check "plan.txt is the data plan" \
  "\"$CLEAVE\" plan '$SRC/models/cnn.onnx' --devices 2 --planner data --batch 16 --optimizer adam --lr 0.01 | diff - '$tmp/a/plan.txt' >/dev/null"
# The same rank source must run where buffers are device memory (CLEAVE_BACKEND=cuda): bytes move only through rt::.
check "generated code never touches buffer bytes itself (memcpy/memset/[0])" \
  "! grep -En 'std::mem(cpy|set|move)|\\bb[0-9]+\\[' '$tmp/a/src/ranks.cpp' '$tmp/random/src/rank_0.cpp' '$tmp/random/src/rank_1.cpp'"
check "generated code names no build path" "! grep -rq '$tmp' '$tmp/a/src' '$tmp/a/CMakeLists.txt' '$tmp/a/launch'"
# The manifest's hashes are the FNV-1a-64 of the files.
check "manifest hashes match the files" "/usr/bin/python3 - '$tmp/a' <<'PY'
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, 'manifest.json')))
def fnv(b):
    h = 14695981039346656037
    for c in b:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return '%016x' % h
bad = [p for p, h in m['fnv1a64'].items() if fnv(open(os.path.join(d, p), 'rb').read()) != h]
files = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
assert not bad, bad
assert set(m['fnv1a64']) == set(files) - {'manifest.json'}, 'hashes do not cover every file'
assert m['ranks'] == 2 and len(m['per_rank']) == 2 and all(r['peak_memory_bytes'] > 0 for r in m['per_rank'])
PY"

# The manifest's prediction is the cost model's (`cleave explain` of the same plan): on k80x8 by default, on the
# --topology given otherwise.
"$CLEAVE" explain "$SRC/models/cnn.onnx" --planner data --devices 2 --batch 16 --optimizer adam --lr 0.01 \
  --format json >"$tmp/k80.json"
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --planner data --batch 16 --optimizer adam --lr 0.01 \
  --topology h100x8 -o "$tmp/h100" 2>/dev/null
"$CLEAVE" explain "$SRC/models/cnn.onnx" --planner data --devices 2 --batch 16 --optimizer adam --lr 0.01 \
  --topology h100x8 --format json >"$tmp/h100.json"
check "manifest carries the cost model's predicted step time and per-rank memory" "/usr/bin/python3 - '$tmp' <<'PY'
import json, os, sys
d = sys.argv[1]
for bundle, report, name in (('a', 'k80.json', 'k80x8'), ('h100', 'h100.json', 'h100x8')):
    m = json.load(open(os.path.join(d, bundle, 'manifest.json')))
    r = json.load(open(os.path.join(d, report)))
    assert m['topology'] == name == r['topology'], (m['topology'], r['topology'])
    assert m['predicted_step_seconds'] == r['predicted_step_seconds'], (m['predicted_step_seconds'], r)
    assert [x['predicted_peak_memory_bytes'] for x in m['per_rank']] == r['peak_memory_bytes']
PY"

# A plan for another model (unknown names) is refused, and nothing is left behind.
"$CLEAVE" plan "$SRC/models/mlp.onnx" --devices 2 --planner data --batch 16 -o "$tmp/mlp.plan" 2>/dev/null
out=$("$CLEAVE" compile "$SRC/models/cnn.onnx" --plan "$tmp/mlp.plan" --devices 2 --batch 16 -o "$tmp/bad" 2>&1)
rc=$?
check "foreign plan is refused (rc=$rc)" "[ $rc -ne 0 ] && [ $rc -ne 3 ]"
check "foreign plan error names a tensor or op" "echo \"\$out\" | grep -q '^error: .*\\(tensor\\|op\\)'"
check "nothing left after an error" "[ ! -e '$tmp/bad' ] && [ -z \"\$(ls '$tmp' | grep tmp)\" ]"

# A malformed plan file.
printf 'plan devices=2\nop what\n' > "$tmp/garbage.plan"
out=$("$CLEAVE" compile "$SRC/models/mlp.onnx" --plan "$tmp/garbage.plan" --devices 2 --batch 16 -o "$tmp/bad" 2>&1)
rc=$?
check "malformed plan is refused with its line (rc=$rc)" "[ $rc -ne 0 ] && echo \"\$out\" | grep -q 'garbage.plan:2'"

# A split that is a valid plan but that codegen cannot lower yet: a global average pool split on its reduced spatial
# var (a partial output of a kind lower.cpp does not all-reduce). A conv split on a spatial var compiles (halo rows,
# local pads; trained against 1 rank by hand_plans.sh).
"$CLEAVE" plan "$SRC/models/cnn.onnx" --devices 2 --planner data --batch 16 | sed \
  -e 's|^op /net/net.7/GlobalAveragePool devices=\[0,1\] mesh=\[2\] \[b\]|op /net/net.7/GlobalAveragePool devices=[0,1] mesh=[2] [y]|' \
  -e 's|^tensor /net/net.7/GlobalAveragePool_output_0 devices=\[0,1\] mesh=\[2\] \[split(0)\]|tensor /net/net.7/GlobalAveragePool_output_0 devices=[0,1] mesh=[2] [partial]|' \
  > "$tmp/gap_split.plan"
out=$("$CLEAVE" compile "$SRC/models/cnn.onnx" --plan "$tmp/gap_split.plan" --devices 2 --batch 16 -o "$tmp/bad" 2>&1)
rc=$?
check "pooling split on its reduced spatial var: rc=$rc, message: $out" \
  "[ $rc -eq 1 ] && echo \"\$out\" | grep -q 'op \"/net/net.7/GlobalAveragePool\" (GlobalAveragePool): splitting var y is not supported by codegen yet'"
"$CLEAVE" plan "$SRC/models/cnn.onnx" --devices 2 --planner data --batch 16 | sed \
  -e 's|^op /net/net.0/Conv devices=\[0,1\] mesh=\[2\] \[b\]|op /net/net.0/Conv devices=[0,1] mesh=[2] [y]|' \
  -e 's|^tensor /net/net.0/Conv_output_0 devices=\[0,1\] mesh=\[2\] \[split(0)\]|tensor /net/net.0/Conv_output_0 devices=[0,1] mesh=[2] [split(2)]|' \
  > "$tmp/conv_split.plan"
out=$("$CLEAVE" compile "$SRC/models/cnn.onnx" --plan "$tmp/conv_split.plan" --devices 2 --batch 16 \
  -o "$tmp/conv_split" 2>&1)
rc=$?
check "spatial conv split compiles: rc=$rc, message: $out" "[ $rc -eq 0 ] && [ -d '$tmp/conv_split' ]"
check "nothing left after the codegen errors" "[ ! -e '$tmp/bad' ]"

# --precision: tf32 is a line of the rank sources and a manifest field; bf16 is rounding ops in the graph (their
# numbers: tests/e2e/bf16_vs_autocast.py); fp16 is rounding ops and loss scaling (tests/e2e/fp16_loss_scaling.py).
"$CLEAVE" compile "$SRC/models/mlp.onnx" --devices 2 --batch 16 --precision tf32 -o "$tmp/tf32" 2>/dev/null
check "--precision tf32: set_math before init (in the program every rank runs), precision in the manifest" \
  "grep -q '^  rt::set_math(rt::Math::tf32);' '$tmp'/tf32/src/ranks.cpp &&
   grep -q '\"precision\": \"tf32\"' '$tmp/tf32/manifest.json' && grep -q '\"precision\": \"fp32\"' '$tmp/a/manifest.json' &&
   ! grep -q 'set_math\|round_bf16' '$tmp'/a/src/ranks.cpp"
"$CLEAVE" compile "$SRC/models/mlp.onnx" --devices 2 --batch 16 --precision bf16 -o "$tmp/bf16" 2>/dev/null
check "--precision bf16: the ranks round to bfloat16, precision in the manifest" \
  "grep -q 'cleave::round_bf16' '$tmp/bf16/src/ranks.cpp' && grep -q '\"precision\": \"bf16\"' '$tmp/bf16/manifest.json'"
"$CLEAVE" compile "$SRC/models/mlp.onnx" --devices 2 --batch 16 --precision fp16 -o "$tmp/fp16" 2>/dev/null
check "--precision fp16: the ranks round to float16 and scale the loss (torch's first scale), precision in the manifest" \
  "grep -q 'cleave::round_fp16' '$tmp/fp16/src/ranks.cpp' && grep -q '\"precision\": \"fp16\"' '$tmp/fp16/manifest.json' &&
   grep -q 'run.scale_losses(0x1p+16f, 2000, b[0-9]*);' '$tmp/fp16/src/ranks.cpp' &&
   grep -q 'run.unscale_grads({' '$tmp/fp16/src/ranks.cpp' && ! grep -q 'scale_losses\|unscale_grads' '$tmp'/a/src/ranks.cpp"
# Mixed precision's GEMMs and convolutions: every one multiplies rounded values (ir/autocast.h exact_low_types), so
# each call says so (rt::Operands: the CUDA backend then uses bf16/fp16 tensor cores); fp32 and tf32 calls never do.
"$CLEAVE" compile "$SRC/models/cnn.onnx" --devices 2 --batch 16 --precision bf16 -o "$tmp/cnn_bf16" 2>/dev/null
all_low() {  # every GEMM and ConvShape of bundle $1 ends with rt::Operands::$2, and there are some
  local calls
  calls=$(cat "$1"/src/*.cpp | grep 'rt::gemm\|rt::ConvShape')
  [ -n "$calls" ] && ! echo "$calls" | grep -vq "rt::Operands::$2)\?;\|rt::Operands::$2};"
}
check "--precision bf16/fp16: set_math(mixed), and every GEMM and convolution on bf16 (fp16) operands" \
  "grep -q '^  rt::set_math(rt::Math::mixed);' '$tmp'/bf16/src/ranks.cpp && all_low '$tmp/bf16' bf16 &&
   all_low '$tmp/cnn_bf16' bf16 && grep -q 'rt::ConvShape.*bf16' '$tmp'/cnn_bf16/src/*.cpp &&
   all_low '$tmp/fp16' fp16 && ! grep -q 'rt::Operands' '$tmp'/a/src/ranks.cpp '$tmp'/tf32/src/ranks.cpp"
# Loss scaling's flags: one error line naming the flag, nothing written.
for bad in "--loss-scale -4" "--loss-scale 1e39" "--loss-scale-growth-interval 0"; do
  out=$("$CLEAVE" compile "$SRC/models/mlp.onnx" --batch 16 $bad -o "$tmp/badscale" 2>&1)
  rc=$?
  check "$bad is refused in one line naming the flag (rc=$rc): $out" \
    "[ $rc -ne 0 ] && [ \"\$(echo \"\$out\" | wc -l)\" = 1 ] && echo \"\$out\" | grep -q -- '${bad% *}' && [ ! -e '$tmp/badscale' ]"
done
out=$("$CLEAVE" compile "$SRC/models/mlp.onnx" --batch 16 --precision fp64 -o "$tmp/fp64" 2>&1)
rc=$?
check "--precision fp64 is refused (rc=$rc)" "[ $rc -ne 0 ] && echo \"\$out\" | grep -q -- '--precision' && [ ! -e '$tmp/fp64' ]"

# cleave run on something that is not a bundle.
out=$("$CLEAVE" run "$tmp" --data x=a.npy --steps 1 2>&1)
rc=$?
check "run on a non-bundle is refused (rc=$rc)" "[ $rc -eq 1 ] && echo \"\$out\" | grep -q 'not a bundle'"
# A manifest naming a program or weights layout cleave does not write: one line naming the file, the field and the
# value, nothing built.
for bad in 'badprog program ranks rank_0' 'badweights weights ranks.bin all.bin'; do
  read -r dir field good value <<<"$bad"
  cp -r "$tmp/a" "$tmp/$dir"
  sed -i "s/\"$field\": \"$good\"/\"$field\": \"$value\"/" "$tmp/$dir/manifest.json"
  out=$("$CLEAVE" run "$tmp/$dir" --data x=a.npy --steps 1 2>&1)
  rc=$?
  check "run refuses a manifest's unknown $field layout (rc=$rc): $out" \
    "[ $rc -eq 1 ] && [ \"\$out\" = 'error: $tmp/$dir/manifest.json: malformed manifest: $field \"$value\"' ] &&
     [ ! -e '$tmp/$dir/build' ]"
done
exit $fail
