"""Tiny zoo WResNet (tiny ResNet's structure at twice its width): the data plan and a hand plan (channel-split
convolutions and BatchNorms in stages 3-4, tests/codegen/plans/family_plans.py) on 2 and 4 ranks train like the 1-rank
`cleave eval`: losses within relative 1e-5, weights within 1e-5 * max|w|.
Usage (CTest): /usr/bin/python3 tests/e2e/zoo_plans_wresnet.py <cleave-binary> <source-dir>"""
import os
import sys

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: zoo_plans_wresnet.py <cleave-binary> <source-dir>")
    sys.path.insert(0, os.path.join(sys.argv[2], "tests", "codegen", "plans"))
    import family_plans
    sys.exit(family_plans.main([os.path.abspath(sys.argv[1]), sys.argv[2], "wresnet", "data", "hand"]))
