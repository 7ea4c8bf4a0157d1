#!/bin/bash
# cleave run (compiled bundles under mpirun) == cleave eval, for mlp/cnn x sgd/adam x single/data plans.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/run_matches_eval.py" "$1" "$2"
