"""The search planners (planner/search/tofu.h, planner/search/baselines.h) on models/mlp.onnx and models/cnn.onnx:
- `cleave plan` with each planner on 2 and 4 devices succeeds (the plan passes validate_plan inside the planner) and
  is byte-identical across two runs;
- one bundle per planner (alternating the model and 2/4 devices, to stay fast) compiles, and `cleave run` reproduces
  `cleave eval` (the reference interpreter): per-step losses and saved weights within relative 1e-5; so does tofu's
  plan of the CNN on 8 devices of p100-4x4 (2 nodes of 4), whose device order is permuted (the hierarchy-aware
  search splits inside nodes first: devices=[0,4,1,5,...]).
Usage: search_planners.py CLEAVE SOURCE_DIR."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import compare_run, losses, runtime_flags, sh, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
RUNTIME_FLAGS = runtime_flags(CLEAVE)
DATA = {"mlp": "models/data/digits_flat_train_x.npy", "cnn": "models/data/digits_train_x.npy"}
PLANNERS = ["tofu", "icml18", "owt", "allrow", "spartan", "equalchop"]
# (planner, model, devices, topology) bundles that are built and run.
BUNDLES = [("tofu", "cnn", 4, None), ("icml18", "mlp", 4, None), ("owt", "cnn", 2, None), ("allrow", "mlp", 2, None),
           ("spartan", "cnn", 4, None), ("equalchop", "mlp", 4, None), ("tofu", "cnn", 8, "p100-4x4")]
OPT = ["--optimizer", "momentum", "--lr", "0.05"]
STEPS, BATCH = 4, 16


def where(planner, model, n, topology):
    return f"{model} {planner} on {n} ranks" + (f" of {topology}" if topology else "")


def main():
    problems = []
    for model in DATA:
        onnx_path = os.path.join(SRC, "models", model + ".onnx")
        for planner in PLANNERS:
            for n in (2, 4):
                cmd = [CLEAVE, "plan", onnx_path, "--planner", planner, "--devices", str(n), "--batch", str(BATCH)]
                cmd += OPT
                a, b = sh(cmd), sh(cmd)
                if a != b:
                    problems.append(f"{model} {planner} {n}: plans differ across runs")
    print(f"plans: {len(DATA) * len(PLANNERS) * 2} planned twice, identical", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        refs = {}
        for planner, model, n, topology in BUNDLES:
            onnx_path = os.path.join(SRC, "models", model + ".onnx")
            data = f"x={os.path.join(SRC, DATA[model])},y={os.path.join(SRC, 'models/data/digits_train_y.npy')}"
            if model not in refs:
                ref_model = os.path.join(tmp, f"{model}_eval.onnx")
                ref = losses(sh([CLEAVE, "eval", onnx_path, "--data", data, "--batch", str(BATCH), "--steps",
                                 str(STEPS), "--save-model", ref_model] + OPT))
                refs[model] = (ref, weights(ref_model))
            ref, ref_w = refs[model]
            bundle = os.path.join(tmp, f"{model}_{planner}{n}{topology or ''}")
            topo = ["--topology", topology] if topology else []
            sh([CLEAVE, "compile", onnx_path, "--devices", str(n), "--planner", planner, "--batch", str(BATCH),
                "-o", bundle] + topo + OPT)
            if topology:
                order = next(line for line in open(os.path.join(bundle, "plan.txt")) if line.startswith("op "))
                if "devices=[0,1,2,3,4,5,6,7]" in order:
                    problems.append(f"{where(planner, model, n, topology)}: device order not permuted: {order}")
            saved = bundle + "_trained.onnx"
            got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model", saved]
                            + RUNTIME_FLAGS))
            where_ = where(planner, model, n, topology)
            found, worst = compare_run(where_, got, ref, saved, ref_w, STEPS)
            problems += found
            print(f"{where_}: worst loss rel diff {worst:.3g}", flush=True)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(BUNDLES)} bundles match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
