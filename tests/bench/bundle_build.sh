#!/usr/bin/env bash
# 2-rank bundle build times (tests/bench/bundle_build.py says what and how).
# Usage: tests/bench/bundle_build.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
exec /usr/bin/python3 "$(dirname "$0")/bundle_build.py" "$@"
