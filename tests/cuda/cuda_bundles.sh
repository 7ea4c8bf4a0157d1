#!/bin/bash
# The CUDA build of a model's bundle compiles and links at 1 and 2 ranks (no GPU needed), from the very rank sources
# its CPU build compiles:
#  - `cleave compile --backend cuda` and `--backend cpu` write byte-identical src/*.cpp (only the manifest's,
#    CMakeLists' and README's backend differ), and the manifest records the backend;
#  - one bundle directory configured for cpu and for cuda compiles the same rank sources (src/rank_<r>.cpp, or
#    src/ranks.cpp where one program runs as every rank) in both builds (compile_commands.json), with nvcc as CUDA
#    in the cuda build;
#  - the cuda build links every rank against the prebuilt libcleave_rt_cuda, cuDNN and NCCL.
# Builds use one arch (80) and -O0 host and device code (nvcc -Xptxas -O0): a compile-and-link check. Measured on
# 2 loaded cores (ctest -j2 over the four models: 208 s wall): 1 + 2 ranks of the tiny LSTM (~900 fused lambdas per
# rank) 140 s, Transformer 99 s, CNN 72 s, MLP 46 s, including the cleave compiles and configures.
# Usage: cuda_bundles.sh CLEAVE SOURCE_DIR CUDA_RUNTIME_LIB_DIR NVCC mlp|cnn|lstm|transformer
set -euo pipefail
CLEAVE=$1
SRC=$2
RT_DIR=$3
NVCC=$4
MODEL=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL ($MODEL): $*"; exit 1; }

train=(--optimizer sgd --lr 0.1)
case $MODEL in
  mlp | cnn) onnx=$SRC/models/$MODEL.onnx; batch=16 ;;
  lstm | transformer)
    /usr/bin/python3 "$SRC/tests/cuda/export_models.py" "$SRC" "$tmp" > "$tmp/export.log" 2>&1 ||
      { cat "$tmp/export.log"; fail "exporting the tiny models failed"; }
    onnx=$tmp/$MODEL.onnx
    batch=4
    [ "$MODEL" = transformer ] && batch=8 ;;
  *) fail "unknown model $MODEL" ;;
esac

for ranks in 1 2; do
  b=$tmp/cuda_$ranks
  for backend in cuda cpu; do
    "$CLEAVE" compile "$onnx" --devices "$ranks" --planner data --batch $batch "${train[@]}" --backend $backend \
      -o "$tmp/${backend}_$ranks" 2> "$tmp/compile.log" || { cat "$tmp/compile.log"; fail "cleave compile failed"; }
  done
  diff -r "$tmp/cpu_$ranks/src" "$b/src" > /dev/null || fail "$ranks ranks: --backend cuda and cpu wrote different rank sources"
  grep -q '"backend": "cuda"' "$b/manifest.json" || fail "$ranks ranks: manifest.json does not record backend cuda"
  grep -q '"backend": "cpu"' "$tmp/cpu_$ranks/manifest.json" || fail "$ranks ranks: manifest.json does not record backend cpu"

  common=(-G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCLEAVE_RUNTIME_DIR="$RT_DIR")
  cmake -S "$b" -B "$tmp/build_cpu_$ranks" "${common[@]}" -DCLEAVE_BACKEND=cpu > "$tmp/cfg_cpu.log" 2>&1 ||
    { cat "$tmp/cfg_cpu.log"; fail "$ranks ranks: cpu configure failed"; }
  cmake -S "$b" -B "$tmp/build_cuda_$ranks" "${common[@]}" -DCLEAVE_BACKEND=cuda -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_CUDA_ARCHITECTURES=80 -DCMAKE_CUDA_FLAGS="-Xptxas -O0" > "$tmp/cfg_cuda.log" 2>&1 ||
    { cat "$tmp/cfg_cuda.log"; fail "$ranks ranks: cuda configure failed"; }
  python3 - "$b" "$tmp/build_cpu_$ranks" "$tmp/build_cuda_$ranks" "$ranks" <<'PY' || fail "$ranks ranks: the builds do not compile the same rank sources"
