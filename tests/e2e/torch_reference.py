"""Cleave's training (`cleave eval`) against torch.optim: the same model, data, batches and optimizer must give the
same losses and weights as models/reference/<model>_<opt>.json (written by models/make_reference.py from torch 1.13).

Usage (CTest): /usr/bin/python3 tests/e2e/torch_reference.py <cleave-binary> <source-dir>

Checks per model x optimizer:
  - stdout holds exactly one line per step, `step <k> loss <value>`, k = 1..steps, and nothing else;
  - each loss is within relative 1e-4 of torch's;
  - each trainable parameter of the model saved by --save-model is within max abs diff <= 1e-4 * max|w_torch| of
    torch's. BatchNorm running statistics are not compared: ONNX updates running_var with the biased batch variance
    and torch with the unbiased one (the reference file holds both; the difference is printed for information).
Exit 0 if every case passes, 1 otherwise, with one line per problem.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

LOSS_RTOL = 1e-4
WEIGHT_RTOL = 1e-4
CASES = [("mlp", "sgd"), ("mlp", "adam"), ("cnn", "sgd"), ("cnn", "adam")]
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")


def optimizer_flags(cfg):
    flags = ["--optimizer", cfg["name"], "--lr", repr(cfg["lr"])]
    return flags


def run_case(cleave, src, model, opt, tmp):
    problems = []
    ref_path = os.path.join(src, "models", "reference", f"{model}_{opt}.json")
    with open(ref_path) as f:
        ref = json.load(f)
    saved = os.path.join(tmp, f"{model}_{opt}.onnx")
    cmd = [cleave, "eval", os.path.join(src, ref["onnx"]),
           "--data", f"x={os.path.join(src, ref['data']['x'])},y={os.path.join(src, ref['data']['y'])}",
           "--batch", str(ref["batch"]), "--steps", str(ref["steps"])] + optimizer_flags(ref["optimizer"]) + [
           "--save-model", saved]
    name = f"{model}/{opt}"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return [f"{name}: `{' '.join(cmd)}` exited with {proc.returncode}: " + " | ".join(tail)]

    lines = proc.stdout.splitlines()
    losses = []
    for i, line in enumerate(lines):
        m = STEP_LINE.match(line)
        if not m or int(m.group(1)) != i + 1:
            problems.append(f"{name}: stdout line {i + 1} is {line!r}, expected 'step {i + 1} loss <value>'")
            return problems
        try:
            losses.append(float(m.group(2)))
        except ValueError:
            problems.append(f"{name}: stdout line {i + 1}: loss {m.group(2)!r} is not a number")
            return problems
    if len(losses) != ref["steps"]:
        problems.append(f"{name}: {len(losses)} step lines on stdout, expected {ref['steps']}")
        return problems

    worst_loss = 0.0
    for k, (got, want) in enumerate(zip(losses, ref["losses"]), start=1):
        rel = abs(got - want) / max(abs(want), 1e-30)
        worst_loss = max(worst_loss, rel)
        if not rel <= LOSS_RTOL:  # also catches NaN
            problems.append(f"{name}: step {k}: loss {got!r}, torch {want!r} (relative difference {rel:.3g} > "
                            f"{LOSS_RTOL:g})")

    if not os.path.exists(saved):
        problems.append(f"{name}: --save-model did not write {saved}")
        return problems
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(saved).graph.initializer}
    worst_weight = 0.0
    for pname, entry in ref["params"].items():
        want = np.asarray(entry["values"], dtype=np.float64).reshape(entry["shape"])
        if pname not in inits:
            problems.append(f"{name}: saved model has no initializer {pname!r}")
            continue
        got = inits[pname].astype(np.float64)
        if list(got.shape) != list(want.shape):
            problems.append(f"{name}: {pname}: saved shape {list(got.shape)}, torch {list(want.shape)}")
            continue
        diff = np.abs(got - want)
        bound = WEIGHT_RTOL * np.abs(want).max()
        scaled = float(diff.max() / np.abs(want).max())
        worst_weight = max(worst_weight, scaled)
        if not diff.max() <= bound:
            at = np.unravel_index(int(np.nanargmax(diff)) if not np.isnan(diff).any() else int(np.argmax(np.isnan(diff))),
                                  diff.shape)
            problems.append(f"{name}: {pname}{list(at)}: {got[at]!r}, torch {want[at]!r} (max abs diff "
                            f"{diff.max():.3g} > {bound:.3g} = {WEIGHT_RTOL:g} * max|w|)")

    stats_note = ""
    for sname, entry in ref.get("running_stats_onnx", {}).items():
        if sname in inits:
            want = np.asarray(entry["values"]).reshape(entry["shape"])
            d = float(np.abs(inits[sname] - want).max())
            stats_note = f"{stats_note}, {sname} vs ONNX rule {d:.2g}"
    print(f"{name}: {'ok' if not problems else 'FAILED'}: worst loss rel diff {worst_loss:.2g}, worst weight diff "
          f"{worst_weight:.2g} * max|w|{stats_note}", file=sys.stderr)
    return problems


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_reference.py <cleave-binary> <source-dir>")
    cleave, src = sys.argv[1], sys.argv[2]
    problems = []
    with tempfile.TemporaryDirectory(prefix="cleave_e2e_") as tmp:
        for model, opt in CASES:
            problems += run_case(cleave, src, model, opt, tmp)
    for p in problems:
        print(f"error: {p}")
    if problems:
        print(f"torch_reference: {len(problems)} problem(s)")
        return 1
    print(f"torch_reference: {len(CASES)} cases match torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
