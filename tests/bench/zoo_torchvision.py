"""torchvision 0.14's classification builders through Cleave: one table row per builder (issue 24).

Each builder (num_classes 10, dropout and stochastic depth 0, torch.manual_seed(0) weights) is wrapped in a
cross-entropy loss (models/zoo/generate.py's Classifier), exported by torch 1.13 in training mode at
opset 13 without constant folding, and then:
  exports  torch.onnx.export succeeds;
  imports  `cleave ir` reads it;
  grads    `cleave eval --steps 1` (SGD, lr 1e4) runs a step; each parameter's gradient, recovered from the saved
           model as (w0 - w1) / lr, is compared with torch float64's at the same float32 weights: the worst error
           relative to that parameter's largest gradient, beside torch float32's own worst error for scale (of
           torch float32 with oneDNN and without, the further from float64: module_reference's native_too;
           tests/e2e/torch_compare.py's check_step). Passes when Cleave's is no worse than max(1e-5, 2 x torch
           float32's) and the loss is within max(1e-5, 2 x torch float32's loss error) of float64's;
  grads64  float64 end to end: the module exported in double, `cleave eval` (the interpreter runs float64) one step
           at lr 1, w0 - w1 against torch float64's gradient (norm epsilons rounded to float32 as ONNX stores them):
           the worst error relative to each parameter's largest gradient must be within issue 24's 1e-6;
  data/tofu  `cleave compile --devices 2 --planner data|tofu` + `cleave run` (2 MPI ranks) of the float64 export (its
           bundle's runtime computes in double), against `cleave eval` of the same file: one step at lr 1, its
           gradients w0 - w1 (measured as grads64, within 1e-6), and 3 SGD steps (lr 1e-4): losses and saved weights
           within 1e-5 of eval's. (In float32 the check has no power on these nets: random-init nets at small batch
           are chaotic, shufflenet_v2_x0_5's torch float32 and float64 weights part by 69% of a parameter's update
           after 2 steps at lr 1e-2, and two float32 programs that sum in different orders part as much; one
           step's float32 gradients differ by up to 27% (mobilenet_v2) where an activation sits on a ReLU6 or ReLU
           kink, while in float64 the same plans agree with eval to 1e-10.)
Inputs are 64x64 (DEFAULT_SIDE says why not 32) unless SIDE below says otherwise; batch 2 (--batch: 8 conditions
the BatchNorm nets whose float32 runs drift apart at 2; the table says where).
Giants (GIANTS below: a CPU step of the interpreter takes minutes) are checked at import + plan (`cleave plan --planner
data|tofu --devices 2`) + gradient only, unless --giants is given; past GIANT_PARAMS parameters at import + plan
only.

Usage (on demand, not in CI; tests/e2e/zoo_torchvision_small.py runs a few builders through the same functions):
  /usr/bin/python3 tests/bench/zoo_torchvision.py <cleave-binary> <source-dir> [BUILDER ...]
      [--skip-ranks] [--giants] [--write-docs docs/zoo.md] [--keep DIR]
The table is printed as markdown on stdout, progress on stderr. --write-docs replaces the table in the file (with
the machine, the date and the command) between the markers <!-- zoo_torchvision begin/end -->. --results FILE appends
each row to FILE; `--from-results FILE --merge-docs docs/zoo.md` then replaces only those builders' rows.
"""
import argparse
import copy
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

CLASSES = 10
BATCH = 2
STEPS = 3
GRAD_LR = 1e4  # w1 = w0 - LR * g carries g to float32 precision: (w0 - w1) / LR is off by ~|w0| / LR ulp
GRAD_SLACK = 2  # Cleave's gradient and loss errors may be this many times torch float32's own (at least 1e-5)
RANK_LR = 1e-4  # resnet18 at 1e-3: 2-rank tofu and 1-rank float32 runs part by 4e-5 in step 3 from rounding alone (1-step gradients agree to 5e-5, as torch float32 with float64), at 1e-4 by 3e-7
RANK_RTOL = 1e-5
GRAD64_RTOL = 1e-6  # issue 24's bound, checked float64 end to end
# A parameter whose gradient is zero in exact arithmetic (a convolution's bias followed by BatchNorm, which subtracts
# the batch mean: vgg*_bn) has float64 roundoff for a gradient, 1.6e-15 of the model's largest in torch (vgg11_bn):
# each parameter's error is taken relative to its largest gradient, but at least GRAD64_FLOOR of the model's largest,
# so such a parameter is held to 1e-13 of the model's largest gradient.
GRAD64_FLOOR = 1e-7
OPSET = 13

