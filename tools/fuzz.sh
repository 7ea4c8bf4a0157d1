#!/usr/bin/env bash
# Runs one fuzz target (tests/fuzz/fuzz_TARGET.cpp) under libFuzzer with AddressSanitizer and UBSan for SECONDS,
# starting from its seeds; builds it first in build-fuzz (clang, CLEAVE_FUZZ=ON; $CLEAVE_FUZZ_BUILD_DIR overrides).
# The corpus it grows stays in BUILD/corpus/TARGET; an input that crashes is written to tests/fuzz/regressions/TARGET/
# (commit it with the fix: fuzz.replay_TARGET replays it in every build). Prints libFuzzer's final stats.
# Usage: tools/fuzz.sh onnx|plan|ir|npy SECONDS [libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: tools/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: tools/fuzz.sh TARGET SECONDS}
shift 2
[ -f "tests/fuzz/fuzz_$target.cpp" ] || { echo "error: no fuzz target \"$target\" (tests/fuzz/fuzz_*.cpp)" >&2; exit 2; }
build=${CLEAVE_FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLEAVE_FUZZ=ON \
    -DCLEAVE_ENABLE_CUDA=OFF > "$build.configure.log" || { cat "$build.configure.log" >&2; exit 1; }
fi
grep -q '^CLEAVE_FUZZ:BOOL=ON$' "$build/CMakeCache.txt" ||
  { echo "error: $build is not a CLEAVE_FUZZ build (configure it with CXX=clang++ -DCLEAVE_FUZZ=ON)" >&2; exit 2; }
ninja -C "$build" "fuzz_$target" >&2
corpus=$build/corpus/$target
mkdir -p "$corpus" "tests/fuzz/regressions/$target"
# libFuzzer reads corpus directories: the seeds (files and directories of files) are copied into the corpus.
while read -r seed; do
  [ -z "$seed" ] && continue
  if [ -d "$seed" ]; then cp -n "$seed"/* "$corpus"/; else cp -n "$seed" "$corpus"/; fi
done < "$build/tests/fuzz/seeds_$target.txt"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -rss_limit_mb: a model that asks for gigabytes is refused by Cleave's own checks, or is a finding.
"$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 -timeout=30 \
  -artifact_prefix="tests/fuzz/regressions/$target/" "$@" "$corpus"
rmdir "tests/fuzz/regressions/$target" 2> /dev/null || true
