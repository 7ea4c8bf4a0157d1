"""Exports the example training models (forward + scalar loss) to ONNX.

Each model is a wrapper whose forward(x, y) returns F.cross_entropy(net(x), y), exported with
training=TrainingMode.TRAINING and do_constant_folding=False at opset 15, so BatchNormalization is in training mode
and every parameter stays an initializer (named as in the torch module: `net.0.weight`, ...).

  mlp.onnx  x: float32 [N,64]      Linear(64,32) - ReLU - Linear(32,10)
  cnn.onnx  x: float32 [N,1,8,8]   Conv(1,8,3,p1) - BN(8) - ReLU - MaxPool(2) - Conv(8,16,3,p1) - BN(16) - ReLU
                                   - GlobalAveragePool - Flatten - Linear(16,10)
            The convolutions have no bias: BatchNorm subtracts the batch mean, so a conv bias before it has an exactly
            zero gradient, and the float rounding noise (~1e-8) left in its place is amplified by Adam into full
            lr-sized steps whose sign differs between any two implementations: the reference would be meaningless.
  both      y: int64 [N] class labels, output `loss`: float32 scalar (mean reduction)

The batch dimension N is symbolic (dim_param "N"): `cleave --batch` fixes it. The initial weights come from torch's
default initialisation under torch.manual_seed(SEED); make_reference.py rebuilds the same modules with the same seed
and checks that they equal the exported initializers before training.
"""
import collections
import os
import sys

import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 0
OPSET = 15
ALLOWED_OPS = set("""Gemm MatMul Add Sub Mul Div Pow Sqrt Neg Exp Log Erf Relu Sigmoid Tanh Softmax LogSoftmax
SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss Reshape Flatten Transpose Squeeze Unsqueeze Concat Split Slice
Gather Identity Constant Conv MaxPool AveragePool GlobalAveragePool ReduceMean ReduceSum BatchNormalization Dropout
Shape ConstantOfShape Expand""".split())


def make_net(name):
    torch.manual_seed(SEED)
    if name == "mlp":
        return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    raise ValueError(name)


INPUT_SHAPE = {"mlp": (64,), "cnn": (1, 8, 8)}
MODELS = ("mlp", "cnn")


class WithLoss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def make_model(name):
    return WithLoss(make_net(name))


def export(name, path):
    model = make_model(name)
    model.train()
    batch = 16
    x = torch.zeros((batch,) + INPUT_SHAPE[name])
    y = torch.zeros((batch,), dtype=torch.int64)
    # Tracing in training mode runs forward once, which updates the BatchNorm running statistics before they are
    # written as initializers: write the module's initial state back into the file.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (x, y), path, input_names=["x", "y"], output_names=["loss"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=OPSET)
    m = onnx.load(path)
    for init in m.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(state[init.name].numpy(), init.name))
    onnx.save(m, path)
    check(name, path)


def check(name, path):
    m = onnx.load(path)
    onnx.checker.check_model(m)
    hist = collections.Counter(n.op_type for n in m.graph.node)
    bad = sorted(set(hist) - ALLOWED_OPS)
    print(f"{name}: {sum(hist.values())} nodes: " + ", ".join(f"{k} {hist[k]}" for k in sorted(hist)), file=sys.stderr)
    print(f"{name}: initializers: " + ", ".join(f"{i.name}{list(i.dims)}" for i in m.graph.initializer),
          file=sys.stderr)
    if bad:
        sys.exit(f"error: {path}: ops outside the supported list: {', '.join(bad)}")


def main(out_dir):
    for name in MODELS:
        export(name, os.path.join(out_dir, name + ".onnx"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
