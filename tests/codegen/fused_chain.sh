#!/bin/bash
# Fused elementwise functors == the unfused interpreter (see fused_chain.py).
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/fused_chain.py" "$1" "$2"
