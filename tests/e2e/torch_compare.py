"""What the comparisons of a Cleave training step with torch share (tests/e2e/torchvision_mobilenet.py, image_layers.py,
index_ops.py, tests/bench/zoo_torchvision.py): the loss-wrapped classifier they export (models/zoo/generate.py's
Classifier: forward(x, y) is the cross-entropy of net(x)), and the gradient check.

The gradient check: Cleave's gradient of each parameter is recovered from one SGD step at a large learning rate
(LR: w1 = w0 - LR * g carries g to float32 precision, so (w0 - w1) / LR is off by about an ulp of |w0| / LR + |g|)
and compared with torch float64's gradient at the same float32 weights, relative to that parameter's largest float64
gradient; torch float32's own error, measured the same way, is the scale it is held to. A gradient that is zero in
exact arithmetic (a bias feeding a norm) comes out of torch as rounding noise: it is measured against a floor, a
fraction of the model's largest gradient.

A helper module, not a test: tests/CMakeLists.txt leaves it out of the e2e scripts.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "zoo"))
from generate import Classifier  # noqa: E402,F401

LR = 1e4
LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-5  # a gradient error this small (relative to the parameter's largest gradient) always passes
FLOOR = 1e-6  # of the model's largest gradient: what a zero gradient's error is measured against


def export(model, args, path, opset=13, names=("x", "y")):
    """torch.onnx.export in training mode without constant folding; returns the sorted ONNX op types."""
    torch.onnx.export(model, args, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=list(names))
    return sorted({n.op_type for n in onnx.load(path, load_external_data=False).graph.node})


def save_data(tmp, name, arrays):
    """Writes each array as <tmp>/<name>_<key>.npy; returns the --data flag naming them."""
    files = []
    for k, a in arrays.items():
        f = os.path.join(tmp, f"{name}_{k}.npy")
        np.save(f, a)
        files.append(f"{k}={f}")
    return ",".join(files)


def step_loss(out):
    """The loss of the first line of `cleave eval` / `cleave run` output that has one."""
    return float([line for line in out.splitlines() if "loss" in line][0].split()[-1])


def initializers(path):
    """Initializer name -> float64 array of an ONNX file."""
    return {i.name: numpy_helper.to_array(i).astype(np.float64) for i in onnx.load(path).graph.initializer}


def recovered_gradients(w0_path, w1_path, lr=LR):
    """(w0 - w1) / lr of every float initializer of both files but BatchNorm's running statistics."""
    w0 = {i.name: numpy_helper.to_array(i) for i in onnx.load(w0_path).graph.initializer}
    w1 = initializers(w1_path)
    return {k: (w0[k].astype(np.float64) - w1[k]) / lr for k in w0
            if np.issubdtype(w0[k].dtype, np.floating) and "running_" not in k and k in w1}


class Reference:
    """torch's loss and parameter gradients (name -> float64 array) in float64 and in float32 at the same weights;
    `unused`: the parameters torch gives no gradient."""

    def __init__(self, loss64, grads64, loss32, grads32, unused=()):
        self.loss64, self.grads64, self.loss32, self.grads32, self.unused = loss64, grads64, loss32, grads32, unused

    def floor(self, fraction=FLOOR):
        """`fraction` of the largest float64 gradient (at least 1e-30, so an all-zero gradient divides by it)."""
        return max(fraction * max(float(np.abs(g).max()) for g in self.grads64.values()), 1e-30)


def module_reference(make, x, y, native_too=False):
    """The Reference of make() (a fresh module at the weights under test, in training mode) on float32 numpy x, y.
    With `native_too`, torch float32 also runs with oneDNN off (torch's own convolution kernels, another summation
    order), and the loss and the gradients are each taken from whichever float32 run is further from float64: on an
    ill-conditioned step the two differ from float64 by different amounts (googlenet's worst gradient: 0.085 of its
    largest with oneDNN, 0.24 without), and float32's error is the larger."""
    def run(dtype, onednn=True):
        m = make().to(dtype)
        with torch.backends.mkldnn.flags(enabled=onednn):
            loss = m(torch.from_numpy(x).to(dtype), torch.from_numpy(y))
            loss.backward()
        return loss.item(), {n: p.grad.double().numpy() for n, p in m.named_parameters() if p.grad is not None}, m

    loss64, grads64, m = run(torch.float64)
    loss32, grads32, _ = run(torch.float32)
    if native_too:
        floor = max(FLOOR * max(float(np.abs(g).max()) for g in grads64.values()), 1e-30)
        loss_n, grads_n, _ = run(torch.float32, onednn=False)
        if abs(loss_n - loss64) > abs(loss32 - loss64):
            loss32 = loss_n
        if worst_error(grads_n, grads64, floor)[0] > worst_error(grads32, grads64, floor)[0]:
            grads32 = grads_n
    unused = tuple(n for n, p in m.named_parameters() if p.grad is None)
    return Reference(loss64, grads64, loss32, grads32, unused)


