"""`cleave run` on compiled bundles reproduces `cleave eval` (the reference interpreter, itself checked against
torch by tests/e2e): per-step losses within relative 1e-5 and --save-model weights within 1e-5 * max|w|, for the
`single` plan on 1 rank and the `data` plan on 2 (and 4) ranks, for models/mlp.onnx and models/cnn.onnx with SGD and
Adam; and programs split into parts (codegen/split_program.h, forced small by CLEAVE_SPLIT_LINES): the cnn's data plan
(one program for both ranks) and a random plan (a program per rank) on 2 ranks. Usage: run_matches_eval.py CLEAVE
SOURCE_DIR [WORK_DIR]."""
import os
import sys
import tempfile


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bundle_check import compare_run, losses, runtime_flags, sh, weights  # noqa: E402

CLEAVE, SRC = sys.argv[1], sys.argv[2]
RUNTIME_FLAGS = runtime_flags(CLEAVE)
CASES = [
    ("mlp", "models/data/digits_flat_train_x.npy"),
    ("cnn", "models/data/digits_train_x.npy"),
]
OPTS = [["--optimizer", "sgd", "--lr", "0.1"], ["--optimizer", "adam", "--lr", "0.01"]]
PLANS = [("single", 1), ("data", 2), ("data", 4)]
# (model, optimizer, planner, ranks, the parts it must have) of the split programs.
SPLIT = [("cnn", "sgd", "data", 2, ["ranks.h", "ranks_part1.cpp", "ranks_part2.cpp"]),
         ("cnn", "sgd", "random", 2, ["rank_1.h", "rank_1_part1.cpp", "rank_1_part2.cpp"])]
STEPS, BATCH = 8, 16


def main():
    problems = []
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model, x in CASES:
            onnx_path = os.path.join(SRC, "models", model + ".onnx")
            data = f"x={os.path.join(SRC, x)},y={os.path.join(SRC, 'models/data/digits_train_y.npy')}"
            for opt in OPTS:
                tag = f"{model}/{opt[1]}"
                ref_model = os.path.join(tmp, f"{model}_{opt[1]}_eval.onnx")
                ref = losses(sh([CLEAVE, "eval", onnx_path, "--data", data, "--batch", str(BATCH), "--steps",
                                 str(STEPS), "--save-model", ref_model] + opt))
                assert len(ref) == STEPS, ref
                ref_w = weights(ref_model)
                split = [(p, n, parts) for m, o, p, n, parts in SPLIT if (m, o) == (model, opt[1])]
                for planner, n, parts in [(p, n, None) for p, n in PLANS] + split:
                    bundle = os.path.join(tmp, f"{model}_{opt[1]}_{planner}{n}" + ("_split" if parts else ""))
                    if parts:
                        os.environ["CLEAVE_SPLIT_LINES"] = "40"
                    sh([CLEAVE, "compile", onnx_path, "--devices", str(n), "--planner", planner, "--batch",
                        str(BATCH), "-o", bundle] + opt)
                    os.environ.pop("CLEAVE_SPLIT_LINES", None)
                    missing = [f for f in parts or [] if not os.path.exists(os.path.join(bundle, "src", f))]
                    if missing:
                        problems.append(f"{tag} {planner} on {n} ranks: no split program (src/{missing[0]})")
                        continue
                    saved = bundle + "_trained.onnx"
                    got = losses(sh([CLEAVE, "run", bundle, "--data", data, "--steps", str(STEPS), "--save-model", saved]
                                    + RUNTIME_FLAGS))
                    where = f"{tag} {planner} on {n} rank(s)" + (" (split program)" if parts else "")
                    found, worst = compare_run(where, got, ref, saved, ref_w, STEPS)
                    problems += found
                    if len(got) != STEPS:
                        continue
                    print(f"{where}: worst loss rel diff {worst:.3g}, final loss {got[-1]:.9g}", flush=True)
                    checked += 1
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {checked} bundles match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
