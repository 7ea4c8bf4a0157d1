"""ParaDL's strategies as plans (`cleave oracle --plans-dir`, planner/search/oracle.h) train exactly like `cleave eval` (the
1-rank interpreter): the pipeline (every op on one device, stages on devices 2, 1, 0), channel parallelism (partial
conv outputs reduced) and data+spatial on a 2x2 mesh (batch x image rows, halos) of models/cnn.onnx, each compiled,
run under mpirun (`cleave run --build-type Debug`) and compared step by step: losses and saved weights within
relative 1e-5. Also: the oracle's table is the same with and without --plans-dir, and every written plan is one the
oracle priced (its device count and strategy in the file name).
Usage: oracle_plans.py CLEAVE SOURCE_DIR."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import compare_run, losses, runtime_flags, sh, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
OPT = ["--optimizer", "momentum", "--lr", "0.05"]
STEPS, BATCH = 3, 16
# (devices, strategy) plans that are built and run.
CASES = [(3, "pipeline"), (2, "channel"), (4, "data+spatial")]


def main():
    problems = []
    onnx_path = os.path.join(SRC, "models", "cnn.onnx")
    data = (f"x={os.path.join(SRC, 'models/data/digits_train_x.npy')},"
            f"y={os.path.join(SRC, 'models/data/digits_train_y.npy')}")
    with tempfile.TemporaryDirectory() as tmp:
        plans = os.path.join(tmp, "plans")
        os.mkdir(plans)
        base = [CLEAVE, "oracle", onnx_path, "--batch", str(BATCH), "--devices", "2,3,4", "--planners", "data"] + OPT
        table = sh(base + ["--plans-dir", plans])
        if table != sh(base):
            problems.append("the table differs with --plans-dir")
        written = sorted(os.listdir(plans))
        print(f"oracle wrote {len(written)} plans: {' '.join(written)}", flush=True)
        ref_model = os.path.join(tmp, "eval.onnx")
        ref = losses(sh([CLEAVE, "eval", onnx_path, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS),
                         "--save-model", ref_model] + OPT))
        ref_w = weights(ref_model)
        for devices, strategy in CASES:
            plan = os.path.join(plans, f"{devices}-{strategy}.plan")
            if not os.path.exists(plan):
                problems.append(f"{strategy} on {devices}: no plan written")
                continue
            bundle = os.path.join(tmp, f"{strategy}{devices}")
            sh([CLEAVE, "compile", onnx_path, "--plan", plan, "--batch", str(BATCH), "-o", bundle] + OPT)
            saved = bundle + "_trained.onnx"
            got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model", saved,
                             "--build-type", "Debug"] + runtime_flags(CLEAVE)))
            where = f"cnn {strategy} on {devices} ranks"
            found, worst = compare_run(where, got, ref, saved, ref_w, STEPS)
            problems += found
            print(f"{where}: worst loss rel diff {worst:.3g}", flush=True)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(CASES)} oracle plans match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
