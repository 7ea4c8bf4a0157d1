#!/usr/bin/env python3
"""Times torch eager training steps of a zoo model on the GPU, as tests/gpu/bench_vs_torch.sh compares Cleave with:
the model models/zoo/generate.py exports (forward + cross-entropy), SGD at the same learning rate, random inputs.

Usage: bench_torch.py SRC FAMILY VARIANT BATCH PRECISION [STEPS]
PRECISION: fp32 (no TF32 anywhere), tf32 (cuBLAS and cuDNN may use TF32), bf16 (torch.autocast to bfloat16, fp32
weights). Prints one line: `torch <precision> step_ms <median> peak_mb <max allocated> params <count>`; the median
is over STEPS steps after 3 warm-up steps, each timed from a device synchronise to the next.
"""
import os
import statistics
import sys
import time

import torch

src, family, variant, batch, precision = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
steps = int(sys.argv[6]) if len(sys.argv) > 6 else 10
sys.path.insert(0, os.path.join(src, "models", "zoo"))
import generate  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
torch.backends.cudnn.allow_tf32 = precision == "tf32"
torch.manual_seed(0)
make, inputs, _ = generate.resolve(family, variant)
model = make().cuda().train()
args = []
for name, dims, dtype in inputs:
    shape = (batch,) + tuple(dims)
    if dtype != torch.int64:
        args.append(torch.randn(shape, device="cuda", dtype=dtype))
        continue
    if hasattr(model, "vocab"):  # token models: ids and labels over the vocabulary
        high = model.vocab
    else:  # image classifiers: labels over the classes
        with torch.no_grad():
            high = model.net.eval()(args[0][:2]).shape[-1]
        model.train()
    args.append(torch.randint(0, high, shape, device="cuda"))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = model(*args)
    loss.backward()
    opt.step()


for _ in range(3):
    step()
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
params = sum(p.numel() for p in model.parameters())
print(f"torch {precision} step_ms {statistics.median(times) * 1e3:.2f} "
      f"peak_mb {torch.cuda.max_memory_allocated() / 2**20:.0f} params {params}")
