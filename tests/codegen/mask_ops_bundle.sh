#!/bin/bash
# Compiled bundles run the mask/selection/layer-norm kinds (Where, Equal, Greater, Cast, Max, Min, ReduceMax,
# ReduceMin, Reciprocal, Pad, LayerNormalization and their gradients) as cleave eval does, on 1 and 2 ranks.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/mask_ops_bundle.py" "$1" "$2"
