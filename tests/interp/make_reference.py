#!/usr/bin/python3
"""Reference values for tests/interp, computed with torch 1.13 / numpy (never with Cleave).

Run: /usr/bin/python3 tests/interp/make_reference.py > tests/interp/reference.txt

Every input is a float32 value (so the interpreter sees exactly the same numbers); references are computed in
float64 so the only difference left is the interpreter's final rounding to float32.
Format: one array per line, `name dims values...`, dims comma-separated ("-" for a scalar).
"""
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(20261121)
torch.set_default_dtype(torch.float64)
lines = []


def emit(name, a):
    a = np.asarray(a, dtype=np.float64)
    dims = ",".join(str(d) for d in a.shape) if a.ndim else "-"
    lines.append(name + " " + dims + " " + " ".join(repr(float(v)) for v in a.ravel()))


def rand(name, *shape):
    a = rng.standard_normal(shape).astype(np.float32)
    emit(name, a)
    return torch.tensor(a.astype(np.float64), requires_grad=True)


# ---- Conv 2-D: groups 2, strides [2,1], asymmetric pads [1,0,2,1], dilations [2,1], bias ----
x = rand("conv2d.x", 2, 4, 7, 6)
w = rand("conv2d.w", 6, 2, 3, 2)
b = rand("conv2d.b", 6)
y = F.conv2d(F.pad(x, (0, 1, 1, 2)), w, b, stride=(2, 1), dilation=(2, 1), groups=2)
emit("conv2d.y", y.detach())
dy = rand("conv2d.dy", *y.shape)
dx, dw = torch.autograd.grad(y, [x, w], dy)
emit("conv2d.dx", dx)
emit("conv2d.dw", dw)

# ---- Conv 1-D: stride 2, pads [1,1], dilation 2, no bias ----
x = rand("conv1d.x", 1, 3, 9)
w = rand("conv1d.w", 2, 3, 3)
y = F.conv1d(x, w, None, stride=2, padding=1, dilation=2)
emit("conv1d.y", y.detach())
dy = rand("conv1d.dy", *y.shape)
dx, dw = torch.autograd.grad(y, [x, w], dy)
emit("conv1d.dx", dx)
emit("conv1d.dw", dw)

# ---- MaxPool 2-D: kernel [3,3], strides [2,2], pads 1, dilations [1,2], ceil_mode, with indices ----
x = rand("maxpool.x", 2, 2, 6, 9)
y, idx = F.max_pool2d(x, (3, 3), (2, 2), (1, 1), (1, 2), ceil_mode=True, return_indices=True)
emit("maxpool.y", y.detach())
n, c, h, w_ = x.shape
nc_offset = (np.arange(n * c).reshape(n, c, 1, 1) * h * w_)
emit("maxpool.indices", idx.numpy() + nc_offset)  # ONNX indices include the (n, c) offset
dy = rand("maxpool.dy", *y.shape)
emit("maxpool.dx", torch.autograd.grad(y, x, dy)[0])

# ---- AveragePool 2-D: kernel [3,3], strides [2,2], pads 1, ceil_mode, count_include_pad 0 and 1 ----
x = rand("avgpool.x", 1, 3, 6, 7)
for include in (0, 1):
    y = F.avg_pool2d(x, (3, 3), (2, 2), (1, 1), ceil_mode=True, count_include_pad=bool(include))
    emit(f"avgpool{include}.y", y.detach())
    dy = rand(f"avgpool{include}.dy", *y.shape)
    emit(f"avgpool{include}.dx", torch.autograd.grad(y, x, dy)[0])

