#!/bin/bash
# ParaDL's strategies as plans (cleave oracle --plans-dir) compile and train equal to `cleave eval` (oracle_plans.py).
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/oracle_plans.py" "$1" "$2"
