"""Hand-written plans (tests/codegen/plans/*.plan) compile, and `cleave run` of their bundles reproduces `cleave eval`
(the reference interpreter, checked against torch by tests/e2e): every per-step loss within relative 1e-5 and the
--save-model weights within 1e-5 * max|w|, SGD lr 0.1, batch 16, 8 steps. The plan's model is the file name's
prefix (mlp_*, cnn_*), its device count the `plan devices=N` line. Also prints (does not check) the per-rank
peak_memory_bytes of the 4-way MLP weight-split plan against the 1-rank `single` plan.
Usage: check_hand_plans.py CLEAVE SOURCE_DIR."""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bundle_check import losses, runtime_flags, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
RUNTIME_FLAGS = runtime_flags(CLEAVE)
DATA_X = {"mlp": "models/data/digits_flat_train_x.npy", "cnn": "models/data/digits_train_x.npy"}
OPT = ["--optimizer", "sgd", "--lr", "0.1"]
STEPS, BATCH = 8, 16
MEMORY_PLAN = "mlp_col_4"


class Refused(Exception):
    pass


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise Refused(f"exit {r.returncode} from `{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd[:2]))} ...`: {last}")
    return r.stdout


def peaks(bundle):
    with open(os.path.join(bundle, "manifest.json")) as f:
        return [r["peak_memory_bytes"] for r in json.load(f)["per_rank"]]


def plan_devices(path):
    with open(path) as f:
        for line in f:
            if line.startswith("plan devices="):
                return int(line.split("=")[1])
    raise SystemExit(f"{path}: no `plan devices=N` line")


def main():
    plans = sorted(glob.glob(os.path.join(SRC, "tests/codegen/plans/*.plan")))
    if not plans:
        raise SystemExit("no plans found")
    problems, refs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in plans:
            name = os.path.basename(path)[:-len(".plan")]
            model = name.split("_")[0]
            onnx_path = os.path.join(SRC, "models", model + ".onnx")
            data = f"x={os.path.join(SRC, DATA_X[model])},y={os.path.join(SRC, 'models/data/digits_train_y.npy')}"
            if model not in refs:
                ref_model = os.path.join(tmp, f"{model}_eval.onnx")
                ref = losses(sh([CLEAVE, "eval", onnx_path, "--data", data, "--batch", str(BATCH), "--steps",
                                 str(STEPS), "--save-model", ref_model] + OPT))
                assert len(ref) == STEPS, ref
                refs[model] = (ref, weights(ref_model))
            ref, ref_w = refs[model]
            n = plan_devices(path)
            bundle = os.path.join(tmp, name)
            saved = bundle + "_trained.onnx"
            try:
                sh([CLEAVE, "compile", onnx_path, "--devices", str(n), "--plan", path, "--batch", str(BATCH), "-o",
                    bundle] + OPT)
                got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model", saved]
                                + RUNTIME_FLAGS))
            except Refused as e:
                problems.append(f"{name}: {e}")
                print(f"{name} ({n} ranks): REFUSED: {e}", flush=True)
                continue
            if len(got) != STEPS:
                problems.append(f"{name}: {len(got)} loss lines, want {STEPS}")
                continue
            worst_loss = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
            if worst_loss > 1e-5:
                problems.append(f"{name}: losses {got} vs eval {ref} (worst rel {worst_loss:.3g})")
            got_w = weights(saved)
            worst_w, worst_name = 0.0, "-"
            for wname, w in sorted(ref_w.items()):
                if not np.issubdtype(w.dtype, np.floating):
                    continue
                if wname not in got_w:
                    problems.append(f"{name}: {wname} missing from the saved model")
                    continue
                scale = max(1.0, float(np.abs(w).max()))
                rel = float(np.abs(got_w[wname].astype(np.float64) - w).max()) / scale
                if rel > worst_w:
                    worst_w, worst_name = rel, wname
                if rel > 1e-5:
                    problems.append(f"{name}: {wname} differs by {rel:.3g} x max|w| (tol 1e-5)")
            print(f"{name} ({n} ranks): worst loss rel diff {worst_loss:.3g}, worst weight diff {worst_w:.3g} x max|w| "
                  f"({worst_name}), final loss {got[-1]:.9g}", flush=True)
            if name == MEMORY_PLAN:
                single = os.path.join(tmp, "mlp_single_1")
                sh([CLEAVE, "compile", onnx_path, "--devices", "1", "--planner", "single", "--batch", str(BATCH),
                    "-o", single] + OPT)
                one = peaks(single)[0]
                split = peaks(bundle)
                print(f"memory: {name} per-rank peak_memory_bytes {split} vs single (1 rank) {one}: "
                      f"max ratio {max(split) / one:.3f} (target <= 0.35, not checked)", flush=True)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(plans)} hand-written plans match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