# Input side. 64 by default: at 32x32 a net that downsamples 32 times runs its last BatchNorms over 2 values
# (batch 2, 1x1), and torch float32's own 3-step losses then differ from float64's by 22% (resnet18; 3e-7 at 64x64).
DEFAULT_SIDE = 64
SIDE = {
    "alexnet": (224, "its AdaptiveAvgPool2d(6) exports only when 6 divides the feature map (torch: 'output size that "
                     "are not factor of input size'): 224 gives 6x6"),
    "inception_v3": (75, "Inception3 needs at least 75x75"),
    "maxvit_t": (224, "MaxViT's 7x7 partitions need 224 (its input_size)"),
}
for _v in ("vgg11", "vgg13", "vgg16", "vgg19"):
    for _n in (_v, _v + "_bn"):
        SIDE[_n] = (224, "its AdaptiveAvgPool2d(7) exports only when 7 divides the feature map: 224 gives 7x7")
for _n in ("vit_b_16", "vit_l_16", "vit_b_32", "vit_l_32"):
    SIDE[_n] = (32, "image_size=32 (no BatchNorm)")
SIDE["vit_h_14"] = (28, "image_size=28 (4 patches of 14)")

# Past this many parameters the gradient checks need more memory than this shared machine spares (`cleave eval` peaks
# at about 30 bytes a parameter, its weights and gradients held as doubles: vgg11's step, 133 M, at 3.9 GB; torch
# float64's reference as much again): import + plan only.
GIANT_PARAMS = 350e6
# Builders whose CPU step takes minutes here: import + plan + gradient, no 2-rank runs.
GIANTS = {
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "maxvit_t",
    "regnet_y_128gf", "regnet_y_32gf", "regnet_x_32gf", "vit_h_14", "vit_l_16", "vit_l_32",
    "efficientnet_b7", "efficientnet_v2_l", "convnext_large", "resnext101_64x4d",
}
# Builders not attempted (none: torch 1.13 exports past protobuf's 2 GB as external data, which Cleave reads).
TOO_BIG = {}

# Explanations of the misses, found by investigating each (the table's note column adds the error text).
_SWIN_V2 = ("torch 1.13 cannot export it: torchvision's shifted_window_attention (v2) zeroes the key bias in place "
            "(`qkv_bias[length:2 * length].zero_()`), and aten::zero has no ONNX symbolic at any opset (13, 14, 16, "
            "17 tried); nothing reaches Cleave")
