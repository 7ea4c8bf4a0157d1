#!/bin/bash
# Every search planner's plans (tofu, icml18 and Tofu's baselines) of the tiny models are valid, deterministic and
# compile; one bundle per planner trains equal to `cleave eval` (search_planners.py).
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/search_planners.py" "$1" "$2"
