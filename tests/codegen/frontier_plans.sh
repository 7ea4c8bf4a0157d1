#!/bin/bash
# The frontier planner's plans (planner/frontier.h: the fastest plan fitting the device memory) of the tiny models
# train like the 1-rank run (`cleave eval`) on 2 and 4 ranks (random_plans.py's planner cases, SGD, 3 steps).
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/random_plans.py" "$1" "$2" --planners frontier --planners-only \
  --models "${FRONTIER_MODELS:-mlp,cnn,rnn,transformer}" --planner-ranks 2,4