NOTES = {
    "swin_v2_t": _SWIN_V2, "swin_v2_s": _SWIN_V2, "swin_v2_b": _SWIN_V2,
    "inception_v3": ("batch 8: at batch 2 its 1x1 BatchNorms (Mixed_7b/c) normalise 2 nearly equal values (variance "
                     "down to 2e-9, eps 1e-3) and training is chaotic: changing lr by 1e-12 moves torch float64's "
                     "step-3 loss by 4e-4 (cleave eval's by 9e-4), so 2-rank runs part from eval at step 3 by 7e-3 "
                     "there; at batch 8 the same change moves it by 1e-9"),
    "resnet101": ("batch 8: at batch 2 its 3 steps are chaotic: in torch float64 alone, scaling step 1's update by "
                  "1 + 1e-11 (the size of the 2-rank runs' float64 gradient differences) moves conv1.weight after 3 "
                  "steps by 1.5e-4 of max(1, max|w|) and step 3's loss by 1.3e-6, as the 2-rank runs part from eval "
                  "(9.7e-5, 4e-7); 1 + 1e-12 moves it by 9e-8 (a kink is crossed between); at batch 8 1 + 1e-11 moves "
                  "no weight by more than 4e-8"),
    "resnet152": ("batch 8, chaotic at 64x64 at batch 8 and 16: `cleave eval` at lr x (1 + 1e-11) parts from eval "
                  "by 5.7e-4 of max(1, max|w|) after 3 steps, and in torch float64 alone scaling step 1's update by "
                  "1 + 1e-11 (the size of the 2-rank runs' float64 gradient differences, 8e-12) moves conv1.weight by "
                  "4.4e-4 (batch 8) and 1.2e-4 (batch 16), more than the 2-rank runs part from eval (5e-5, data and "
                  "tofu alike); a 1-rank bundle equals eval to 4e-7"),
    "resnext101_32x8d": ("batch 8: at batch 2 its 3 steps are chaotic as resnet101's: in torch float64 alone, scaling "
                         "step 1's update by 1 + 1e-11 moves conv1.weight after 3 steps by 1.3e-4 of max(1, max|w|), "
                         "as the 2-rank runs part from eval (2.8e-4); at batch 8 by no more than 2.4e-8 (any weight)"),
    "mnasnet1_0": ("f32 column: torch float32 without oneDNN is 2.4e-5 (loss) and 0.072 (gradients) from float64, "
                   "Cleave's float32 1.1e-5 and 0.072, torch float32 with oneDNN 1e-5 and 0.047: an ill-conditioned "
                   "step (BatchNorm over 8 values)"),
    "googlenet": ("f32 column: torch float32 without oneDNN is 0.24 off float64 on inception4e.branch3.1.conv.weight, "
                  "as Cleave's float32 (with oneDNN 0.085)"),
}


def family_order(names):
    """The builders in torchvision's list order, one representative of each family first when asked."""
    return names


def all_builders():
    import torchvision
    return list(torchvision.models.list_models(module=torchvision.models))


def sh(cmd, timeout):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        err = (r.stderr.strip() or r.stdout.strip()).splitlines()
        # The first error line names the op and node; keep it and the last line.
        first = next((l for l in err if "error" in l.lower()), err[0] if err else "")
        tail = err[-1] if err else ""
        raise RuntimeError(first if first == tail else f"{first} ... {tail}")
    return r.stdout


def side_of(name):
    return SIDE.get(name, (DEFAULT_SIDE, ""))[0]


def build(name):
    """The builder's module, 10 classes, dropout and stochastic depth off, auxiliary heads off."""
    import torch.nn as nn
    import torchvision
    kwargs = {"num_classes": CLASSES}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    if name.startswith("vit_"):
        kwargs["image_size"] = side_of(name)
    if name == "maxvit_t":
        kwargs["input_size"] = (224, 224)
    net = torchvision.models.get_model(name, **kwargs)
    for m in net.modules():
        if isinstance(m, nn.Dropout) or type(m).__name__ in ("StochasticDepth",):
            m.p = 0.0
        if hasattr(m, "stochastic_depth_prob"):
            m.stochastic_depth_prob = 0.0
    return net


def helpers():
    """(tests/e2e/torch_compare.py, tests/codegen/bundle_check.py) of SRC, imported on first use: they load torch and
    onnx."""
    for folder in ("e2e", "codegen"):
        path = os.path.join(SRC, "tests", folder)
        if path not in sys.path:
            sys.path.insert(0, path)
    import bundle_check
    import torch_compare
    return torch_compare, bundle_check


