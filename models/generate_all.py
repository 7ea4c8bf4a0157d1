"""Regenerates everything under models/: data, ONNX models, torch reference runs.
Run with Debian's python: /usr/bin/python3 models/generate_all.py"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_data  # noqa: E402
import make_models  # noqa: E402
import make_reference  # noqa: E402

if __name__ == "__main__":
    make_data.main(os.path.join(HERE, "data"))
    make_models.main(HERE)
    make_reference.main(HERE)
