#!/usr/bin/env bash
# Sets up, builds and runs every test (unit, conformance, gradient checks, torch comparisons, bad input).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
build=${CLEAVE_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900
