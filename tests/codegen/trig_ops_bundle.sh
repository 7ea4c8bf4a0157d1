#!/bin/bash
# Compiled bundles run the trigonometric and hyperbolic kinds (Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
# Acosh, Atanh and their gradients) as cleave eval does, on 1 and 2 ranks.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/trig_ops_bundle.py" "$1" "$2"
