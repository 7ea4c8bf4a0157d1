#!/usr/bin/python3
"""torch 1.13 references for the activation and rounding kernels (tests/interp/activations_test.cpp).

Run: /usr/bin/python3 tests/interp/make_activation_reference.py > tests/interp/activation_reference.txt

Same format and conventions as make_reference.py: float32 inputs, float64 references. The inputs avoid the exact
kink points (torch and Cleave agree there too, but a float32-rounded input near a kink is a weak test).
"""
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261202)
torch.set_default_dtype(torch.float64)
lines = []


def emit(name, a):
    a = np.asarray(a, dtype=np.float64)
    dims = ",".join(str(d) for d in a.shape) if a.ndim else "-"
    lines.append(name + " " + dims + " " + " ".join(repr(float(v)) for v in a.ravel()))


def leaf(name, a):
    a = np.asarray(a, dtype=np.float32)
    emit(name, a)
    return torch.tensor(a.astype(np.float64), requires_grad=True)


x = leaf("act.x", rng.uniform(-5, 5, (3, 4, 5)))
dy = leaf("act.dy", rng.standard_normal((3, 4, 5)))
selu_a, selu_g = 1.67326319217681884765625, 1.05070102214813232421875
cases = {
    "clip": lambda t: torch.clamp(t, -0.5, 2.0),
    "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "leakyrelu": lambda t: F.leaky_relu(t, 0.1),
    "elu": lambda t: F.elu(t, 1.5),
    "selu": F.selu,
    "celu": lambda t: F.celu(t, 2.0),
    "softplus": F.softplus,
    "softsign": F.softsign,
    "thresholdedrelu": lambda t: F.threshold(t, 0.3, 0.0),
    "abs": torch.abs,
    "gelu": F.gelu,
}
for name, f in cases.items():
    y = f(x)
    emit(f"act.{name}.y", y.detach())
    emit(f"act.{name}.dx", torch.autograd.grad(y, x, dy)[0])
# Rounding: halves (Round: to even) and values just off integers.
r = leaf("act.r", np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.2, -0.7, 0.0, 0.3, 1.7, 3.0], dtype=np.float32))
for name, f in (("sign", torch.sign), ("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round)):
    emit(f"act.{name}.y", f(r).detach())
# PRelu with a per-channel slope [C, 1, 1], as torch.nn.PReLU(C) exports it.
px = leaf("act.prelu.x", rng.standard_normal((2, 3, 2, 2)))
ps = leaf("act.prelu.slope", rng.uniform(0.05, 0.5, (3, 1, 1)))
pdy = leaf("act.prelu.dy", rng.standard_normal((2, 3, 2, 2)))
y = F.prelu(px, ps.reshape(3))
emit("act.prelu.y", y.detach())
gx, gs = torch.autograd.grad(y, [px, ps], pdy)
emit("act.prelu.dx", gx)
emit("act.prelu.dslope_full", (pdy * torch.where(px > 0, torch.zeros_like(px), px)).detach())
emit("act.prelu.dslope", gs)
# RoundToBf16 (--precision bf16): torch's float32 -> bfloat16 cast, back to float. Ties (1 + 2^-8 lies halfway
# between 1 and 1 + 2^-7) go to even; large, tiny and subnormal magnitudes; signs.
b = leaf("act.bf16.x", np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1.00390625 + 2**-20, 3.14159265, -2.718281828,
                                 65504.0, 3.0e38, 1.0e-30, 1.0e-40, -7.0e-39, 0.0, 1234.5678, 0.1],
                                dtype=np.float32))
emit("act.bf16.y", b.detach().float().to(torch.bfloat16).double())
# RoundToFp16 (--precision fp16): torch's float32 -> float16 cast, back to float. Ties to even (1 + 2^-11 lies halfway
# between 1 and 1 + 2^-10), the overflow boundary (65504 is the largest half, 65520 rounds to inf), subnormals (step
# 2^-24, halfway cases included), values below half the smallest subnormal, signs.
h = leaf("act.fp16.x", np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 3.14159265, -2.718281828, 65504.0, 65519.0,
                                 65520.0, -70000.0, 3.0e38, 1.0e-5, 6.1e-5, 2**-24 * 2.5, 2**-24 * 3.5, -2**-24 * 1.5,
                                 2**-26, 1.0e-30, 0.0, 1234.5678, 0.1], dtype=np.float32))
emit("act.fp16.y", h.detach().float().to(torch.float16).double())

print("\n".join(lines))
