#!/usr/bin/env python3
"""--val-data/--val-every of `cleave eval` and `cleave run` against torch's validation loop: model.eval(), then
F.cross_entropy over the whole validation set and the share of samples whose argmax is the label.

Models: the MLP and the CNN of models/ (the CNN's BatchNorm validates with its running statistics), and a net written
here with BatchNorm1d (16 values per channel: torch's running variance is the batch's unbiased variance, 16/15 of
ONNX's) and Dropout(0.5) (off in validation). Training: SGD, batch 16, the samples of
models/make_reference.py; validation on the 297 digits test samples (18 full batches and a partial one: the last
batch wraps around and must count only its 9 new samples), after steps 3 and 6.
  - cleave eval's val lines = torch's (loss within 1e-5 relative, accuracy within one sample). The Dropout net trains
    with lr 1e-9 (its masks are drawn differently from torch's), so its validation sees the initial weights and the
    running statistics of 6 batches; its running variance after them (--save-model) = torch's within 1e-6. It runs
    again with --accumulate 2 (torch: two forward passes per step, each updating the running statistics).
  - cleave run's val lines (1 rank; 2 ranks data-parallel; 4 ranks tofu) = cleave eval's within 1e-5, and its
    step lines the same bytes as a run without validation (validating changes no state).
  - bad input: --val-every without --val-data, a val file of the wrong sample shape (eval and run): one error
    line, a non-zero exit.

Usage: validation_vs_torch.py CLEAVE_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models"))
import make_models  # noqa: E402
import make_reference  # noqa: E402

BATCH, STEPS, EVERY = 16, 6, 3
DATA_DIR = os.path.join(src, "models", "data")
TEST = {"mlp": "digits_flat_test_x.npy", "cnn": "digits_test_x.npy", "dropout": "digits_flat_test_x.npy"}
TRAIN = {"mlp": "digits_flat_train_x.npy", "cnn": "digits_train_x.npy", "dropout": "digits_flat_train_x.npy"}
LR = {"mlp": 0.1, "cnn": 0.1, "dropout": 1e-9}


def dropout_model():
    torch.manual_seed(1)
    return make_models.WithLoss(nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5),
                                              nn.Linear(32, 10)))


def model_for(name, work):
    """(torch module, its .onnx path) with the same initial weights."""
    if name != "dropout":
        model = make_models.make_model(name)
        path = os.path.join(src, "models", f"{name}.onnx")
        make_reference.load_from_onnx(model, path)
        return model, path
    model = dropout_model()
    path = os.path.join(work, "dropout.onnx")
    x, y = torch.zeros(BATCH, 64), torch.zeros(BATCH, dtype=torch.int64)
    torch.onnx.export(model, (x, y), path, input_names=["x", "y"], output_names=["loss"], opset_version=15,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    model = dropout_model()
    make_reference.load_from_onnx(model, path)  # the export's trace ran a training step: its running statistics
    return model, path


def torch_val_lines(model, name, passes=1):
    xs, ys = np.load(os.path.join(DATA_DIR, TRAIN[name])), np.load(os.path.join(DATA_DIR, "digits_train_y.npy"))
    vx = torch.from_numpy(np.load(os.path.join(DATA_DIR, TEST[name])))
    vy = torch.from_numpy(np.load(os.path.join(DATA_DIR, "digits_test_y.npy")))
    opt = torch.optim.SGD(model.parameters(), lr=LR[name])
    out = {}
    for step in range(1, STEPS + 1):
        model.train()
        opt.zero_grad()
        for micro in range(passes):
            idx = make_reference.batch_indices((step - 1) * passes + micro + 1, len(xs))
            (model(torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])) / passes).backward()
        opt.step()
        if step % EVERY == 0:
            model.eval()
            with torch.no_grad():
                scores = model.net(vx)
                out[step] = (float(F.cross_entropy(scores, vy)), float((scores.argmax(1) == vy).double().mean()))
    return out


def parse(stdout):
    vals = {int(w[1]): (float(w[3]), float(w[5])) for w in (l.split() for l in stdout.splitlines()) if w[:1] == ["val"]}
    steps = [l for l in stdout.splitlines() if l.startswith("step ")]
    return vals, steps


def close(got, want, tol, samples=297):
    return (set(got) == set(want) and all(abs(got[k][0] - want[k][0]) <= tol * max(1.0, abs(want[k][0])) and
                                          abs(got[k][1] - want[k][1]) <= 1.0 / samples + 1e-9 for k in want))


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, CLEAVE_CACHE_DIR=os.environ.get("CLEAVE_CACHE_DIR", os.path.join(work, "cache")))
        for name, passes in (("mlp", 1), ("cnn", 1), ("dropout", 1), ("dropout", 2)):
            model, path = model_for(name, work)
            want = torch_val_lines(model, name, passes)
            data = f"x={DATA_DIR}/{TRAIN[name]},y={DATA_DIR}/digits_train_y.npy"
            val = f"x={DATA_DIR}/{TEST[name]},y={DATA_DIR}/digits_test_y.npy"
            train = ["--optimizer", "sgd", "--lr", str(LR[name])]
            knobs = ["--steps", str(STEPS), "--val-data", val, "--val-every", str(EVERY), "--accumulate", str(passes)]
            saved = os.path.join(work, f"{name}-trained.onnx")
            r = subprocess.run([cleave, "eval", path, "--batch", str(BATCH), "--data", data, *train, *knobs,
                                "--save-model", saved], capture_output=True, text=True, env=env)
            evals = parse(r.stdout)[0]
            ok = r.returncode == 0 and close(evals, want, 1e-5)
            if ok and name.startswith("dropout"):
                trained = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved).graph.initializer}
                got_var, want_var = trained["net.1.running_var"], model.net[1].running_var.detach().numpy()
                var_err = float(np.abs(got_var - want_var).max() / np.abs(want_var).max())
                ok = var_err <= 1e-6
                print(f"{'ok' if ok else 'FAIL'} dropout running_var vs torch: max rel error {var_err:.2e}")
            failures += not ok
            name = f"{name} x{passes}"
            print(f"{'ok' if ok else 'FAIL'} {name} eval vs torch: {evals} vs {want} {r.stderr.strip()[-300:]}")
            for ranks, planner in ((1, "data"), (2, "data"), (4, "tofu")):
                bundle = os.path.join(work, f"{name.split()[0]}-{ranks}-{planner}")
                if not os.path.exists(bundle):
                    subprocess.run([cleave, "compile", path, "--batch", str(BATCH), "--devices", str(ranks), "--planner",
                                    planner, *train, "-o", bundle], check=True, stderr=subprocess.DEVNULL, env=env)
                r = subprocess.run([cleave, "run", bundle, "--data", data, *knobs], capture_output=True, text=True,
                                   env=env)
                plain = subprocess.run([cleave, "run", bundle, "--data", data, "--steps", str(STEPS), "--accumulate",
                                        str(passes)],
                                       capture_output=True, text=True, env=env)
                got, steps = parse(r.stdout)
                ok = r.returncode == 0 and close(got, evals, 1e-5) and steps == parse(plain.stdout)[1] and steps
                failures += not ok
                print(f"{'ok' if ok else 'FAIL'} {name} run {ranks} {planner} vs eval: {got} "
                      f"{r.stderr.strip().splitlines()[-1:] if r.returncode else ''}")

        # Bad input: one line, exit 2.
        mlp = os.path.join(src, "models", "mlp.onnx")
        data = f"x={DATA_DIR}/digits_flat_train_x.npy,y={DATA_DIR}/digits_train_y.npy"
        wrong = f"x={DATA_DIR}/digits_test_x.npy,y={DATA_DIR}/digits_test_y.npy"
        bundle = os.path.join(work, "mlp-1-data")
        for what, cmd, expect in (
                ("--val-every alone", [cleave, "eval", mlp, "--batch", "16", "--data", data, "--val-every", "2"],
                 "--val-every"),
                ("val file of the wrong shape (eval)",
                 [cleave, "eval", mlp, "--batch", "16", "--data", data, "--val-data", wrong], "digits_test_x.npy"),
                ("val file of the wrong shape (run)", [cleave, "run", bundle, "--data", data, "--val-data", wrong],
                 "digits_test_x.npy")):
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            lines = r.stderr.strip().splitlines()
            ok = r.returncode in (1, 2) and len(lines) == 1 and expect in lines[0]
            failures += not ok
            print(f"{'ok' if ok else 'FAIL'} {what}: exit {r.returncode}: {lines}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