# ---- BatchNormalization, training mode (ONNX momentum 0.9 = torch momentum 0.1), and its gradient ----
x = rand("bn.x", 4, 3, 2, 5)
scale = rand("bn.scale", 3)
bias = rand("bn.bias", 3)
rmean = rand("bn.mean", 3).detach()
rvar = torch.tensor(np.abs(rng.standard_normal(3)).astype(np.float32).astype(np.float64))
emit("bn.var", rvar)
eps = 1e-5
y, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x, scale, bias, None, None, True, 0.1, eps)
emit("bn.y", y.detach())
xn = x.detach().numpy()
batch_var = xn.var(axis=(0, 2, 3))  # biased, as ONNX's reference
emit("bn.running_mean", 0.9 * rmean.numpy() + 0.1 * xn.mean(axis=(0, 2, 3)))
emit("bn.running_var", 0.9 * rvar.numpy() + 0.1 * batch_var)
emit("bn.saved_mean", save_mean.detach())
emit("bn.saved_invstd", save_invstd.detach())
dy = rand("bn.dy", *y.shape)
dx, dscale, dbias = torch.autograd.grad(y, [x, scale, bias], dy)
emit("bn.dx", dx)
emit("bn.dscale", dscale)
emit("bn.dbias", dbias)

# ---- SoftmaxCrossEntropyLoss / NLL over [N, C, d] with weights and ignore_index ----
scores = rand("sce.scores", 3, 5, 2)
labels = np.array([[0, 4], [2, 2], [4, 1]], dtype=np.int64)
emit("sce.labels", labels)
weights = torch.tensor(np.abs(rng.standard_normal(5)).astype(np.float32).astype(np.float64))
emit("sce.weights", weights)
lab = torch.tensor(labels)
cases = {
    "mean_w_ign": dict(weight=weights, ignore_index=2, reduction="mean"),
    "sum_ign": dict(ignore_index=4, reduction="sum"),
    "none_w": dict(weight=weights, reduction="none"),
    "mean": dict(reduction="mean"),
}
logp = F.log_softmax(scores, dim=1)
emit("sce.log_prob", logp.detach())
for name, kw in cases.items():
    loss = F.cross_entropy(scores, lab, **kw)
    emit(f"sce.{name}.loss", loss.detach())
    dloss = rand(f"sce.{name}.dloss", *loss.shape)
    emit(f"sce.{name}.dscores", torch.autograd.grad(loss, scores, dloss)[0])
    # NLL on the (fixed) log-probabilities: same loss, gradient wrt its input
    lp = logp.detach().clone().requires_grad_(True)
    nll = F.nll_loss(lp, lab, **kw)
    emit(f"nll.{name}.loss", nll.detach())
    emit(f"nll.{name}.dinput", torch.autograd.grad(nll, lp, dloss)[0])

# ---- Softmax / LogSoftmax on axis 1 and their gradients ----
x = rand("softmax.x", 2, 3, 4)
for name, f in (("softmax", F.softmax), ("logsoftmax", F.log_softmax)):
    y = f(x, dim=1)
    emit(f"{name}.y", y.detach())
    dy = rand(f"{name}.dy", *y.shape)
    emit(f"{name}.dx", torch.autograd.grad(y, x, dy)[0])

# ---- Gemm: transA, transB, alpha, beta, C broadcast from [5] ----
a = rand("gemm.a", 4, 3)
bm = rand("gemm.b", 5, 4)
cv = rand("gemm.c", 5)
emit("gemm.y", (0.75 * a.T @ bm.T + 1.5 * cv).detach())  # alpha 0.75, beta 1.5 are exact in float32

# ---- MatMul: batched broadcast, and a 1-D A ----
a = rand("matmul.a", 2, 1, 3, 4)
bm = rand("matmul.b", 3, 4, 5)
emit("matmul.y", torch.matmul(a, bm).detach())
a = rand("matmul1d.a", 4)
bm = rand("matmul1d.b", 2, 4, 5)
emit("matmul1d.y", torch.matmul(a, bm).detach())

