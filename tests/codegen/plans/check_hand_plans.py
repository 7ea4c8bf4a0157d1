"""Hand-written plans (tests/codegen/plans/*.plan) compile, and `cleave run` of their bundles reproduces `cleave eval`
(the reference interpreter, checked against torch by tests/e2e): every per-step loss within relative 1e-5 and the
--save-model weights within 1e-5 * max|w|, SGD lr 0.1, batch 16, 8 steps. The plan's model is the file name's
prefix (mlp_*, cnn_*), its device count the `plan devices=N` line. Also prints (does not check) the per-rank
peak_memory_bytes of the 4-way MLP weight-split plan against the 1-rank `single` plan.
gcnn_* plans use a small grouped-conv CNN exported here with torch (make_gcnn), not shipped in models/. Also checks
that two window splits codegen does not lower are refused with their message (refusals).
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
DATA_X = {"mlp": "models/data/digits_flat_train_x.npy", "cnn": "models/data/digits_train_x.npy",
          "gcnn": "models/data/digits_train_x.npy"}
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


def make_gcnn(path):
    """Conv(1,4,3,p1) - ReLU - Conv(4,8,3,s2,p1,groups=4) - ReLU - AvgPool(3,s1,p1) - Conv(8,8,1,groups=2)
    - GlobalAveragePool - Linear(8,10), cross-entropy loss; as models/make_models.py exports its models."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 8, 3, padding=1, stride=2, groups=4),
                        nn.ReLU(), nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
                        nn.Conv2d(8, 8, 1, groups=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    torch.onnx.export(WithLoss().train(), (torch.zeros(16, 1, 8, 8), torch.zeros(16, dtype=torch.int64)), path,
                      input_names=["x", "y"], output_names=["loss"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=15)


def refusals(tmp, gcnn_path):
    """Splits of window ops that codegen refuses: each must fail with its exact message. Returns the problems."""
    import onnx
    problems = []
    # A MaxPool whose Indices output exists (unused), batch-split by the data plan of the same model without it (the
    # data planner itself replicates such a MaxPool, since codegen cannot split it).
    idx_model = os.path.join(tmp, "cnn_indices.onnx")
    m = onnx.load(os.path.join(SRC, "models/cnn.onnx"))
    for node in m.graph.node:
        if node.op_type == "MaxPool":
            node.output.append("pool_indices")
    onnx.save(m, idx_model)
    idx_plan = os.path.join(tmp, "cnn_indices.plan")
    sh([CLEAVE, "plan", os.path.join(SRC, "models/cnn.onnx"), "--devices", "2", "--planner", "data", "--batch",
        str(BATCH), "-o", idx_plan])
    # The grouped 1x1 conv's filter gradient split on ci (inside each group) instead of g.
    with open(os.path.join(SRC, "tests/codegen/plans/gcnn_group_spatial_2.plan")) as f:
        text = f.read()
    for a, b in (("op /net/net.5/Conv.grad.1 devices=[0,1] mesh=[2] [g]",
                  "op /net/net.5/Conv.grad.1 devices=[0,1] mesh=[2] [ci]"),
                 ("tensor net.5.weight.grad devices=[0,1] mesh=[2] [split(0)]",
                  "tensor net.5.weight.grad devices=[0,1] mesh=[2] [split(1)]")):
        assert a in text, a
        text = text.replace(a, b)
    ci_plan = os.path.join(tmp, "gcnn_ci.plan")
    with open(ci_plan, "w") as f:
        f.write(text)
    cases = [(idx_model, idx_plan, 'error: op "/net/net.3/MaxPool" (MaxPool): the Indices output of a split MaxPool '
              'is not supported by codegen yet'),
             (gcnn_path, ci_plan, 'error: op "/net/net.5/Conv.grad.1" (ConvGradFilter): splitting var ci of a '
              'convolution with 2 groups is not supported by codegen yet (split g)')]
    for model, plan, want in cases:
        r = subprocess.run([CLEAVE, "compile", model, "--devices", "2", "--plan", plan, "--batch", str(BATCH), "-o",
                            os.path.join(tmp, "refused")], capture_output=True, text=True)
        got = r.stderr.strip()
        ok = r.returncode == 1 and got == want
        print(f"refused {os.path.basename(plan)}: {'ok' if ok else 'WRONG'}: rc {r.returncode}, {got}", flush=True)
        if not ok:
            problems.append(f"{os.path.basename(plan)}: want rc 1 and `{want}`, got rc {r.returncode} and `{got}`")
    return problems


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
            if model == "gcnn":
                onnx_path = os.path.join(tmp, "gcnn.onnx")
                if not os.path.exists(onnx_path):
                    make_gcnn(onnx_path)
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
        gcnn_path = os.path.join(tmp, "gcnn.onnx")
        if not os.path.exists(gcnn_path):
            make_gcnn(gcnn_path)
        problems += refusals(tmp, gcnn_path)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(plans)} hand-written plans match cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