class Case:
    """One builder's files and torch state, shared by the stages."""

    def __init__(self, name, tmp):
        self.name, self.tmp = name, tmp
        self.side = side_of(name)
        self.path = os.path.join(tmp, name + ".onnx")
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((STEPS * BATCH, 3, self.side, self.side)).astype(np.float32)
        self.y = rng.integers(0, CLASSES, STEPS * BATCH).astype(np.int64)
        self.state = None
        self.worst32 = 0.0  # torch float32's worst gradient error against float64 (gradients())
        self.data1 = self.data_files("1", 1)
        self.data3 = self.data_files("3", STEPS)

    def data_files(self, tag, steps):
        files = []
        for k, v in (("x", self.x), ("y", self.y)):
            p = os.path.join(self.tmp, f"{self.name}_{k}{tag}.npy")
            np.save(p, v[:steps * BATCH])
            files.append(f"{k}={p}")
        return ",".join(files)

    def module(self):
        import torch
        torch.manual_seed(0)
        m = helpers()[0].Classifier(build(self.name))
        if self.state is not None:
            m.load_state_dict(self.state)
        return m.train()


def export(case):
    """torch.onnx.export in training mode at opset 13; returns the sorted ONNX op types."""
    import torch
    model = case.module()
    case.state = copy.deepcopy(model.state_dict())  # with its _metadata: MNASNet's loader needs the version
    x, y = torch.from_numpy(case.x[:BATCH]), torch.from_numpy(case.y[:BATCH])
    return helpers()[0].export(model, (x, y), case.path, OPSET)


def gradients(cleave, case, timeout):
    """(Cleave's worst gradient error, torch float32's, problems); logs both and the loss's error."""
    tc = helpers()[0]
    saved = os.path.join(case.tmp, case.name + "_grad.onnx")
    out = sh([cleave, "eval", case.path, "--data", case.data1, "--batch", str(BATCH), "--steps", "1",
              "--optimizer", "sgd", "--lr", repr(GRAD_LR), "--save-model", saved], timeout)
    ref = tc.module_reference(case.module, case.x[:BATCH], case.y[:BATCH], native_too=True)
    problems, worst, _ = tc.check_step(
        f"{case.name} grad", tc.step_loss(out), tc.recovered_gradients(case.path, saved, GRAD_LR), ref,
        slack=GRAD_SLACK, loss_slack=GRAD_SLACK, skip_unused=True, file=sys.stderr)
    err, _, case.worst32 = worst["all"]
    return err, case.worst32, problems


def gradients64(cleave, case, timeout):
    """Float64 end to end: the module exported in double, one `cleave eval` step at lr 1 recovers the gradient as
    w0 - w1 (exact to an ulp of w), compared with torch float64's. (worst error relative to each parameter's largest
    gradient, the parameter, loss rel error)."""
    import onnx
    import torch
    tc = helpers()[0]
    path = os.path.join(case.tmp, case.name + "_f64.onnx")
    saved = os.path.join(case.tmp, case.name + "_f64_step.onnx")
    x, y = torch.from_numpy(case.x[:BATCH]).double(), torch.from_numpy(case.y[:BATCH])
    tc.export(case.module().double(), (x, y), path, OPSET)
    case.path64 = path
    m64 = case.module().double()  # the export ran a training-mode forward (BatchNorm running statistics)
    # ONNX stores a norm's epsilon as a float32 attribute (1e-5 becomes 9.99999975e-06): where a BatchNorm sees 2
    # values its variance can be ~1e-7, and the two epsilons then move the gradient by ~1e-6.
    for m in m64.modules():
        if isinstance(getattr(m, "eps", None), float):
            m.eps = float(np.float32(m.eps))
    xp = os.path.join(case.tmp, case.name + "_x64.npy")
    np.save(xp, case.x[:BATCH].astype(np.float64))
    data = f"x={xp},y={case.data1.split('y=')[1]}"
    out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--optimizer", "sgd",
              "--lr", "1", "--save-model", saved], timeout)
    case.data64, case.step64 = data, saved
    loss = tc.step_loss(out)
    ref = m64(x, y)
    ref.backward()
    got = tc.recovered_gradients(path, saved, 1.0)
    want = {n: p.grad.numpy() for n, p in m64.named_parameters() if p.grad is not None and n in got}
    for i in onnx.load(path).graph.initializer:
        if i.name in want and i.data_type != onnx.TensorProto.DOUBLE:
            raise RuntimeError(f"initializer {i.name} of the double export is "
                               f"{onnx.TensorProto.DataType.Name(i.data_type)}")
    floor = GRAD64_FLOOR * max(p.grad.abs().max().item() for p in m64.parameters() if p.grad is not None)
    worst, worst_name = tc.worst_error(got, want, floor)
    # The loss line prints 9 significant digits.
    return worst, worst_name, abs(loss - ref.item()) / abs(ref.item())


