#!/usr/bin/env python3
"""Learning-rate schedules, gradient clipping and accumulation of `cleave run` (rt::TrainingRun) against
torch.optim.lr_scheduler, torch.nn.utils.clip_grad_norm_ and a loop of backward passes.

For the MLP and the CNN of models/ (batch 16, 8 steps, the samples of models/make_reference.py), each schedule is run
by a 1-rank bundle and by torch 1.13 from the same initializers, torch calling scheduler.step() after every
optimizer.step(); the 8 losses must agree within 1e-4 (relative to max(1, |torch|)), and torch's losses under the
schedule must differ from its constant-rate losses by more than 1e-3 (else the comparison could not tell). Warm-up is torch's
SequentialLR of LinearLR(start_factor=1/W, total_iters=W-1) and the schedule (milestone W); onecycle is OneCycleLR
with cycle_momentum=False. Accumulation (--accumulate 2) is torch's loop of two backward passes of loss/2 per
optimizer step on the next two batches, the loss line their mean. Clipping and accumulation run at 1 rank, 2 ranks data-parallel (replicated gradients count once) and 4 ranks tofu (split
gradients).

Usage: schedules_vs_torch.py CLEAVE_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models"))
import make_models  # noqa: E402
import make_reference  # noqa: E402

STEPS, BATCH = 8, 16
torch.manual_seed(0)
warnings.filterwarnings("ignore", message="The epoch parameter")  # SequentialLR's own call in torch 1.13

# (name, cleave flags, torch scheduler factory(optimizer))
S = torch.optim.lr_scheduler
CASES = [
    ("step", ["--lr-schedule", "step", "--step-size", "3", "--gamma", "0.5"],
     lambda o: S.StepLR(o, step_size=3, gamma=0.5)),
    ("multistep", ["--lr-schedule", "multistep", "--milestones", "2,5", "--gamma", "0.3"],
     lambda o: S.MultiStepLR(o, milestones=[2, 5], gamma=0.3)),
    ("cosine", ["--lr-schedule", "cosine", "--min-lr", "0.01"],
     lambda o: S.CosineAnnealingLR(o, T_max=STEPS, eta_min=0.01)),
    ("cosine+warmup", ["--lr-schedule", "cosine", "--warmup-steps", "3"],
     lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=1 / 3, end_factor=1.0, total_iters=2),
                                  S.CosineAnnealingLR(o, T_max=STEPS - 3)], milestones=[3])),
    ("linear", ["--lr-schedule", "linear", "--min-lr", "0.02"],
     lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.02 / o.defaults["lr"], total_iters=STEPS)),
    ("onecycle", ["--lr-schedule", "onecycle"],
     lambda o: S.OneCycleLR(o, max_lr=o.defaults["lr"], total_steps=STEPS, cycle_momentum=False)),
]
# Gradient clipping and accumulation: (name, cleave flags, (max_norm, passes per step) for torch, scheduler factory).
CLIPS = [("clip 0.5", ["--clip-grad-norm", "0.5"], (0.5, 1), lambda o: S.ConstantLR(o, factor=1.0)),
         ("clip 0.3 + cosine", ["--clip-grad-norm", "0.3", "--lr-schedule", "cosine"], (0.3, 1),
          lambda o: S.CosineAnnealingLR(o, T_max=STEPS)),
         ("accumulate 2", ["--accumulate", "2"], (None, 2), lambda o: S.ConstantLR(o, factor=1.0)),
         ("accumulate 3 + clip 0.5", ["--accumulate", "3", "--clip-grad-norm", "0.5"], (0.5, 3),
          lambda o: S.ConstantLR(o, factor=1.0))]
OPTIMIZERS = {"sgd": (["--optimizer", "sgd", "--lr", "0.1"], lambda p: torch.optim.SGD(p, lr=0.1)),
              "adam": (["--optimizer", "adam", "--lr", "0.01"], lambda p: torch.optim.Adam(p, lr=0.01))}


def torch_losses(model_name, make_opt, make_sched, knobs=(None, 1)):
    clip, passes = knobs
    model = make_models.make_model(model_name)
    make_reference.load_from_onnx(model, os.path.join(src, "models", f"{model_name}.onnx"))
    model.train()
    xf, yf = make_reference.DATA[model_name]
    xs = np.load(os.path.join(src, "models", "data", xf))
    ys = np.load(os.path.join(src, "models", "data", yf))
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    out = []
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        total = 0.0
        for micro in range(passes):
            idx = make_reference.batch_indices((step - 1) * passes + micro + 1, len(xs))
            loss = model(torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])) / passes
            loss.backward()
            total += float(loss)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        out.append(total)
    return out


def partitioned(env, work, model_name, opt_flags, opt_name, ranks, planner):
    """The model's bundle for `ranks` ranks under `planner` (compiled once)."""
    path = os.path.join(work, f"{model_name}-{opt_name}-{ranks}-{planner}")
    if not os.path.exists(path):
        subprocess.run([cleave, "compile", os.path.join(src, "models", f"{model_name}.onnx"), "--batch", str(BATCH),
                        "--devices", str(ranks), "--planner", planner, *opt_flags, "-o", path], check=True,
                       stderr=subprocess.DEVNULL, env=env)
    return path


