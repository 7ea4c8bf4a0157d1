#!/bin/bash
# Regenerates tests/planner/golden/*.plan from the current planners. Review the diff before committing.
# Usage: tests/planner/update_golden.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
ninja -C "$build" test_planner
CLEAVE_UPDATE_GOLDEN=1 "$build/tests/test_planner" --gtest_filter='Planners.GoldenDataPlans'
git -C "$root" diff --stat -- tests/planner/golden || true