def function_reference(fn, params, inputs):
    """The Reference of loss = fn(params as tensors, *inputs as tensors) for numpy params (name -> array) and inputs
    (floats in the run's dtype, integers as they are)."""
    out = {}
    for dtype in (torch.float64, torch.float32):
        p = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
        ins = [torch.tensor(a, dtype=dtype) if a.dtype.kind == "f" else torch.tensor(a) for a in inputs]
        loss = fn(p, *ins)
        loss.backward()
        out[dtype] = (loss.item(), {k: t.grad.double().numpy() for k, t in p.items()})
    return Reference(*out[torch.float64], *out[torch.float32])


def worst_error(got, want, floor):
    """(max over want's names of max|got - want| / max(max|want|, floor), that name); (0, "") for none. A NaN
    error is the worst."""
    worst = (0.0, "")
    for name, w in want.items():
        err = float(np.abs(got[name] - w).max()) / max(float(np.abs(w).max()), floor)
        if err > worst[0] or (np.isnan(err) and not np.isnan(worst[0])):
            worst = (err, name)
    return worst


def check_step(where, loss, grads, ref, floor=FLOOR, slack=1.0, loss_slack=0.0, nonzero=False, skip_unused=False,
               file=None):
    """Checks one step of Cleave (its loss, its recovered gradients `grads`) against torch (`ref`, a Reference): the
    loss within relative max(LOSS_RTOL, loss_slack x torch float32's own loss error), and the worst gradient error
    (worst_error, against `floor` x the model's largest gradient) no worse than max(GRAD_RTOL, slack x torch
    float32's); with `nonzero`, the same again over the parameters whose gradient is not zero in exact arithmetic
    (largest above 1e3 x the floor). A parameter torch gives no gradient is a problem unless `skip_unused`. Prints
    one line to `file` (stdout by default); returns (problems, the worst errors: key "all" (and "nonzero") ->
    (Cleave's, its parameter, torch float32's), the loss's relative error)."""
    problems = [] if skip_unused else [f"{where}: parameter {n} gets no gradient in torch" for n in ref.unused]
    missing = sorted(n for n in ref.grads64 if n not in grads)
    if missing:
        problems.append(f"{where}: parameters {missing} are not initializers of the export and the saved model")
    floor = ref.floor(floor)
    sets = {"all": {n: g for n, g in ref.grads64.items() if n in grads}}
    if nonzero:
        sets["nonzero"] = {n: g for n, g in sets["all"].items() if np.abs(g).max() > 1e3 * floor}
    worst = {k: worst_error(grads, want, floor) + (worst_error(ref.grads32, want, floor)[0],)
             for k, want in sets.items()}
    rel = abs(loss - ref.loss64) / abs(ref.loss64)
    rel32 = abs(ref.loss32 - ref.loss64) / abs(ref.loss64)
    text = "; ".join(f"{w[0]:.3g} ({w[1]}), torch float32's {w[2]:.3g}" + ("" if k == "all" else f" ({k})")
                     for k, w in sorted(worst.items()))
    print(f"{where}: loss {loss:.8g} vs torch f64 {ref.loss64:.8g} (rel {rel:.2g}, torch f32's {rel32:.2g}); worst "
          f"gradient error relative to the parameter's largest: {text}", file=file, flush=True)
    if not rel <= max(LOSS_RTOL, loss_slack * rel32):
        problems.append(f"{where}: loss {loss:.8g} vs torch float64 {ref.loss64:.8g} (rel {rel:.3g})")
    for k, (err, name, err32) in sorted(worst.items()):
        if not err <= max(GRAD_RTOL, slack * err32):
            problems.append(f"{where}: gradient of {name} off by {err:.3g} of its largest value, worse than "
                            f"{slack:g} x torch float32's ({err32:.3g}{'' if k == 'all' else ', ' + k})")
    return problems, worst, rel
