#!/bin/bash
# flexflow plans (planner/search/flexflow.h, default iterations, seed 0) of the tiny MLP and CNN on 2 and 4 ranks train like
# the 1-rank run (`cleave eval`): random_plans.py's planner cases, without its random ones.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/random_plans.py" "$1" "$2" --planners flexflow --models mlp,cnn \
  --planner-ranks 2,4 --no-random
