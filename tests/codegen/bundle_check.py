"""What the bundle tests share: the prebuilt runtime to link bundles against, and reading what `cleave eval` /
`cleave run` produce (the `step <k> loss <v>` lines, a --save-model file's initializers)."""
import os

import onnx
from onnx import numpy_helper


def runtime_flags(cleave):
    """`--runtime-dir` of the main build's runtime next to the cleave binary, so bundles compile only their rank
    sources; empty if it is not built (each bundle then builds its own runtime copy)."""
    runtime_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(cleave))), "runtime")
    return ["--runtime-dir", runtime_dir] if os.path.exists(os.path.join(runtime_dir, "libcleave_rt_cpu.a")) else []


def losses(out):
    """The loss of each `step <k> loss <v>` line, checking k counts 1, 2, ..."""
    vals = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "step" and parts[2] == "loss":
            assert int(parts[1]) == len(vals) + 1, line
            vals.append(float(parts[3]))
    return vals


def weights(path):
    """Initializer name -> numpy array of an ONNX file."""
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
