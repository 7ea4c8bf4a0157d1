"""Tiny ResNet (models/zoo) compiled for 2 ranks with the data planner trains like the 1-rank `cleave eval`
(losses within relative 1e-5; see zoo_tiny.py, which this runs with --ranks resnet). Tiny WResNet has the same
structure, only wider, so one family covers the codegen; building the two rank programs is the slow part.
Usage (CTest): /usr/bin/python3 tests/e2e/zoo_tiny_ranks.py <cleave-binary> <source-dir>
"""
import os
import subprocess
import sys

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: zoo_tiny_ranks.py <cleave-binary> <source-dir>")
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(subprocess.call([sys.executable, os.path.join(here, "zoo_tiny.py"), sys.argv[1], sys.argv[2],
                              "--ranks", "resnet"]))