def eval_steps(cleave, case, timeout):
    """`cleave eval` of the float64 export over STEPS steps: (losses, saved weights)."""
    bc = helpers()[1]
    saved = os.path.join(case.tmp, case.name + "_eval3.onnx")
    out = sh([cleave, "eval", case.path64, "--data", case.data3, "--batch", str(BATCH), "--steps", str(STEPS),
              "--optimizer", "sgd", "--lr", repr(RANK_LR), "--save-model", saved], timeout)
    return bc.losses(out), bc.weights(saved)


def ranks(cleave, case, planner, ref, timeout):
    """2 ranks under `planner` vs `cleave eval`, both on the float64 export: one step's gradients (lr 1, w0 - w1 from
    the saved models, as the f64 column) and 3 steps' losses and weights (lr RANK_LR). (worst gradient error relative
    to each parameter's largest, worst loss rel diff over 3 steps, gradient problems, 3-step problems)."""
    tc, bc = helpers()
    grad_problems = []
    how = ["--planner", planner, "--devices", "2", "--batch", str(BATCH), "--optimizer", "sgd"]
    _, saved = bc.run_partitioned(cleave, case.path64, os.path.join(case.tmp, f"{case.name}_{planner}_grad"),
                                  how + ["--lr", "1"], case.data64, 1, sh=lambda cmd: sh(cmd, timeout))
    got = tc.recovered_gradients(case.path64, saved, 1.0)
    want = tc.recovered_gradients(case.path64, case.step64, 1.0)
    floor = GRAD64_FLOOR * max(np.abs(g).max() for g in want.values())  # as gradients64
    gworst, gname = tc.worst_error(got, want, floor)
    if gworst > GRAD64_RTOL:
        grad_problems.append(f"1-step float64 gradient of {gname} off from eval's by {gworst:.3g} of its largest "
                             f"value")
    got, saved = bc.run_partitioned(cleave, case.path64, os.path.join(case.tmp, f"{case.name}_{planner}"),
                                    how + ["--lr", repr(RANK_LR)], case.data3, STEPS, sh=lambda cmd: sh(cmd, timeout))
    problems, worst = bc.compare_run(planner, got, ref[0], saved, ref[1], STEPS, RANK_RTOL)
    return gworst, worst, grad_problems, problems


def short(e):
    s = str(e).strip().replace("|", "/").replace("\n", " ")
    return s if len(s) <= 300 else s[:300] + "..."


