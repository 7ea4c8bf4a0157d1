#!/bin/bash
# Frontier plans (planner/search/frontier.h) of the tiny models train like the 1-rank run (`cleave eval`): random_plans.py's
# planner cases, SGD, 3 steps. Both ends of the frontier: its least-memory point (frontier-min-memory: planned with
# --memory-limit at that point's peak; it splits most ops) on 2 and 4 ranks (the unrolled LSTM and the Transformer on
# 2 only, to stay near 2 minutes), and its fastest point (the default mini-time plan; on these latency-bound tiny
# models it replicates most ops) on 4 ranks.
set -euo pipefail
py=$2/tests/codegen/random_plans.py
/usr/bin/python3 "$py" "$1" "$2" --planners frontier-min-memory --planners-only --models mlp,cnn --planner-ranks 2,4
/usr/bin/python3 "$py" "$1" "$2" --planners frontier-min-memory --planners-only --models rnn,transformer \
  --planner-ranks 2
/usr/bin/python3 "$py" "$1" "$2" --planners frontier --planners-only --models cnn --planner-ranks 4
