"""What the bundle tests share: the prebuilt runtime to link bundles against, compiling and running a bundle
(run_partitioned), and reading what `cleave eval` / `cleave run` produce (the `step <k> loss <v>` lines, a
--save-model file's initializers)."""
import json
import os
import subprocess

import numpy as np
import onnx
from onnx import numpy_helper


def sh(cmd):
    """Runs a command; its stdout, or exit naming the command with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def check_output(cmd, timeout=1200):
    """Runs a command; its stdout, or RuntimeError naming the command, its exit status and the end of its stderr (for
    tests that record the failure and go on with their other cases). A command still running after `timeout` seconds
    raises subprocess.TimeoutExpired."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited with {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def runtime_flags(cleave, bundle=None):
    """`--runtime-dir` of the main build's runtime next to the cleave binary, so bundles compile only their rank
    sources; empty if it is not built, or `bundle` is float64 (the main build's runtime is float32): the bundle then
    uses the runtime cache's."""
    if bundle and json.load(open(os.path.join(bundle, "manifest.json"))).get("precision") == "fp64":
        return []
    runtime_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(cleave))), "runtime")
    return ["--runtime-dir", runtime_dir] if os.path.exists(os.path.join(runtime_dir, "libcleave_rt_cpu.a")) else []


def run_partitioned(cleave, model, bundle, how, data, steps, run_flags=(), sh=check_output):
    """Compiles `model` into `bundle` (`how`: the rest of compile's arguments: the plan, e.g. ["--planner", "data",
    "--devices", "2"] or ["--plan", FILE], batch and optimizer flags) and runs it `steps` steps on `data` (a --data
    flag) against the prebuilt runtime, saving the trained model. `sh` runs each command (check_output by default).
    Returns (its losses, the path of the saved model)."""
    sh([cleave, "compile", model, "-o", bundle, *how])
    saved = bundle + "_trained.onnx"
    out = sh([cleave, "run", bundle, "--data", data, "--steps", str(steps), "--save-model", saved, *run_flags]
             + runtime_flags(cleave, bundle))
    return losses(out), saved


def run_and_compare(cleave, bundle, data, steps, ref, ref_w, where, sh=check_output):
    """Runs a compiled `bundle` `steps` steps on `data` against the prebuilt runtime and compares it with the reference
    run (compare_run); prints the worst loss difference. Returns the problems."""
    saved = bundle + "_trained.onnx"
    got = losses(sh([cleave, "run", bundle, "--data", data, "--steps", str(steps), "--save-model", saved]
                    + runtime_flags(cleave, bundle)))
    found, worst = compare_run(where, got, ref, saved, ref_w, steps)
    if len(got) == steps:
        print(f"{where}: worst loss rel diff {worst:.3g}, losses {got}", flush=True)
    return found


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


def compare_run(where, got, ref, saved, ref_w, steps, rtol=1e-5):
    """Checks a compiled run against its reference run: `steps` losses, each within relative `rtol`, and every float
    initializer of the --save-model file `saved` within rtol * max(1, max|w|) of `ref_w`. Returns (problems, worst
    loss relative difference; inf when the step count is wrong)."""
    if len(got) != steps:
        return [f"{where}: {len(got)} loss lines, want {steps}"], float("inf")
    problems = []
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    if worst > rtol:
        problems.append(f"{where}: losses {got} vs eval {ref} (worst rel {worst:.3g})")
    got_w = weights(saved)
    for name, w in ref_w.items():
        if np.issubdtype(w.dtype, np.floating):
            tol = rtol * max(1.0, float(np.abs(w).max()))
            diff = float(np.abs(got_w[name].astype(np.float64) - w).max())
            if diff > tol:
                problems.append(f"{where}: {name} differs by {diff:.3g} (tol {tol:.3g})")
    return problems, worst


# A ReLU input within this distance of 0 in the torch run can change sign between two float32 runs that differ only
# in rounding (a different summation order moves it by ~1e-7), and then legitimately changes that element's
# gradient: the runs diverge for a reason that is not a bug. Tests pick their data so that none is that close.
RELU_MARGIN = 2e-6


def relu_margin(run):
    """(run()'s result, the smallest |x| over every torch.nn.functional.relu / nn.ReLU input during run())."""
    import torch
    import torch.nn.functional as F
    smallest = [float("inf")]
    original = F.relu

    def relu(x, inplace=False):
        smallest[0] = min(smallest[0], float(x.detach().abs().min()))
        return original(x, inplace=inplace)

    F.relu = relu
    try:
        result = run()
    finally:
        F.relu = original
    return result, smallest[0]


def pick_data(make_data, train_torch, tries=8):
    """The first seed in range(tries) whose data (make_data(seed)) keeps every ReLU input of the torch training run
    (train_torch(data)) at least RELU_MARGIN from 0: (seed, data, torch's result, the margin). Raises RuntimeError
    if none does."""
    margins = []
    for seed in range(tries):
        data = make_data(seed)
        result, margin = relu_margin(lambda: train_torch(data))
        if margin >= RELU_MARGIN:
            return seed, data, result, margin
        margins.append(f"{margin:.2g}")
    raise RuntimeError(f"no data seed in 0..{tries - 1} keeps the ReLU inputs {RELU_MARGIN:g} from 0 "
                       f"(smallest |input| per seed: {', '.join(margins)})")
