"""Trains the exported models with torch.optim and writes the reference losses and weights Cleave must reproduce.

For each model in make_models.MODELS and each optimizer (SGD lr 0.1; Adam lr 0.01, betas (0.9, 0.999), eps 1e-8,
no weight decay), starting from the initializers stored in models/<model>.onnx:
  step k = 1..STEPS uses the training samples [(k-1)*B, k*B) (indices modulo the training-set size), computes the
  loss (recorded: the loss of the forward pass *before* that step's update), back-propagates and steps the optimizer.
Writes models/reference/<model>_<opt>.json:
  losses       the STEPS losses (repr of the float32 values)
  params       trainable parameters after the last step, by ONNX initializer name: {"shape": [...], "values": [...]}
  running_stats_torch  BatchNorm running_mean/running_var as torch keeps them (running_var from the *unbiased*
                       batch variance)
  running_stats_onnx   the same under ONNX BatchNormalization training-mode semantics (running_var from the
                       *biased* batch variance; running_mean is identical)
The e2e test compares losses and trainable params only: running_var legitimately differs between the two
conventions, and Cleave follows ONNX's.
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_models  # noqa: E402

BATCH = 16
STEPS = 8
OPTIMIZERS = {
    "sgd": {"name": "sgd", "lr": 0.1},
    "adam": {"name": "adam", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
}
DATA = {  # model -> (x file, y file) under models/data
    "mlp": ("digits_flat_train_x.npy", "digits_train_y.npy"),
    "cnn": ("digits_train_x.npy", "digits_train_y.npy"),
}


def batch_indices(step, count):
    """Sample indices of 1-based `step`: [(step-1)*B, step*B) modulo `count`."""
    return [((step - 1) * BATCH + i) % count for i in range(BATCH)]


def load_from_onnx(model, path):
    """Loads every initializer of `path` into `model`'s state (by name); checks that each state entry is covered
    except BatchNorm's num_batches_tracked (not exported: it only matters for momentum=None)."""
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    state = model.state_dict()
    for name, value in state.items():
        if name.endswith("num_batches_tracked"):
            continue
        if name not in inits:
            sys.exit(f"error: {path}: no initializer for {name}")
        value.copy_(torch.from_numpy(inits[name].copy()))
    return inits


class OnnxRunningStats:
    """Tracks BatchNorm running statistics under ONNX's rule: var from the biased batch variance."""

    def __init__(self, model):
        self.stats = {}
        for mname, mod in model.named_modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                prefix = mname + "."
                self.stats[prefix + "running_mean"] = mod.running_mean.detach().clone()
                self.stats[prefix + "running_var"] = mod.running_var.detach().clone()
                mod.register_forward_pre_hook(self._hook(prefix, mod))

    def _hook(self, prefix, mod):
        def hook(module, inputs):
            x = inputs[0].detach()
            mean = x.mean(dim=(0, 2, 3))
            var = x.var(dim=(0, 2, 3), unbiased=False)
            m = mod.momentum  # torch's momentum = 1 - ONNX's
            self.stats[prefix + "running_mean"] = (1 - m) * self.stats[prefix + "running_mean"] + m * mean
            self.stats[prefix + "running_var"] = (1 - m) * self.stats[prefix + "running_var"] + m * var
        return hook


def tensor_entry(t):
    a = t.detach().cpu().numpy().astype(np.float32)
    return {"shape": list(a.shape), "values": [float(v) for v in a.reshape(-1)]}


def train(model_name, opt_name, data_dir, onnx_path):
    model = make_models.make_model(model_name)
    load_from_onnx(model, onnx_path)
    model.train()
    onnx_stats = OnnxRunningStats(model)
    xs = np.load(os.path.join(data_dir, DATA[model_name][0]))
    ys = np.load(os.path.join(data_dir, DATA[model_name][1]))
    cfg = OPTIMIZERS[opt_name]
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    else:
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
    losses = []
    for step in range(1, STEPS + 1):
        idx = batch_indices(step, len(xs))
        x = torch.from_numpy(xs[idx])
        y = torch.from_numpy(ys[idx])
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach().numpy().astype(np.float32)))
    params = {name: tensor_entry(p) for name, p in model.named_parameters()}
    torch_stats = {name: tensor_entry(b) for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")}
    return {
        "model": model_name,
        "onnx": f"models/{model_name}.onnx",
        "data": {"x": f"models/data/{DATA[model_name][0]}", "y": f"models/data/{DATA[model_name][1]}"},
        "batch": BATCH,
        "steps": STEPS,
        "optimizer": cfg,
        "losses": losses,
        "params": params,
        "running_stats_torch": torch_stats,
        "running_stats_onnx": {k: tensor_entry(v) for k, v in sorted(onnx_stats.stats.items())},
    }


def dump(ref, path):
    """JSON with one line per tensor, so diffs stay readable."""
    lines = ["{"]
    keys = list(ref)
    for i, key in enumerate(keys):
        comma = "," if i + 1 < len(keys) else ""
        value = ref[key]
        if key in ("params", "running_stats_torch", "running_stats_onnx"):
            lines.append(f" {json.dumps(key)}: {{")
            names = list(value)
            for j, name in enumerate(names):
                c = "," if j + 1 < len(names) else ""
                lines.append(f"  {json.dumps(name)}: {json.dumps(value[name])}{c}")
            lines.append(f" }}{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(models_dir):
    torch.set_num_threads(1)  # deterministic reductions
    out_dir = os.path.join(models_dir, "reference")
    os.makedirs(out_dir, exist_ok=True)
    for model_name in make_models.MODELS:
        for opt_name in OPTIMIZERS:
            ref = train(model_name, opt_name, os.path.join(models_dir, "data"),
                        os.path.join(models_dir, model_name + ".onnx"))
            path = os.path.join(out_dir, f"{model_name}_{opt_name}.json")
            dump(ref, path)
            print(f"{path}: losses " + " ".join(f"{l:.5f}" for l in ref["losses"]), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
