#!/bin/bash
# Strided convs/pool on even inputs (data plan) and channel-split BatchNormalization (hand plan) train like cleave eval.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/window_bn_splits.py" "$1" "$2"
