#!/bin/bash
# Random legal plans (--planner random) and search planners' plans of the tiny models train like the 1-rank run
# (random_plans.py: the CI selection; run it with --many N for more seeds).
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/random_plans.py" "$1" "$2"
