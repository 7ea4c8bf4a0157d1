#!/usr/bin/env bash
# Sets up, builds and runs the tests. Every test has a label (tests/CMakeLists.txt): fast, bundle, e2e, cuda, gpu.
#   tools/test.sh             everything: builds the whole tree, runs every test (what CI runs first)
#   tools/test.sh --fast      builds only what the fast tests run (target tests_fast) and runs the fast label
#   tools/test.sh --sanitize  the sanitize label (fast tests on what reads users' files), built by clang with ASan+UBSan
#                             (CLEAVE_FUZZ=ON, no CUDA) in build-asan or $CLEAVE_SANITIZE_BUILD_DIR (what CI runs
#                             second); --sanitize-all: every fast test so (about three times the build)
# Further arguments go to ctest (e.g. -R planner).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=all
case "${1:-}" in
  --fast) mode=fast; shift ;;
  --sanitize) mode=sanitize; shift ;;
  --sanitize-all) mode=sanitize; sanitize_all=1; shift ;;
  --all) shift ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
jobs=$(nproc)

case $mode in
  all)
    bash tools/build.sh
    build=${CLEAVE_BUILD_DIR:-build}
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 900 "$@"
    ;;
  fast)
    bash tools/setup.sh
    build=${CLEAVE_BUILD_DIR:-build}
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    ninja -C "$build" -j "$jobs" tests_fast
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 900 -L '^fast$' "$@"
    ;;
  sanitize)
    bash tools/setup.sh
    build=${CLEAVE_SANITIZE_BUILD_DIR:-build-asan}
    mkdir -p "$build"
    # OpenMPI keeps its own allocations to exit (the runtime's mpirun tests): those are not ours.
    printf '%s\n' leak:libmpi.so leak:libopen-pal.so leak:libopen-rte.so leak:libhwloc.so leak:libevent \
      leak:libpmix.so leak:libucs.so leak:libucp.so >"$build/lsan.supp"
    # Every finding stops the program with a stack (UBSan is also built with -fno-sanitize-recover). The variables
    # are set for the build too: gtest_discover_tests runs the test binaries.
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
    export LSAN_OPTIONS="suppressions=$(realpath "$build/lsan.supp"):print_suppressions=0"
    # -O1 -g1: line tables for the stacks, and half the compile time of -O2 -g under the sanitizers (codegen's
    # emit_bundle.cpp: 75 s against 142 s here), which keeps CI within its time. No CUDA: the fast tests use none.
    # clang with CLEAVE_FUZZ (which implies the sanitizers): the same tree builds tools/fuzz.sh's libFuzzer targets
    # (CLEAVE_FUZZ_BUILD_DIR=build-asan), so CI compiles the sources under the sanitizers once, not twice.
    CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCLEAVE_FUZZ=ON -DCLEAVE_ENABLE_CUDA=OFF >/dev/null
    if [ "${sanitize_all:-0}" = 1 ]; then target=tests_fast label='^fast$'; else target=tests_sanitize label='^sanitize$'; fi
    ninja -C "$build" -j "$jobs" "$target"
    ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1800 -L "$label" "$@"
    if [ "${sanitize_all:-0}" != 1 ]; then
      # The unit tests of the sanitize areas (tests/CMakeLists.txt sanitize_areas), each binary whole.
      for area in ir describe interp autodiff frontend; do
        (cd "$build/tests" && "./test_$area" --gtest_brief=1) || { echo "test_$area failed under the sanitizers" >&2; exit 1; }
        echo "sanitize: test_$area passed" >&2
      done
    fi
    ;;
esac
