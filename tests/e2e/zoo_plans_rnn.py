"""Tiny zoo RNN (LSTM language model): `cleave eval` trains like torch (relative 1e-4), and the data plan and a hand
plan (vocabulary-split decoder, tests/codegen/plans/family_plans.py) on 2 and 4 ranks like the eval: losses within
relative 1e-5, weights within 1e-5 * max|w|.
Usage (CTest): /usr/bin/python3 tests/e2e/zoo_plans_rnn.py <cleave-binary> <source-dir>"""
import os
import sys

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: zoo_plans_rnn.py <cleave-binary> <source-dir>")
    sys.path.insert(0, os.path.join(sys.argv[2], "tests", "codegen", "plans"))
    import family_plans
    sys.exit(family_plans.main([os.path.abspath(sys.argv[1]), sys.argv[2], "rnn", "data", "hand"]))
