#!/bin/bash
# Codegen of Gather, Slice, Split, Concat, batched/broadcast MatMul and Dropout (and their gradients): bundles of small
# torch models reproduce `cleave eval` on 2 ranks. Usage: layout_ops_match_eval.sh CLEAVE SOURCE_DIR.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/layout_ops_match_eval.py" "$1" "$2"
