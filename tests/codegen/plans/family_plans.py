"""Hand-written non-data plans for the tiny models/zoo families, written from explicit rules over op names.

A tiny model's training graph has hundreds of ops, so the plans are not typed line by line: each family below names
the ops it splits differently (a regex over op names) and how (a model dimension to split: a tensor dim of that size,
and the description var that indexes it). Every other op keeps its config from `cleave plan --planner data`, and the
lines of produced tensors are left out: `cleave compile --plan` fills them in from their producers (planner/plan/plan.h).
  resnet      (2, 4 ranks) channel (filter) parallelism in stages 3 and 4: their convolutions split on the output
              channels co (weights by row), their input-gradient convolutions on ci, their filter-gradient ones on
              co, BatchNormalization and its gradient on c (scale, bias and running statistics split on the
              channel), ReLU and the residual Add on the channel, with their gradients and the SGD updates of the
              stages' parameters (each convolution all-gathers its input channels); the stem, stages 1-2 and the
              head stay batch-split (BatchNorm synced), so activations are re-split batch <-> channel at stage 3's
              start and stage 4's end. Trained with batch 16 and lr 0.01
              (see TRAIN): with smaller batches or lr 0.1 the tiny ResNet's trajectory is too ill-conditioned to
              compare at 1e-5 (models/zoo/generate.py `resolve`);
  rnn         (2, 4 ranks) vocabulary parallelism of the decoder: out.weight/out.bias and the logits split over the
              vocabulary (the MatMul's n), its data-gradient MatMul summed over the vocabulary (partial, then
              reduced), the LSTM stack batch-split;
  transformer (2, 4 ranks) Megatron-style FFN: linear1's weight column-split (MatMul n; GELU on the split hidden dim),
              linear2's row-split (MatMul k: a partial output, reduced before the bias and residual), in both layers
              and in their gradients; attention, LayerNorm, embeddings and the head batch-split.
run_family trains a family's tiny model with `cleave eval` (checked against torch for the token families; for the
image ones, torch float32 and float64 must agree within 1e-5, or the run is too ill-conditioned to compare) and with
4-rank bundles of the data plan and/or the hand plan (checked against the eval). Usage (tests/e2e/zoo_plans_*.py):
  /usr/bin/python3 tests/codegen/plans/family_plans.py CLEAVE SOURCE_DIR FAMILY data|hand...
"""
import re
import subprocess
import sys

RANK_VARS = "ijklmn"
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Erf", "ErfGrad", "Identity", "Dropout", "DropoutGrad", "Relu", "ReluGrad",
               "Sigmoid", "SigmoidGrad", "Tanh", "TanhGrad", "Transpose", "SGDUpdate"}
