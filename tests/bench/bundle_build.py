#!/usr/bin/python3
"""How long a 2-rank bundle takes from `cleave compile` to its first step (issue 27: at most 30 s on 2 cores).

Per model: `cleave compile --devices 2 --planner data`, then `cleave run --steps 1` (which configures and builds the
bundle's rank programs, linking the runtime cached once per machine, and runs one step on 2 MPI ranks); the table
gives the rank source's size (with its parts where it was split: codegen/split_program.h), how many files of it compile
(in parallel), how many programs the bundle builds (one where the ranks differ only in constants,
codegen/shared_program.h) and both times. `resnet18@8` is ResNet-18 on 8 ranks (oversubscribed). The runtime cache is warmed first (the first model is built once before
timing), so the figures are what every bundle after the first costs on a machine.

Models: the three of tests/bench/cpu_vs_torch.py (mlp, resnet18, transformer), torchvision's shufflenet_v2_x0_5 and
densenet201 (64x64, batch 4), and the tiny variants of the benchmark zoo (models/zoo/generate.py --variant tiny
--batch 4). Inputs are random (float) or zeros (integer: token ids and labels).

Usage: /usr/bin/python3 tests/bench/bundle_build.py CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
Environment: MODELS (space-separated subset of the names in the table).
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

ZOO = ["wresnet", "resnet", "alexnet", "vgg16", "inception3", "rnn", "rnntc", "rnnlm", "nmt", "transformer"]
# densenet201: the largest program of torchvision's zoo (a thousand tensors).
TORCHVISION = ["shufflenet_v2_x0_5", "densenet201"]
MODELS = ["mlp", "resnet18", "resnet18@8", "transformer"] + TORCHVISION + ["zoo_" + f for f in ZOO]
BATCH = 4

TORCHVISION_EXPORT = """
import sys, torch, torchvision
sys.path.insert(0, sys.argv[2])
from generate import Classifier
torch.manual_seed(0)
net = Classifier(getattr(torchvision.models, sys.argv[3])(num_classes=10))
x, y = torch.randn(%d, 3, 64, 64), torch.zeros(%d, dtype=torch.int64)
torch.onnx.export(net, (x, y), sys.argv[1], opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["x", "y"])
""" % (BATCH, BATCH)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
    return r.stdout


def export(name, src, work):
    """(model path, batch)."""
    path = os.path.join(work, name + ".onnx")
    if name in ("mlp", "resnet18", "transformer"):
        out = sh(["/usr/bin/python3", os.path.join(src, "tests/bench/cpu_vs_torch.py"), "export", name, work])
        return path, int(out.split()[-1])
    if name in TORCHVISION:
        sh(["/usr/bin/python3", "-c", TORCHVISION_EXPORT, path, os.path.join(src, "models/zoo"), name])
        return path, BATCH
    family = name[len("zoo_"):]
    sh(["/usr/bin/python3", os.path.join(src, "models/zoo/generate.py"), "--family", family, "--variant", "tiny",
        "--batch", str(BATCH), "-o", path])
    return path, BATCH


def data_flags(path, work, name):
    """--data NAME=FILE,... for the model's graph inputs: random floats, zero integers."""
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(0)
    parts = []
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else BATCH for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.FLOAT:
            a = rng.standard_normal(shape).astype(np.float32)
        else:
            a = np.zeros(shape, dtype=np.int64)
        f = os.path.join(work, "%s_%s.npy" % (name, vi.name.replace("/", "_")))
        np.save(f, a)
        parts.append("%s=%s" % (vi.name, f))
    return ",".join(parts)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    cleave, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="bundle_build.")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    names = os.environ.get("MODELS", "").split() or MODELS
    rows, warmed = [], False
    for name in names:
        print("bundle_build: " + name, file=sys.stderr)
        try:
            model, _, devices = name.partition("@")
            devices = devices or "2"
            path, batch = export(model, src, work)
            data = data_flags(path, work, model)
            bundle = os.path.join(work, "%s.b%s" % (model, devices))
            subprocess.run(["rm", "-rf", bundle])
            t0 = time.perf_counter()
            sh([cleave, "compile", path, "--devices", devices, "--planner", "data", "--batch", str(batch), "-o",
                bundle])
            t1 = time.perf_counter()
            if not warmed:  # the runtime cache: built once per machine, not part of a bundle's cost
                sh([cleave, "run", bundle, "--steps", "1", "--data", data], env=env)
                subprocess.run(["rm", "-rf", os.path.join(bundle, "build")])
                warmed = True
            t2 = time.perf_counter()
            sh([cleave, "run", bundle, "--steps", "1", "--data", data], env=env)
            t3 = time.perf_counter()
            # Rank 0's program: ranks or rank_0, with its parts where it was split (codegen/split_program.h).
            sources = sorted(os.listdir(os.path.join(bundle, "src")))
            program = "ranks" if "ranks.cpp" in sources else "rank_0"
            files = [f for f in sources if f in (program + ".cpp", program + ".h") or f.startswith(program + "_part")]
            lines = sum(sum(1 for _ in open(os.path.join(bundle, "src", f))) for f in files)
            programs = len([f for f in sources if f.endswith(".cpp") and "_part" not in f])
            parts = len(files) - 1 if len(files) > 1 else 1
            rows.append((name, str(lines), str(parts), str(programs), "%.1f" % (t1 - t0), "%.1f" % (t3 - t2)))
        except Exception as e:  # noqa: BLE001 - one row per model whatever happens
            rows.append((name, "-", "-", "-", "-", "failed: " + str(e)[:100]))
    print("Bundles of 2 ranks (`--planner data`; 8 for name@8), %d cores: compile, then build + one step with the "
          "runtime cached" % os.cpu_count())
    print()
    print("| model | lines of rank 0's program | its files compiled | programs built | cleave compile (s) | "
          "build + 1 step (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