# ---- Pow and its gradient (positive base, broadcast exponent) ----
a = torch.tensor(np.abs(rng.standard_normal((2, 3))).astype(np.float32).astype(np.float64) + 0.5, requires_grad=True)
emit("pow.a", a.detach())
e = rand("pow.b", 3)
y = torch.pow(a, e)
emit("pow.y", y.detach())
dy = rand("pow.dy", 2, 3)
da = (dy * e * a.pow(e - 1)).detach()  # in the broadcast shape, as PowGrad's outputs
db = (dy * a.pow(e) * torch.log(a)).detach()
emit("pow.da", da)
emit("pow.db", db)

# ---- Elementwise: broadcast binary ops, unary ops and their gradient kernels ----
a = rand("ew.a", 2, 3, 4)
bb = rand("ew.b", 3, 1)
for name, f in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div)):
    emit(f"ew.{name}", f(a, bb).detach())
x = rand("un.x", 2, 3, 4)
xpos = torch.tensor(np.abs(rng.standard_normal((2, 3, 4))).astype(np.float32).astype(np.float64) + 0.1,
                    requires_grad=True)
emit("un.xpos", xpos.detach())
dy = rand("un.dy", 2, 3, 4)
for name, f, inp in (("relu", torch.relu, x), ("sigmoid", torch.sigmoid, x), ("tanh", torch.tanh, x),
                     ("erf", torch.erf, x), ("sqrt", torch.sqrt, xpos), ("exp", torch.exp, x),
                     ("log", torch.log, xpos), ("neg", torch.neg, x)):
    y = f(inp)
    emit(f"un.{name}.y", y.detach())
    emit(f"un.{name}.dx", torch.autograd.grad(y, inp, dy)[0])
# The trigonometric and hyperbolic functions, each inside its domain: x / 2 (|x / 2| < 1, exact in float32) for Asin,
# Acos and Atanh, xpos + 1 (rounded to float32) for Acosh.
xhalf = (x / 2).detach().requires_grad_()
emit("un.xhalf", xhalf.detach())
xgt1 = torch.tensor((xpos.detach().numpy() + 1).astype(np.float32).astype(np.float64), requires_grad=True)
emit("un.xgt1", xgt1.detach())
for name, f, inp in (("sin", torch.sin, x), ("cos", torch.cos, x), ("tan", torch.tan, x), ("asin", torch.asin, xhalf),
                     ("acos", torch.acos, xhalf), ("atan", torch.atan, x), ("sinh", torch.sinh, x),
                     ("cosh", torch.cosh, x), ("asinh", torch.asinh, x), ("acosh", torch.acosh, xgt1),
                     ("atanh", torch.atanh, xhalf)):
    y = f(inp)
    emit(f"un.{name}.y", y.detach())
    emit(f"un.{name}.dx", torch.autograd.grad(y, inp, dy)[0])

# ---- Shape ops and their gradients ----
x = rand("sh.x", 2, 3, 4)
emit("sh.transpose", x.permute(2, 0, 1).detach())
x2 = rand("sh.x2", 2, 1, 4)
emit("sh.concat", torch.cat([x, x2], dim=1).detach())
emit("sh.split0", x[:, :, :1].detach())
emit("sh.split1", x[:, :, 1:].detach())
e = rand("sh.e", 3, 1)
emit("sh.expand", e.expand(2, 3, 4).detach())
y = x[:, 1:3, :].flip(2)[:, :, 0::2]  # x[:, 1:3, 3:0:-2] (torch has no negative steps)
emit("sh.slice", y.detach())
dy = rand("sh.slice.dy", *y.shape)
emit("sh.slice.dx", torch.autograd.grad(y, x, dy)[0])
ind = np.array([[0, -1], [2, 2]], dtype=np.int64)
emit("sh.gather.indices", ind)
y = x[:, torch.tensor(ind % 3), :]  # gather on axis 1, negative index wrapped
emit("sh.gather", y.detach())
dy = rand("sh.gather.dy", *y.shape)
emit("sh.gather.dx", torch.autograd.grad(y, x, dy)[0])
emit("sh.reducemean", x.mean(dim=(0, 2), keepdim=True).detach())
emit("sh.reducesum", x.sum(dim=1).detach())
x = rand("gap.x", 2, 3, 4, 5)
y = F.adaptive_avg_pool2d(x, 1)
emit("gap.y", y.detach())
dy = rand("gap.dy", *y.shape)
emit("gap.dx", torch.autograd.grad(y, x, dy)[0])

