#!/usr/bin/env bash
# The runtime cache (codegen/bundle_run.h): the first `cleave run` on a machine builds the bundle's runtime once into
# CLEAVE_CACHE_DIR, a second bundle (another model) links that library without building the runtime, both train
# like `cleave eval`'s first step; CLEAVE_RUNTIME_CACHE=0 builds the bundle's own copy and leaves the cache alone.
# Usage: runtime_cache.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
export CLEAVE_CACHE_DIR=$work/cache
unset CLEAVE_RUNTIME_DIR CLEAVE_RUNTIME_CACHE
d=$src/models/data
mlp_data="x=$d/digits_flat_train_x.npy,y=$d/digits_train_y.npy"
cnn_data="x=$d/digits_train_x.npy,y=$d/digits_train_y.npy"

run() {  # NAME MODEL DATA: compile for 2 ranks, run 1 step; the loss line must equal cleave eval's
  "$cleave" compile "$src/models/$2.onnx" --devices 2 --batch 16 -o "$work/$1" 2>/dev/null || { fail "$1: compile"; return; }
  "$cleave" run "$work/$1" --data "$3" --steps 1 > "$work/$1.out" 2> "$work/$1.err" || { fail "$1: run"; return; }
  "$cleave" eval "$src/models/$2.onnx" --batch 16 --data "$3" --steps 1 > "$work/$1.eval" 2>/dev/null
  # The same step within float rounding of a different reduction order: compare to 5 significant digits.
  a=$(awk '/^step 1 /{printf "%.5g", $4}' "$work/$1.out")
  b=$(awk '/^step 1 /{printf "%.5g", $4}' "$work/$1.eval")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$1: loss $a, eval $b"
}

run mlp mlp "$mlp_data"
kept=$(find "$work/cache" -mindepth 1 -maxdepth 1 -name 'runtime-cpu-Release-*' | wc -l)
[ "$kept" -eq 1 ] || fail "one cached runtime after the first run, found $kept"
grep -q 'building the cpu runtime once' "$work/mlp.err" || fail "the first run did not say it builds the runtime"

run cnn cnn "$cnn_data"
grep -q 'building the cpu runtime once' "$work/cnn.err" && fail "the second bundle built the runtime again"
grep -q "CLEAVE_RUNTIME_DIR:PATH=$work/cache/runtime-cpu-Release-" "$work/cnn/build/CMakeCache.txt" ||
  fail "the second bundle does not link the cached runtime"
[ -e "$work/cnn/build/runtime" ] && fail "the second bundle built its own runtime"

CLEAVE_RUNTIME_CACHE=0 run own mlp "$mlp_data"
grep -q 'CLEAVE_RUNTIME_DIR:PATH=$' "$work/own/build/CMakeCache.txt" || fail "CLEAVE_RUNTIME_CACHE=0 used a prebuilt runtime"
kept=$(find "$work/cache" -mindepth 1 -maxdepth 1 | wc -l)
[ "$kept" -eq 1 ] || fail "CLEAVE_RUNTIME_CACHE=0 touched the cache ($kept entries)"

[ $failures -eq 0 ] && echo "ok: one runtime build for two bundles; CLEAVE_RUNTIME_CACHE=0 builds its own"
exit $((failures > 0))
