#!/bin/bash
# Compiled bundles run the activation and rounding kinds (Clip, HardSigmoid, HardSwish, LeakyRelu, Elu, Selu, Celu,
# PRelu, Softplus, Softsign, Abs, Sign, Floor, Round and their gradients) as cleave eval does, on 1
# and 2 ranks.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/activation_ops_bundle.py" "$1" "$2"
