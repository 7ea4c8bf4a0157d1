"""A few small torchvision builders through tests/bench/zoo_torchvision.py's checks (that runner covers all of
torchvision 0.14's classification builders on demand; this one runs in CI):
  - squeezenet1_1 (Conv, MaxPool with ceil_mode, Concat; no BatchNorm): every check, 2 ranks with the tofu planner;
  - resnet18 (BatchNorm, residual Adds): every check, 2 ranks with the data planner;
  - mnasnet0_5 (depthwise convolutions, BatchNorm momentum 0.0003): gradients only;
  - swin_t (LayerNorm, window attention; its attention mask is ScatterND of constants, folded at import), 32x32:
    gradients only.
Each must export, import, match torch float64's gradients (float32: no worse than torch float32's own error, at least
1e-5 of each parameter's largest gradient; float64 end to end: within 1e-6) and, where run, match `cleave eval` on 2
ranks, both on the float64 export: one step's gradients (1e-6) and 3 SGD steps (1e-5).
Usage (CTest): /usr/bin/python3 tests/e2e/zoo_torchvision_small.py <cleave-binary> <source-dir>
"""
import os
import sys
import tempfile
import warnings

CASES = [("squeezenet1_1", ("tofu",)), ("resnet18", ("data",)), ("mnasnet0_5", ()), ("swin_t", ())]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: zoo_torchvision_small.py <cleave-binary> <source-dir>")
    cleave, src = sys.argv[1], sys.argv[2]
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("skip: python3-torchvision is not installed (tools/setup.sh installs it)")
        return 0
    sys.path.insert(0, os.path.join(src, "tests", "bench"))
    import zoo_torchvision as zoo
    zoo.SRC = src
    zoo.SIDE["swin_t"] = (32, "no BatchNorm; 64x64 takes a minute, too long for CI")
    warnings.filterwarnings("ignore")  # the exporter's per-node notes
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, planners in CASES:
            row = zoo.run_builder(cleave, name, tmp, bool(planners), False, 900, planners=planners)
            print(f"{name}: {'ok' if row['ok'] else 'MISS'} in {row['secs']:.0f} s", file=sys.stderr, flush=True)
            rows.append(row)
    print(zoo.table(rows))
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"{r['name']}: {'; '.join(r['notes'])}")
    if bad:
        return 1
    print(f"ok: {', '.join(n for n, _ in CASES)} match torch and cleave eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