def check(env, bundle, data, model_name, opt_name, make_opt, name, flags, clip, make_sched, ranks):
    what = f"{model_name} {opt_name} {name} ({ranks})"
    r = subprocess.run([cleave, "run", bundle, "--data", data, "--steps", str(STEPS), *flags],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"FAIL {what}: {r.stderr.strip().splitlines()[-1:]}")
        return False
    got = [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]
    want = torch_losses(model_name, make_opt, make_sched, clip or (None, 1))
    plain = torch_losses(model_name, make_opt, lambda o: S.ConstantLR(o, factor=1.0))
    apart = max(abs(a - b) for a, b in zip(want, plain))
    worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(got, want)) if len(got) == STEPS else 1
    ok = len(got) == STEPS and worst <= 1e-4 and apart > 1e-3
    print(f"{'ok' if ok else 'FAIL'} {what}: max rel diff {worst:.2e} over {len(got)} steps (last loss "
          f"{got[-1] if got else None} vs torch {want[-1]:.9g}; {apart:.1e} from plain training's)")
    return ok


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, CLEAVE_CACHE_DIR=os.environ.get("CLEAVE_CACHE_DIR", os.path.join(work, "cache")))
        for model_name in ("mlp", "cnn"):
            xf, yf = make_reference.DATA[model_name]
            data = f"x={src}/models/data/{xf},y={src}/models/data/{yf}"
            for opt_name, (opt_flags, make_opt) in OPTIMIZERS.items():
                bundle = os.path.join(work, f"{model_name}-{opt_name}")
                subprocess.run([cleave, "compile", os.path.join(src, "models", f"{model_name}.onnx"), "--batch",
                                str(BATCH), "--devices", "1", *opt_flags, "-o", bundle], check=True,
                               stderr=subprocess.DEVNULL, env=env)
                cases = [(n, f, None, m) for n, f, m in CASES]
                if opt_name == "adam":
                    cases = [c for c in cases if c[0] in ("cosine+warmup", "onecycle")]
                else:
                    cases += CLIPS  # (Adam is nearly invariant to a gradient's scale: clipping shows with SGD)
                for name, flags, clip, make_sched in cases:
                    for ranks, planner in (((1, "data"), (2, "data"), (4, "tofu")) if clip else ((1, "data"),)):
                        b = bundle if ranks == 1 else partitioned(env, work, model_name, opt_flags, opt_name, ranks,
                                                                  planner)
                        failures += not check(env, b, data, model_name, opt_name, make_opt, name, flags, clip,
                                              make_sched, f"{ranks} {planner}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