# ---- Optimizers: 3 steps of torch.optim from the same start, fixed gradients per step ----
p0 = rng.standard_normal((2, 3)).astype(np.float32)
emit("opt.p0", p0)
grads = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
for i, g in enumerate(grads):
    emit(f"opt.g{i + 1}", g)
optims = {
    "sgd": lambda p: torch.optim.SGD([p], lr=0.1, weight_decay=0.01),
    "momentum": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01),
    "nesterov": lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    "adamw": lambda p: torch.optim.AdamW([p], lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
}
for name, make in optims.items():
    p = torch.tensor(p0.astype(np.float64), requires_grad=True)
    opt = make(p)
    for i, g in enumerate(grads):
        p.grad = torch.tensor(g.astype(np.float64))
        opt.step()
        emit(f"{name}.p{i + 1}", p.detach())

# Pad modes (numpy.pad's edge and reflect, which ONNX's Pad follows), with a negative pad that crops.
pad_x = rng.standard_normal((3, 4, 5)).astype(np.float32)
emit("pad.x", pad_x)
for mode in ("edge", "reflect"):
    padded = np.pad(pad_x.astype(np.float64), ((1, 2), (0, 0), (3, 4)), mode=mode)  # pads [1,0,3, 2,0,4]
    emit(f"pad.{mode}", padded[:, 1:, :])  # then crop one row of dim 1 at the front: pads [1,-1,3, 2,0,4]

# Narrow types: numpy's uint8/int8 arithmetic wraps; float16 arithmetic rounds each result to nearest even.
u8a = rng.integers(0, 256, 12).astype(np.uint8)
u8b = rng.integers(0, 256, 12).astype(np.uint8)
u8b[u8b == 0] = 1
emit("u8.a", u8a)
emit("u8.b", u8b)
for name, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply)):
    emit(f"u8.{name}", fn(u8a, u8b))
emit("u8.div", u8a // u8b)
i8a = rng.integers(-128, 128, 12).astype(np.int8)
i8b = rng.integers(-128, 128, 12).astype(np.int8)
emit("i8.a", i8a)
emit("i8.b", i8b)
emit("i8.add", i8a + i8b)
emit("i8.mul", i8a * i8b)
h_a = (rng.standard_normal(16) * 100).astype(np.float16)
h_b = (rng.uniform(0.05, 3, 16) * rng.choice([-1, 1], 16)).astype(np.float16)
emit("f16.a", h_a)
emit("f16.b", h_b)
for name, fn in (("add", np.add), ("mul", np.multiply), ("div", np.divide)):
    emit(f"f16.{name}", fn(h_a, h_b))
# Integer division truncates toward zero (as C and ONNX runtimes do); numpy's x // 0 is 0, which Cleave follows.
i32a = rng.integers(-50, 50, 12).astype(np.int32)
i32b = rng.integers(-4, 5, 12).astype(np.int32)
i32b[:3] = 0
emit("i32.a", i32a)
emit("i32.b", i32b)
with np.errstate(divide="ignore"):
    emit("i32.div", np.abs(i32a) // np.abs(i32b) * np.sign(i32a) * np.sign(i32b))

# ---- MatMul with transA and transB: torch.matmul of the operands' transposed views, batched with broadcast ----
a = rand("matmul_t.a", 2, 1, 4, 3)
bm = rand("matmul_t.b", 3, 5, 4)
emit("matmul_t.y", torch.matmul(a.transpose(-2, -1), bm.transpose(-2, -1)).detach())
a = rand("matmul_ta.a", 4, 3)
bm = rand("matmul_ta.b", 2, 4, 5)
emit("matmul_ta.y", torch.matmul(a.transpose(-2, -1), bm).detach())

print("\n".join(lines))
