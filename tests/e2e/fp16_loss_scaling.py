#!/usr/bin/env python3
"""`--precision fp16` (ir/autocast.h's CUDA op lists, dynamic loss scaling) against torch 1.13.

torch 1.13 runs no float16 autocast on CPUs (its CPU autocast is bfloat16 only, and its CPU GEMMs and convolutions
have no half kernels), so the reference is torch computing in float32 with the casts CUDA's autocast would insert,
written out as a cast function whose forward is `x.half().float()` and whose backward rounds the incoming gradient
the same way (a cast's backward): a Linear or Conv2d reads its input, weight and bias as float16 values and gives a
float16 result, as do BatchNorm2d and the average pool on float16 inputs; ReLU, max pooling and flattening keep
float16 values; cross_entropy computes in float32. Dynamic loss scaling is torch.cuda.amp.GradScaler's algorithm
with its default factors (backoff 0.5, growth 2), written out below since GradScaler disables itself without CUDA:
scale the loss, skip optimizer.step() when any gradient is not finite and halve the scale, else multiply the
gradients by 1/scale in float32, step, and double the scale after GROWTH good steps in a row.

For the MLP and the CNN of models/ (batch 16, the samples of models/make_reference.py, Adam, first scale 2^24 so
that the first steps overflow in float16 and are skipped), STEPS steps are run by torch and by `cleave eval
--precision fp16`. Checks, per model:
  - the same steps are skipped with the same scales (the part of the run loss scaling decides);
  - every loss is within TOL of torch's (float16 rounding of float32 sums accumulated in different orders differs
    by an ulp here and there); the first step's loss of Cleave fp16 is closer to torch's than Cleave fp32's is;
  - 2-rank bundles with the data and tofu plans (and the CNN's random plan on 4 ranks) print eval's lines: losses
    within SAME, scales and skips equal;
  - with --accumulate 2 on the MLP (each pass seeded with scale / 2, as torch's recipe scales loss / K), eval follows
    torch and 2 data ranks follow eval;
  - a run stopped after step STOP with a checkpoint and resumed (on the same bundle, and resharded onto the tofu
    bundle) prints the uninterrupted run's later steps: the scale, its growth count (2 there, so the scale doubles a
    step after the resume) and Adam's count of skipped steps are part of the checkpoint.

Usage: fp16_loss_scaling.py CLEAVE_BINARY SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

cleave, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "models"))
import make_models  # noqa: E402
import make_reference  # noqa: E402

STEPS, STOP, TOL, INIT, GROWTH, LR = 12, 8, 2e-3, 2.0**24, 3, 0.01
# Partitioned runs sum in other orders than `cleave eval`, and a float32 sum that lands on the other side of a
# float16 rounding boundary moves that element by a float16 ulp (5e-4 relative): their losses agree to 1e-4 here,
# not to float32's 1e-5 (they print 4e-6 on the development machine; another BLAS may flip other roundings).
SAME = 1e-4
LINE = re.compile(r"^step (\d+) loss (\S+) loss_scale (\S+)( skipped)?$")


class Half(torch.autograd.Function):
    """A cast to float16 and back, as autocast's cast and its backward."""

    @staticmethod
    def forward(ctx, x):
        return x.half().float()

    @staticmethod
    def backward(ctx, g):
        return g.half().float()


def h(x):
    return None if x is None else Half.apply(x)


def autocast_fp16(model):
    """Rewrites the modules' forwards with the casts torch.autocast("cuda", torch.float16) inserts."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.forward = lambda x, m=m: h(F.linear(h(x), h(m.weight), h(m.bias)))
        elif isinstance(m, nn.Conv2d):
            m.forward = lambda x, m=m: h(m._conv_forward(h(x), h(m.weight), h(m.bias)))
        elif isinstance(m, (nn.BatchNorm2d, nn.AdaptiveAvgPool2d)):
            m.forward = lambda x, m=m, f=m.forward: h(f(x))
    return model


def torch_run(name, path, data, accumulate=1):
    """GradScaler's recipe; with accumulation, each pass backpropagates scale * loss / K (the logged loss is the
    passes' mean)."""
    model = make_models.make_model(name)
    make_reference.load_from_onnx(model, path)
    autocast_fp16(model)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    scale, tracker, out = INIT, 0, []
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        loss = 0.0
        for micro in range(accumulate):
            pass_loss = model(*data((step - 1) * accumulate + micro + 1)) / accumulate
            (pass_loss * scale).backward()
            loss += float(pass_loss)
        grads = [p.grad for p in model.parameters()]
        skipped = any(not torch.isfinite(g).all() for g in grads)
        out.append((step, float(loss), scale, skipped))
        if skipped:
            scale, tracker = scale * 0.5, 0
            continue
        inv = torch.tensor(1.0 / scale, dtype=torch.float64).float()
        for g in grads:
            g.mul_(inv)
        opt.step()
        tracker += 1
        if tracker == GROWTH:
            scale, tracker = scale * 2, 0
    return out


def cleave_lines(args, what):
    r = subprocess.run([cleave, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {what}: cleave {' '.join(args)}: {r.stderr.strip().splitlines()[-1:]}")
    out = []
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m[1]), float(m[2]), float(m[3]), bool(m[4])))
        elif line.startswith("step "):
            raise SystemExit(f"FAIL: {what}: unexpected line {line!r}")
    return out


def rel(a, b):
    return max(abs(p[1] - q[1]) / max(1.0, abs(q[1])) for p, q in zip(a, b))


