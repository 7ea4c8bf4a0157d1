#!/bin/bash
# Weighted-mean losses (class weights, ignore_index) split on the batch: `cleave run` of data plans == `cleave eval`.
set -euo pipefail
exec /usr/bin/python3 "$2/tests/codegen/weighted_loss.py" "$1" "$2"