# (op-name regex, the size of the model dim to split) per family.
FAMILIES = {
    "resnet": (r"layers\.[23]\.", None),
    "wresnet": (r"layers\.[23]\.", None),
    "rnn": (r"^(/out/|out\.)", 16),
    "transformer": (r"^(/layers/layers\.\d/(linear1/|linear2/|Div(\.|$)|Erf(\.|$)|Add_1(\.|$)|Mul(_1)?(\.|$)|dropout/)"
                    r"|layers\.layers\.\d\.linear[12]\.)", 32),
}
# (batch, lr) of a family's training runs where it is not (8, 0.1): see the resnet entry of the module doc.
TRAIN = {"resnet": (16, 0.01), "wresnet": (16, 0.01)}
# A ResNet stage's channel var per op kind (ir/describe): the channel dim of every 4-D tensor they write.
CHANNEL_VAR = {"Conv": "co", "ConvGradData": "ci", "ConvGradFilter": "co", "Relu": "j", "ReluGrad": "j", "Add": "j",
               "BatchNormalization": "c", "BatchNormalizationGrad": "c", "SGDUpdate": "i"}


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd[:3])} ...` exited with {r.returncode}: {r.stderr.strip()[-800:]}")
    return r.stdout


def parse_ir(text):
    """(tensors: name -> (shape, role), ops: [(name, kind, inputs, outputs)]) of `cleave ir --train` text."""
    tensors, ops = {}, []
    for line in text.splitlines():
        if line.startswith("tensor "):
            _, name, ty, role = line.split()[:4]
            shape = [int(d) for d in ty[ty.index("[") + 1:-1].split(",") if d]
            tensors[name] = (shape, role)
        elif line.startswith("op "):
            head, rest = line.split(" (", 1)
            ins, rest = rest.split(") -> (", 1)
            outs = rest.split(")", 1)[0]
            name, kind = head.split()[1:3]
            ops.append((name, kind, [s for s in ins.split(", ") if s], [s for s in outs.split(", ") if s]))
    return tensors, ops


def split_var(kind, ins, outs, tensors, size):
    """The description var of an op that splits its model dim of `size`, or None (the op keeps its data config)."""
    if size is None:
        return CHANNEL_VAR.get(kind)
    out = tensors[outs[0]][0]
    if kind in ELEMENTWISE:
        return next((RANK_VARS[d] for d, n in enumerate(out) if n == size), None)
    if kind == "ReduceSum":
        return next((RANK_VARS[d] for d, n in enumerate(tensors[ins[0]][0]) if n == size), None)
    if kind == "MatMul":
        a = tensors[ins[0]][0]
        return "n" if out[-1] == size else "k" if a[-1] == size else "m" if out[-2] == size else None
    return None


def hand_plan(cleave, model, family, devices, batch, train_flags):
    """(plan text, the hand-chosen lines): the data plan with the family's ops re-split and its produced tensors'
    lines left out."""
    pattern, size = FAMILIES[family]
    flags = ["--batch", str(batch)] + train_flags
    tensors, ops = parse_ir(sh([cleave, "ir", model, "--train"] + flags))
    data = sh([cleave, "plan", model, "--planner", "data", "--devices", str(devices)] + flags)
    produced = {t for _, _, _, outs in ops for t in outs}
    group = f"devices=[{','.join(map(str, range(devices)))}] mesh=[{devices}]"
    new_ops, new_sources = {}, {}
    for name, kind, ins, outs in ops:
        if not re.search(pattern, name):
            continue
        var = split_var(kind, ins, outs, tensors, size)
        if var:
            new_ops[name] = f"op {name} {group} [{var}]"
            if kind == "SGDUpdate":
                # The parameter (and its next value, which the update writes) split on the dim its var indexes.
                dim = RANK_VARS.index(var)
                new_sources[ins[0]] = f"tensor {ins[0]} {group} [split({dim})]"
            if kind == "BatchNormalization":
                # The running statistics (and their next values, which the op writes) split on the channel.
                for stat in ins[3:5]:
                    new_sources[stat] = f"tensor {stat} {group} [split(0)]"
    lines = []
    for line in data.splitlines():
        parts = line.split()
        if parts and parts[0] == "tensor":
            if parts[1] in produced:
                continue
            line = new_sources.get(parts[1], line)
        elif parts and parts[0] == "op":
            line = new_ops.get(parts[1], line)
        lines.append(line)
    chosen = sorted(new_ops.values()) + sorted(new_sources.values())
    return "\n".join(lines) + "\n", chosen


def resplit_ops(plan, data_plan):
    """Op lines of `plan` whose config differs from the data plan's (so the plan is not data parallelism)."""
    data = {l.split()[1]: l for l in data_plan.splitlines() if l.startswith("op ")}
    return [l for l in plan.splitlines() if l.startswith("op ") and data.get(l.split()[1]) != l]


def torch_losses(family, x, y, steps, batch, lr, dtype=None):
    """Per-step losses of torch.optim.SGD on the family's tiny module (same seed: the exported initial state), in
    float32 or `dtype`."""
    import torch
    import generate
    make, _, _ = generate.resolve(family, "tiny")
    torch.manual_seed(0)
    model = make().to(dtype or torch.float32)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for k in range(steps):
        opt.zero_grad()
        xb = torch.from_numpy(x[k * batch:(k + 1) * batch])
        loss = model(xb.to(dtype) if dtype and xb.is_floating_point() else xb,
                     torch.from_numpy(y[k * batch:(k + 1) * batch]))
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out


def run_family(cleave, src, family, runs, steps=3, batch=8, lr=0.01):
    """Trains the family's tiny model `steps` SGD steps: `cleave eval` (1 rank) against torch (relative 1e-4, token
    families only: tests/e2e/zoo_tiny.py checks the image ones), then each of `runs` ("data" or "hand", on 2 and on 4 ranks)
    compiled and run under mpirun against the eval (losses within relative 1e-5, weights within 1e-5 * max|w|).
    The data is the first seed whose torch run keeps every ReLU input RELU_MARGIN from 0 (bundle_check.pick_data), and
    lr is small enough that rounding differences do not grow much over the steps: a pre-activation that flips sign on
    float rounding changes a gradient legitimately, which 1e-5 could not tell from a bug.
    Prints one line per comparison and the hand plan's re-split op lines; returns the problems."""
    import os
    import tempfile
    import time
    import numpy as np
    sys.path.insert(0, os.path.join(src, "models", "zoo"))
    sys.path.insert(0, os.path.join(src, "tests", "codegen"))
    import generate
    from bundle_check import compare_run, losses, pick_data, runtime_flags, weights
    _, inputs, _ = generate.resolve(family, "tiny")
    train = ["--optimizer", "sgd", "--lr", repr(lr)]
    problems = []
    with tempfile.TemporaryDirectory(prefix=f"cleave_{family}_") as tmp:
        model = os.path.join(tmp, f"{family}.onnx")
        generate.generate(family, "tiny", model)
        n = steps * batch

        def make_data(seed):
            rng = np.random.default_rng(seed)
            if inputs[0][2] == generate.I64:  # token models: ids below the vocabulary (the embedding's rows)
                vocab = {"rnn": 16, "transformer": 32}[family]
                return (rng.integers(0, vocab, (n,) + inputs[0][1]).astype(np.int64),
                        rng.integers(0, vocab, (n,) + inputs[1][1]).astype(np.int64))
            return (rng.standard_normal((n,) + inputs[0][1]).astype(np.float32),
                    rng.integers(0, 10, n).astype(np.int64))

        seed, (x, y), want, margin = pick_data(make_data, lambda d: torch_losses(family, *d, steps, batch, lr))
        print(f"{family}: data seed {seed} (smallest |ReLU input| in torch's run {margin:.2g})", flush=True)
        xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(xp, x)
        np.save(yp, y)
        data = f"x={xp},y={yp}"
        ref_model = os.path.join(tmp, "eval.onnx")
        ref = losses(sh([cleave, "eval", model, "--data", data, "--batch", str(batch), "--steps", str(steps),
                         "--save-model", ref_model] + train))
        if len(ref) != steps:
            return [f"{family}: cleave eval printed {len(ref)} losses, want {steps}"]
        if inputs[0][2] == generate.I64:
            worst = max(abs(a - b) / abs(b) for a, b in zip(ref, want))
            print(f"{family}: eval vs torch worst loss rel diff {worst:.3g} (losses {ref})", flush=True)
            if not worst <= 1e-4:
                problems.append(f"{family}: eval losses {ref} vs torch {want} (worst rel {worst:.3g} > 1e-4)")
        else:
            # Image families: tests/e2e/zoo_tiny.py compares them with torch; here only check that this run is
            # well-conditioned enough to be compared at 1e-5 (see the resnet entry of the module doc).
            import torch
            cond = max(abs(a - b) / abs(b) for a, b in zip(want, torch_losses(family, x, y, steps, batch, lr,
                                                                               torch.float64)))
            print(f"{family}: torch float32 vs float64 worst loss rel diff {cond:.3g}", flush=True)
            if not cond <= 1e-5:
                problems.append(f"{family}: torch float32 and float64 losses differ by relative {cond:.3g} > 1e-5: "
                                f"this training run is too ill-conditioned to compare")
        ref_w = {k: v.astype(np.float64) for k, v in weights(ref_model).items() if np.issubdtype(v.dtype, np.floating)}
        for devices, run in [(d, r) for d in (2, 4) for r in runs]:
            where = f"{family} {run} plan on {devices} ranks vs eval"
            bundle = os.path.join(tmp, f"{run}{devices}")
            flags = ["--devices", str(devices), "--batch", str(batch), "-o", bundle] + train
            start = time.time()
            try:
                if run == "hand":
                    plan, chosen = hand_plan(cleave, model, family, devices, batch, train)
                    data_plan = sh([cleave, "plan", model, "--planner", "data", "--devices", str(devices),
                                    "--batch", str(batch)] + train)
                    resplit = resplit_ops(plan, data_plan)
                    print(f"{family}: hand plan on {devices} ranks: {len(resplit)} ops re-split from the data plan; its "
                          f"hand-chosen lines (the rest is the data plan, produced tensors implied):", flush=True)
                    print("".join(f"  {line}\n" for line in chosen), end="", flush=True)
                    if not resplit:
                        problems.append(f"{where}: the hand plan is the data plan")
                    plan_path = os.path.join(tmp, "hand.plan")
                    with open(plan_path, "w") as f:
                        f.write(plan)
                    sh([cleave, "compile", model, "--plan", plan_path] + flags)
                else:
                    sh([cleave, "compile", model, "--planner", "data"] + flags)
                saved = bundle + "_trained.onnx"
                # Debug: these ranks' thousands of fused functors take ~1 min each at -O3 and ~5 s at -O0; the
                # optimised build of generated code is run by tests/e2e/zoo_tiny_ranks.py and tests/codegen/.
                got = losses(sh([cleave, "run", bundle, "--data", data, "--steps", str(steps), "--save-model",
                                 saved, "--build-type", "Debug"] + runtime_flags(cleave)))
            except RuntimeError as e:
                problems.append(f"{where}: {e}")
                continue
            p, worst = compare_run(where, got, ref, saved, ref_w, steps)
            problems += p
            print(f"{where}: worst loss rel diff {worst:.3g} ({time.time() - start:.0f} s with the build)",
                  flush=True)
    return problems


def main(argv):
    """family_plans.py CLEAVE SRC FAMILY RUN...: run_family, exit 1 on any problem."""
    if len(argv) < 3 or argv[2] not in FAMILIES or not set(argv[3:]) <= {"data", "hand"}:
        sys.exit("usage: family_plans.py CLEAVE SOURCE_DIR FAMILY data|hand...")
    batch, lr = TRAIN.get(argv[2], (8, 0.1))
    problems = run_family(argv[0], argv[1], argv[2], argv[3:], batch=batch, lr=lr)
    for p in problems:
        print(f"error: {p}")
    print(f"{argv[2]}: " + (f"{len(problems)} problem(s)" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