def run_builder(cleave, name, tmp, do_ranks, giants, timeout, import_only=False, planners=("data", "tofu")):
    """The table row of one builder: a dict of column -> text, and 'ok' (no miss)."""
    row = {"name": name, "side": side_of(name), "batch": BATCH, "export": "", "ir": "", "grad": "", "grad64": "",
           "data": "", "tofu": "", "notes": [], "ok": True, "secs": 0.0}
    t0 = time.time()
    case = Case(name, tmp)

    def miss(col, text, e=None):
        row[col] = text
        row["ok"] = False
        if e is not None:
            row["notes"].append(f"{col}: {short(e)}")

    def done():
        row["secs"] = time.time() - t0
        if name in NOTES:
            row["notes"].insert(0, NOTES[name])
        if name in SIDE:
            row["notes"].append(f"{case.side}x{case.side}: {SIDE[name][1]}")
        return row

    if name in TOO_BIG:
        row["export"] = "not tried"
        row["notes"].append(TOO_BIG[name])
        row["ok"] = False
        return done()
    try:
        ops = export(case)
        row["export"] = "yes"
        row["ops"] = ops
    except Exception as e:  # torch's exporter raises many types
        miss("export", "no", e)
        return done()
    params = sum(v.numel() for v in case.state.values())
    row["params"] = params
    log(f"{name}: exported, {params / 1e6:.1f} M parameters ({len(ops)} op types: {', '.join(ops)})")
    try:
        sh([cleave, "ir", case.path], timeout)
        row["ir"] = "yes"
    except Exception as e:
        miss("ir", "no", e)
        return done()
    if import_only:
        return done()
    giant = (name in GIANTS or params > GIANT_PARAMS) and not giants
    if giant:
        for planner in ("data", "tofu"):
            try:
                sh([cleave, "plan", case.path, "--planner", planner, "--devices", "2", "--batch", str(BATCH)], timeout)
                row[planner] = f"giant: planned ({planner}), not run"
            except Exception as e:
                miss(planner, "plan fails", e)
        if params > GIANT_PARAMS:
            row["grad"] = row["grad64"] = "giant: not run"
            row["notes"].append(f"{params / 1e6:.0f} M parameters: import + plan only")
            return done()
    try:
        worst, worst32, problems = gradients(cleave, case, timeout)
        row["grad"] = f"{worst:.2g} (f32 {worst32:.2g})" + ("" if not problems else " MISS")
        if problems:
            row["ok"] = False
            row["notes"] += problems
    except Exception as e:
        miss("grad", "fails", e)
        return done()
    try:
        worst, pname, loss_err = gradients64(cleave, case, timeout)
        row["grad64"] = f"{worst:.1g}" + ("" if worst <= GRAD64_RTOL else " MISS")
        log(f"{name}: float64 end to end: gradients worst {worst:.3g} ({pname}), loss rel {loss_err:.2g}")
        if worst > GRAD64_RTOL:
            row["ok"] = False
            row["notes"].append(f"grad64: gradient of {pname} off by {worst:.3g} of its largest value")
    except Exception as e:
        miss("grad64", "fails", e)
    if giant or not do_ranks:
        if not giant:
            row["data"] = row["tofu"] = "not run"
        return done()
    try:
        if not hasattr(case, "path64"):
            raise RuntimeError("no float64 export (grad64 failed)")
        ref = eval_steps(cleave, case, timeout)
    except Exception as e:
        miss("data", "eval fails", e)
        return done()
    for planner in ("data", "tofu"):
        if planner not in planners:
            row[planner] = "skipped"
            continue
        try:
            gworst, worst, gproblems, problems = ranks(cleave, case, planner, ref, timeout)
            row[planner] = (f"f64: grads {gworst:.1g}{' MISS' if gproblems else ''}; 3 steps {worst:.1g}"
                            f"{' MISS' if problems else ''}")
            log(f"{name}: 2 ranks ({planner}) vs eval in float64: 1-step gradients worst {gworst:.3g}, 3 steps worst "
                f"loss rel {worst:.3g}")
            if gproblems or problems:
                row["ok"] = False
                row["notes"] += [short(p if p.startswith(planner + ":") else f"{planner}: {p}")
                                 for p in (gproblems + problems)[:2]]
        except Exception as e:
            miss(planner, "fails", e)
    return done()


