#!/usr/bin/env bash
# Installs the dependencies (tools/setup.sh) and builds Cleave into build/ (or $CLEAVE_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
build=${CLEAVE_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j "$(nproc)"
