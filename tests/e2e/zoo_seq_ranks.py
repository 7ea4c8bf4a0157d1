"""The tiny Transformer of models/zoo (embeddings, LayerNormalization, attention with batched MatMul, GELU, a
per-token SoftmaxCrossEntropyLoss) compiled with the data planner for 2 and 4 ranks trains like the 1-rank
`cleave eval` (the interpreter, itself checked against torch by tests/e2e/tiny_transformer.py): per-step losses
within relative 1e-5. Usage (CTest): /usr/bin/python3 tests/e2e/zoo_seq_ranks.py <cleave-binary> <source-dir>"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "codegen"))
from bundle_check import runtime_flags  # noqa: E402

STEPS, BATCH, SEQ, VOCAB = 3, 8, 8, 32


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def losses(out):
    return [float(l.split()[3]) for l in out.splitlines() if l.startswith("step ")]


def main():
    cleave, src = sys.argv[1], sys.argv[2]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "transformer.onnx")
        sh(["/usr/bin/python3", os.path.join(src, "models/zoo/generate.py"), "--family", "transformer", "--variant",
            "tiny", "-o", model])
        rng = np.random.default_rng(0)
        xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(xp, rng.integers(0, VOCAB, (STEPS * BATCH, SEQ)).astype(np.int64))
        np.save(yp, rng.integers(0, VOCAB, (STEPS * BATCH, SEQ)).astype(np.int64))
        data = f"x={xp},y={yp}"
        opt = ["--optimizer", "sgd", "--lr", "0.1"]
        ref = losses(sh([cleave, "eval", model, "--data", data, "--batch", str(BATCH), "--steps", str(STEPS)] + opt))
        assert len(ref) == STEPS, ref
        for ranks in (2, 4):
            bundle = os.path.join(tmp, f"data{ranks}")
            sh([cleave, "compile", model, "--planner", "data", "--devices", str(ranks), "--batch", str(BATCH), "-o",
                bundle] + opt)
            got = losses(sh([cleave, "run", bundle, "--data", data, "--steps", str(STEPS)] + runtime_flags(cleave)))
            worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref)) if len(got) == STEPS else float("inf")
            print(f"transformer: data on {ranks} ranks vs 1 rank worst loss rel diff {worst:.3g}", flush=True)
            if worst > 1e-5:
                problems.append(f"{ranks} ranks: losses {got} vs eval {ref}")
    if problems:
        print("\n".join(problems))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