import glob, json, os, sys
bundle, cpu, cuda, ranks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def ranks_of(build):
    out = {}
    for e in json.load(open(os.path.join(build, "compile_commands.json"))):
        f = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if os.path.basename(f).startswith("rank"):
            out[f] = e["command"]
    return out
a, b = ranks_of(cpu), ranks_of(cuda)
# One program for every rank where they differ only in constants (manifest "program"), else one per rank.
shared = json.load(open(os.path.join(bundle, "manifest.json")))["program"] == "ranks"
# Each program's sources: <program>.cpp and, where it was split (codegen/split_program.h), <program>_part<k>.cpp.
want = {os.path.realpath(f) for f in glob.glob(os.path.join(bundle, "src", "*.cpp"))}
programs = {os.path.basename(f)[:-len(".cpp")].split("_part")[0] for f in want}
assert programs == ({"ranks"} if shared else {f"rank_{r}" for r in range(ranks)}), sorted(want)
assert set(a) == want and set(b) == want, (sorted(a), sorted(b), sorted(want))
for f in want:
    assert "nvcc" in b[f].split()[0] and "nvcc" not in a[f].split()[0], (a[f][:80], b[f][:80])
    assert "--extended-lambda" in b[f] and "-std=c++20" in b[f], b[f]
print(f"same sources: {sorted(os.path.basename(f) for f in want)} (c++ for cpu, nvcc for cuda)")
PY
  start=$(date +%s)
  ninja -C "$tmp/build_cuda_$ranks" > "$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log"; fail "$ranks ranks: cuda build failed"; }
  secs=$(($(date +%s) - start))
  # The programs: rank_<r> each, or one, "ranks", for every rank.
  programs=$(python3 -c "import json, sys; m = json.load(open(sys.argv[1] + '/manifest.json'))
print('ranks' if m['program'] == 'ranks' else ' '.join('rank_%d' % r for r in range(m['ranks'])))" "$b")
  for p in $programs; do
    exe=$tmp/build_cuda_$ranks/$p
    [ -x "$exe" ] || fail "$ranks ranks: $p was not linked"
    ldd "$exe" > "$tmp/ldd.txt"
    for lib in libcudnn libnccl libcublas; do
      grep -q "$lib" "$tmp/ldd.txt" || fail "$ranks ranks: $p does not link $lib"
    done
    # One CUDA runtime per process: the static one nvcc-compiled targets get, never also the shared one.
    if grep -q "libcudart.so" "$tmp/ldd.txt"; then fail "$ranks ranks: $p loads the shared libcudart too"; fi
  done
  echo "ok: $MODEL at $ranks rank(s): CUDA build of the program(s) $programs in ${secs} s"
done

# The precision paths compile for CUDA too: the MLP with --precision tf32 (rt::set_math), bf16 (RoundToBf16
# functors, cleave::round_bf16 in device code) and fp16 (cleave::round_fp16, loss scaling's runtime calls), 1 rank.
if [ "$MODEL" = mlp ]; then
  for precision in tf32 bf16 fp16; do
    b=$tmp/cuda_$precision
    "$CLEAVE" compile "$onnx" --batch $batch "${train[@]}" --backend cuda --precision $precision -o "$b" \
      2> "$tmp/compile.log" || { cat "$tmp/compile.log"; fail "cleave compile --precision $precision failed"; }
    cmake -S "$b" -B "$b/build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCLEAVE_RUNTIME_DIR="$RT_DIR" \
      -DCLEAVE_BACKEND=cuda -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES=80 \
      -DCMAKE_CUDA_FLAGS="-Xptxas -O0" > "$tmp/cfg_cuda.log" 2>&1 ||
      { cat "$tmp/cfg_cuda.log"; fail "--precision $precision: cuda configure failed"; }
    ninja -C "$b/build" > "$tmp/build.log" 2>&1 ||
      { tail -40 "$tmp/build.log"; fail "--precision $precision: cuda build failed"; }
    [ -x "$b/build/rank_0" ] || fail "--precision $precision: rank_0 was not linked"
    echo "ok: $MODEL --precision $precision: the CUDA build compiles and links"
  done
fi