def table(rows):
    out = ["| builder | input | exports | imports | f32 gradients vs torch f64 (torch f32's) | f64 gradients vs torch "
           "f64 | 2 ranks data | 2 ranks tofu | note |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        side = f"{r['side']}" + (f", batch {r['batch']}" if r.get("batch", 2) != 2 else "")
        out.append(f"| {r['name']} | {side} | {r['export']} | {r['ir']} | {r['grad']} | {r['grad64']} | {r['data']} | "
                   f"{r['tofu']} | {'; '.join(r['notes'])} |")
    return "\n".join(out)


def row_status(line):
    """A table row's standing, read from its text (so merged tables count alike): 'green' (every check ran and
    passed), 'giant' (import, both plans and both gradient checks passed; 2-rank runs not run, as the issue allows for
    giants), 'miss' (a check failed), 'open' (checks not run) or 'unexportable' (torch 1.13 cannot export it)."""
    cells = [c.strip() for c in line.split("|")[1:-1]]
    export, ir, grad, grad64, data, tofu = cells[2:8]
    if export == "no":
        return "unexportable"
    if ir == "no" or any("MISS" in c or "fails" in c for c in (grad, grad64, data, tofu)):
        return "miss"
    if export != "yes" or ir != "yes":
        return "open"
    if any(not c or c.startswith(("giant", "not run", "skipped")) for c in (grad, grad64)):
        return "open"
    if data == "giant: planned (data), not run" and tofu == "giant: planned (tofu), not run":
        return "giant"
    if any(not c or c.startswith(("giant", "not run", "skipped")) for c in (data, tofu)):
        return "open"
    return "green"


def summary(lines):
    """One line counting the table rows among `lines` by row_status."""
    rows = [l for l in lines if l.startswith("| ") and not l.startswith("| builder")]
    n = {k: 0 for k in ("green", "giant", "miss", "open", "unexportable")}
    for l in rows:
        n[row_status(l)] += 1
    return (f"Summary (counted from the rows): of {len(rows)} builders, {n['unexportable']} torch 1.13 cannot export; "
            f"of the other {len(rows) - n['unexportable']}, {n['green']} are fully green, {n['giant']} more are checked "
            f"as giants (import, data and tofu plans, both gradient checks; no 2-rank runs), {n['miss']} miss a check "
            f"and {n['open']} are not fully run.")


def write_docs(path, text, argv):
    machine = f"{platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
        machine = f"{model}, {os.cpu_count()} cores"
    except OSError:
        pass
    head = (f"<!-- zoo_torchvision begin -->\nMachine: {machine}. Date: {datetime.date.today().isoformat()}. "
            f"Command: `/usr/bin/python3 {' '.join(shlex.quote(a) for a in argv)}`.\n\n")
    block = head + text + "\n\n" + summary(text.split("\n")) + "\n<!-- zoo_torchvision end -->"
    old = open(path).read() if os.path.exists(path) else ""
    b, e = old.find("<!-- zoo_torchvision begin -->"), old.find("<!-- zoo_torchvision end -->")
    if b >= 0 and e > b:
        new = old[:b] + block + old[e + len("<!-- zoo_torchvision end -->"):]
    else:
        new = (old.rstrip() + "\n\n" if old else "") + block + "\n"
    with open(path, "w") as f:
        f.write(new)


def merge_docs(path, rows, argv):
    """Replaces the table rows of `rows`' builders in the zoo_torchvision block of `path`, keeping the others, and
    says in the block's head which rows were rerun, when and how."""
    old = open(path).read()
    b, e = old.find("<!-- zoo_torchvision begin -->"), old.find("<!-- zoo_torchvision end -->")
    if b < 0 or e < b:
        raise SystemExit(f"{path}: no zoo_torchvision block to merge into")
    block = old[b:e].split("\n")
    fresh = {r["name"]: line for r, line in zip(rows, table(rows).split("\n")[2:])}
    for i, line in enumerate(block):
        name = line.split("|")[1].strip() if line.startswith("| ") else ""
        if name in fresh:
            block[i] = fresh.pop(name)
    block = [line for line in block if not line.startswith("Summary (counted")]
    while block and not block[-1].strip():
        block.pop()
    block += list(fresh.values())  # builders the table did not have yet
    block += ["", summary(block), ""]
    head = next(i for i, line in enumerate(block) if line.startswith("Machine:"))
    rerun = (f" Rows of {', '.join(r['name'] for r in rows)} rerun {datetime.date.today().isoformat()}: "
             f"`/usr/bin/python3 {' '.join(shlex.quote(a) for a in argv)}`.")
    if not block[head].endswith(rerun):
        block[head] += rerun
    with open(path, "w") as f:
        f.write(old[:b] + "\n".join(block) + old[e:])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv):
    global SRC, BATCH
    warnings.filterwarnings("ignore")  # the exporter's per-node notes on BatchNorm's removed mutations
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cleave")
    ap.add_argument("src")
    ap.add_argument("builders", nargs="*")
    ap.add_argument("--skip-ranks", action="store_true", help="no 2-rank runs")
    ap.add_argument("--planners", default="data,tofu", help="the planners of the 2-rank runs (default data,tofu)")
    ap.add_argument("--import-only", action="store_true", help="export and `cleave ir` only")
    ap.add_argument("--giants", action="store_true", help="run the giants' ranks too")
    ap.add_argument("--write-docs", metavar="FILE")
    ap.add_argument("--keep", metavar="DIR", help="keep the exports and bundles in DIR")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per command")
    ap.add_argument("--batch", type=int, default=BATCH,
                    help="samples per step (default 2; at 2 the last BatchNorms of some nets normalise 8 values and "
                         "float32 runs drift apart within 3 steps: 8 conditions them)")
    ap.add_argument("--results", metavar="FILE", help="append each row to FILE as a JSON line")
    ap.add_argument("--merge-docs", metavar="FILE", help="with --from-results: replace only those builders' rows in "
                    "FILE's table, keeping the others")
    ap.add_argument("--from-results", metavar="FILE", help="run nothing: the table of FILE's rows (per builder, in "
                    "torchvision's order, its last row among those that ran checks and passed them all, else among those "
                    "that ran the most checks, at batch 2 where there is one)")
    args = ap.parse_args(argv)
    SRC = args.src
    BATCH = args.batch
    if args.from_results:
        latest = {}
        with open(args.from_results) as f:
            for line in f:
                r = json.loads(line)
                if r["name"] in NOTES and NOTES[r["name"]] not in r["notes"]:
                    r["notes"].insert(0, NOTES[r["name"]])  # an explanation found after the row was run
                def rank(row):  # passed; checks run; at the default batch
                    ran = sum(bool(row[c]) and not row[c].startswith(("not run", "skipped", "giant"))
                              for c in ("grad", "grad64", "data", "tofu"))
                    return (row["ok"] and ran > 0, ran, row.get("batch", 2) == 2)
                if r["name"] not in latest or rank(r) >= rank(latest[r["name"]]):
                    latest[r["name"]] = r
        order = all_builders()
        rows = [latest[n] for n in order if n in latest] + [r for n, r in latest.items() if n not in order]
        text = table(rows)
        print(text)
        if args.write_docs:
            write_docs(args.write_docs, text, [sys.argv[0]] + argv)
        if args.merge_docs:
            merge_docs(args.merge_docs, rows, [sys.argv[0]] + argv)
        return 0 if all(r["ok"] for r in rows) else 1
    # The giants last: the others' rows come first on a slow machine.
    names = args.builders or sorted(all_builders(), key=lambda n: (n in GIANTS or n in TOO_BIG))
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = args.keep or tmpdir
        os.makedirs(tmp, exist_ok=True)
        for name in names:
            try:
                rows.append(run_builder(args.cleave, name, tmp, not args.skip_ranks, args.giants, args.timeout,
                                        args.import_only, tuple(args.planners.split(","))))
            except Exception as e:
                traceback.print_exc()
                rows.append({"name": name, "side": side_of(name), "export": "?", "ir": "?", "grad": "?", "grad64": "?",
                             "data": "?", "tofu": "?", "notes": [f"runner: {short(e)}"], "ok": False, "secs": 0})
            r = rows[-1]
            if args.results:
                with open(args.results, "a") as f:
                    f.write(json.dumps(r) + "\n")
            log(f"{name}: {'ok' if r['ok'] else 'MISS'} in {r['secs']:.0f} s {'; '.join(r['notes'])}")
    text = table(rows)
    print(text)
    if args.write_docs:
        write_docs(args.write_docs, text, [sys.argv[0]] + argv)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
