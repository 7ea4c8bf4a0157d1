#!/bin/bash
# Hand-written plans (tests/codegen/plans/*.plan: column, reduction, channel, re-split and spatial (halo)
# shardings) compile and their bundles reproduce `cleave eval`. Usage: hand_plans.sh CLEAVE SOURCE_DIR.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/plans/check_hand_plans.py" "$1" "$2"