def same_run(got, want, tol):
    return (len(got) == len(want) and [(s, sc, sk) for s, _, sc, sk in got] == [(s, sc, sk) for s, _, sc, sk in want]
            and rel(got, want) <= tol)


def main():
    failures = 0

    def check(ok, text):
        nonlocal failures
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'} {text}")

    with tempfile.TemporaryDirectory() as work:
        for name in ("mlp", "cnn"):
            path = os.path.join(src, "models", f"{name}.onnx")
            xf, yf = make_reference.DATA[name]
            xs = np.load(os.path.join(src, "models", "data", xf))
            ys = np.load(os.path.join(src, "models", "data", yf))

            def data(step, xs=xs, ys=ys):
                idx = make_reference.batch_indices(step, len(xs))
                return torch.from_numpy(xs[idx]), torch.from_numpy(ys[idx])

            cdata = f"x={src}/models/data/{xf},y={src}/models/data/{yf}"
            train = ["--batch", str(make_reference.BATCH), "--optimizer", "adam", "--lr", str(LR)]
            scaling = ["--precision", "fp16", "--loss-scale", str(INIT), "--loss-scale-growth-interval", str(GROWTH)]
            want = torch_run(name, path, data)
            if name == "mlp":  # --accumulate 2: two passes per step, seeded with scale / 2, gradients summed
                acc = cleave_lines(["eval", path, *train, *scaling, "--data", cdata, "--steps", str(STEPS),
                                    "--accumulate", "2"], "eval --accumulate 2")
                acc_torch = torch_run(name, path, data, accumulate=2)
                check(same_run(acc, acc_torch, TOL) and 0 < sum(s[3] for s in acc) < STEPS,
                      f"mlp --accumulate 2: cleave eval skips the steps torch skips, scales "
                      f"{[s[2] for s in acc]}, losses within {rel(acc, acc_torch):.1e}")
            ev = cleave_lines(["eval", path, *train, *scaling, "--data", cdata, "--steps", str(STEPS)], "eval")
            fp32 = subprocess.run([cleave, "eval", path, *train, "--data", cdata, "--steps", "1"], capture_output=True,
                                  text=True, check=True).stdout.split()[3]
            first16, first32 = abs(ev[0][1] - want[0][1]), abs(float(fp32) - want[0][1])
            skips = sum(s[3] for s in want)
            check(same_run(ev, want, TOL) and 0 < skips < STEPS and 4 * first16 < first32,
                  f"{name}: cleave eval --precision fp16 vs torch with CUDA autocast's casts and GradScaler: "
                  f"{skips} of {STEPS} steps skipped in both, scales {[s[2] for s in ev]}; losses within "
                  f"{rel(ev, want):.1e} (tolerance {TOL}); step 1: fp16 {first16:.1e} from torch, fp32 {first32:.1e}")
            if not same_run(ev, want, TOL):
                print(f"  cleave {ev}\n  torch  {want}")
            bundles, runs = {}, {}
            # The CNN's random plan on 4 ranks leaves some ranks without the loss scale's seed (they pass no buffer
            # to scale_losses but still take part in the overflow check).
            plans = [("data", 2, []), ("tofu", 2, [])] + ([("random", 4, ["--seed", "3"])] if name == "cnn" else [])
            for plan, ranks, extra in plans:
                bundle = bundles[plan] = os.path.join(work, f"{name}_{plan}")
                subprocess.run([cleave, "compile", path, "--devices", str(ranks), "--planner", plan, *extra, *train,
                                *scaling, "-o", bundle], check=True, capture_output=True)
                ran = runs[plan] = cleave_lines(["run", bundle, "--data", cdata, "--steps", str(STEPS)],
                                                f"{name} {plan} run")
                check(same_run(ran, ev, SAME), f"{name}: {ranks} ranks, {plan} plan, print cleave eval's lines "
                      f"(losses within {rel(ran, ev) if len(ran) == len(ev) else 'n/a'})")
            if name != "mlp":
                continue
            acc_run = cleave_lines(["run", bundles["data"], "--data", cdata, "--steps", str(STEPS), "--accumulate", "2"],
                                   "run --accumulate 2")
            check(same_run(acc_run, acc, SAME), "mlp --accumulate 2: 2 data ranks print cleave eval's lines")
            ck = os.path.join(work, "ck")
            first = cleave_lines(["run", bundles["data"], "--data", cdata, "--steps", str(STOP), "--checkpoint-dir", ck,
                                  "--checkpoint-every", "4"], f"run to step {STOP}")
            with open(os.path.join(ck, f"step-{STOP:08d}", "manifest.json")) as f:
                manifest = f.read()
            check(first == runs["data"][:STOP] and '"growth_tracker": 2' in manifest and '"skipped_steps": ' in manifest,
                  f"mlp: the checkpoint after step {STOP} records the scaler: {manifest.strip()}")
            for plan in ("data", "tofu"):
                rest = cleave_lines(["run", bundles[plan], "--data", cdata, "--steps", str(STEPS), "--resume", ck],
                                    f"resume on {plan}")
                check(same_run(rest, runs[plan][STOP:], SAME if plan == "tofu" else 0.0),
                      f"mlp: resumed after step {STOP} on the {plan} bundle, steps {STOP + 1}-{STEPS} equal the uninterrupted "
                      f"{plan} run's" + (" (resharded)" if plan == "tofu" else " (the same bytes)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
