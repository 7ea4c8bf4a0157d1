"""A sweep of torch.nn's layers and functional ops through Cleave: one tiny model per case (batch 2, 10 classes,
torch.manual_seed(0) weights, numpy seed 0 data), each trained one SGD step like torch, on 1 rank and on 2.

Most cases are nn.Sequential(layers under test, Flatten, Linear(n, 10)) wrapped in a cross-entropy loss; the loss
cases end in the loss under test instead. Each case is exported by torch 1.13 in training mode without constant
folding (opset 13 unless its name says otherwise), then, as image_layers.py:
  1. export: torch.onnx.export succeeds;
  2. ir: `cleave ir` imports it;
  3. eval: one `cleave eval` SGD step at lr 1e4; its loss and its gradients, recovered from the saved model as
     (w0 - w1) / lr, match torch float64's at the same float32 weights (torch_compare.check_step: slack 2 x torch
     float32's own error, loss_slack 2, parameters torch gives no gradient skipped);
  4. ranks: the same step on 2 ranks (`cleave compile --planner data --devices 2` + `cleave run`): its loss within
     relative 1e-5 of eval's, and its gradients match torch's as in 3, judged over the parameters whose gradient is
     not zero in exact arithmetic (check_step's nonzero set: a gradient that is exactly zero, like the key bias of
     attention, is rounding noise whose size depends on the summation order of the ranks).
The case table is the point: it is a map of which layers train like torch through Cleave, and which do not and why.

EXPECTED lists every case that does not pass all four checks, with its expected outcome and a one-line reason:
  - export_fails: torch 1.13 cannot export it (the export error must name the given text);
  - torch_differs: torch exports ONNX that computes something else than its own module, so Cleave's loss or gradients
    must differ from torch's at eval (if they match, torch's export or the case changed); the 2-rank run is held to
    Cleave's own eval step instead (loss within relative 1e-5);
  - random_draws: the case draws random numbers (torch.randn_like, RReLU's training slopes): Cleave's draws are its
    own (counter-based, independent of the split), not torch's, so eval is not compared with torch (whose float32
    and float64 runs draw apart too), and the 2-rank run is held to Cleave's own eval step (loss within relative
    1e-5);
  - gap: a Cleave gap: the given stage fails with one error line from cleave (exit status > 0, no crash) naming the
    given text, the stages before it pass.
A case that deviates from its expectation fails the test, including one expected to fail that passes now (remove it
from EXPECTED), so the table stays true.

Without case arguments and without --all, the CI subset runs (CI_CASES: each family once, 34 cases, about 3 minutes on
2 cores: 164 to 175 s measured with 27, before localresponsenorm, an If of a constant condition, joined at 15 s): CTest
runs it as e2e.torch_nn_layers. --all runs all 280 (about 23 minutes);
CASE_GLOBs (fnmatch) pick cases by name. --keep DIR keeps each case's files (the export, the data, the bundle, log.txt
with every command and its output) under DIR/<case>; --list lists the cases (ci: in the subset) with their expectation.
Usage: /usr/bin/python3 tests/e2e/torch_nn_layers.py <cleave-binary> <source-dir> [CASE_GLOB ...] [--all] [--keep DIR]
               [--list]
"""
import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The helpers next to this script (tests/e2e) and in tests/codegen, wherever it runs from.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "codegen"))
sys.path.insert(0, HERE)
import torch_compare as tc  # noqa: E402
from bundle_check import losses, runtime_flags  # noqa: E402

os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"

B, C = 2, 10
RANKS_RTOL = 1e-5
# 2 ranks' recovered gradients against eval's where torch is no oracle (float32 sums in another order).
RANKS_GRAD_RTOL = 1e-4
TIMEOUT = 600  # seconds per cleave command

# ---------------------------------------------------------------------------------------------------------------
# Building blocks


class Fn(nn.Module):
    """A parameterless module applying f."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


class Classifier(nn.Module):
    """forward(x, y) = cross_entropy(net(x), y)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def with_head(layers, x_shape, x_dtype=torch.float32):
    """nn.Sequential(*layers, Flatten, Linear(n, 10)); n from a shape probe in eval mode."""
    body = nn.Sequential(*layers)
    body.eval()
    with torch.no_grad():
        if x_dtype == torch.float32:
            probe = torch.zeros((B,) + tuple(x_shape))
        else:
            probe = torch.zeros((B,) + tuple(x_shape), dtype=x_dtype)
        n = body(probe).reshape(B, -1).shape[1]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(n, C))


CASES = {}


def case(name, x_shape, note="", x_int=None, y=None):
    """Registers make() -> nn.Module with forward(x, y) -> scalar loss. x: float32 standard normal [B, *x_shape], or
    x_int(rng) (int64 tokens); y: class labels [B] in [0, 10) for None, else y(rng)."""

    def deco(make):
        CASES[name] = dict(make=make, x_shape=x_shape, x_int=x_int, y=y, note=note, opset=13)
        return make
    return deco


def seq_case(name, x_shape, layers_fn, note=""):
    """A classifier case: layers_fn() -> list of layers, then Flatten + Linear(n, 10)."""
    case(name, x_shape, note)(lambda: Classifier(with_head(layers_fn(), x_shape)))


def act_case(name, act_fn, note=""):
    """Linear(8, 16) -> act -> Linear(16, 10)."""
    seq_case(name, (8,), lambda: [nn.Linear(8, 16), act_fn(), ], note)


# ---------------------------------------------------------------------------------------------------------------
# Convolutions

seq_case("conv1d", (3, 8), lambda: [nn.Conv1d(3, 4, 3, padding=1), nn.Tanh()])
seq_case("conv1d_stride_dil", (3, 12), lambda: [nn.Conv1d(3, 4, 3, stride=2, dilation=2, padding=2)])
seq_case("conv3d", (2, 4, 4, 4), lambda: [nn.Conv3d(2, 3, 3, padding=1), nn.Tanh()])
seq_case("conv2d_dilation", (3, 8, 8), lambda: [nn.Conv2d(3, 4, 3, dilation=2, padding=2)])
seq_case("conv2d_groups", (4, 6, 6), lambda: [nn.Conv2d(4, 6, 3, groups=2, padding=1)])
seq_case("conv2d_depthwise", (4, 6, 6), lambda: [nn.Conv2d(4, 8, 3, groups=4, padding=1)])
seq_case("conv2d_reflect", (3, 6, 6), lambda: [nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")])
seq_case("conv2d_replicate", (3, 6, 6), lambda: [nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate")])
seq_case("conv2d_circular", (3, 6, 6), lambda: [nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")])
seq_case("conv2d_same", (3, 6, 6), lambda: [nn.Conv2d(3, 4, 4, padding="same")])
seq_case("conv2d_asym", (3, 7, 6), lambda: [nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0))])
seq_case("convtranspose1d", (3, 5), lambda: [nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1)])
seq_case("convtranspose3d", (2, 3, 3, 3), lambda: [nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1)])
seq_case("convtranspose2d_dil", (3, 4, 4), lambda: [nn.ConvTranspose2d(3, 4, 3, stride=2, dilation=2)])

# ---------------------------------------------------------------------------------------------------------------
# Resampling

seq_case("upsample_nearest", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Upsample(scale_factor=2, mode="nearest")])
seq_case("upsample_bilinear", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Upsample(scale_factor=2, mode="bilinear")])
seq_case("upsample_bicubic", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Upsample(scale_factor=2, mode="bicubic")])
seq_case("upsample_bicubic_ac", (3, 4, 4),
         lambda: [nn.Conv2d(3, 4, 1), nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True)])
seq_case("downsample_bicubic", (3, 8, 6), lambda: [nn.Conv2d(3, 4, 1), nn.Upsample(size=(5, 3), mode="bicubic")])
seq_case("upsample_linear1d", (3, 5), lambda: [nn.Conv1d(3, 4, 1), nn.Upsample(scale_factor=2, mode="linear")])
seq_case("upsample_trilinear", (2, 3, 3, 3),
         lambda: [nn.Conv3d(2, 3, 1), nn.Upsample(scale_factor=2, mode="trilinear")])
seq_case("interpolate_scale1_5", (3, 4, 4),
         lambda: [nn.Conv2d(3, 4, 1), Fn(lambda h: F.interpolate(h, scale_factor=1.5, mode="nearest"))])
seq_case("interpolate_size_bilinear", (3, 4, 4),
         lambda: [nn.Conv2d(3, 4, 1), Fn(lambda h: F.interpolate(h, size=(5, 7), mode="bilinear"))])
seq_case("interpolate_down_bilinear", (3, 8, 8),
         lambda: [nn.Conv2d(3, 4, 1), Fn(lambda h: F.interpolate(h, scale_factor=0.5, mode="bilinear"))])

# ---------------------------------------------------------------------------------------------------------------
# Normalization

seq_case("instancenorm1d", (3, 8), lambda: [nn.Conv1d(3, 4, 3), nn.InstanceNorm1d(4)])
seq_case("instancenorm1d_affine", (3, 8), lambda: [nn.Conv1d(3, 4, 3), nn.InstanceNorm1d(4, affine=True)])
seq_case("instancenorm2d_track", (3, 6, 6),
         lambda: [nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True, track_running_stats=True)])
seq_case("groupnorm", (4, 5, 5), lambda: [nn.Conv2d(4, 6, 3), nn.GroupNorm(2, 6)])
seq_case("layernorm_2d", (3, 5, 5), lambda: [nn.Conv2d(3, 4, 3), nn.LayerNorm([3, 3])])
seq_case("localresponsenorm", (4, 5, 5), lambda: [nn.Conv2d(4, 6, 3), nn.LocalResponseNorm(3)])


class _LRNNode(torch.autograd.Function):
    """Exports as ONNX's LRN node (torch writes LocalResponseNorm as a pad + pool decomposition); forward only."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class LRNNode(nn.LocalResponseNorm):
    """torch's LocalResponseNorm, exported as the LRN node: for an odd size both pad the channel window by
    (size - 1) / 2 on each side."""

    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return _LRNNode.apply(x, self.size, self.alpha, self.beta, self.k)
        return super().forward(x)


seq_case("lrn_node", (4, 5, 5), lambda: [nn.Conv2d(4, 6, 3), LRNNode(5, alpha=0.5, beta=0.6, k=1.5)])
seq_case("batchnorm1d_nc", (8,), lambda: [nn.Linear(8, 6), nn.BatchNorm1d(6)])
seq_case("batchnorm1d_ncl", (3, 6), lambda: [nn.Conv1d(3, 4, 3), nn.BatchNorm1d(4)])
seq_case("batchnorm3d", (2, 4, 4, 4), lambda: [nn.Conv3d(2, 3, 3), nn.BatchNorm3d(3)])
seq_case("normalize", (8,), lambda: [nn.Linear(8, 16), Fn(lambda h: F.normalize(h, dim=1) * 3)])

# ---------------------------------------------------------------------------------------------------------------
# Shuffles

seq_case("pixelshuffle", (3, 4, 4), lambda: [nn.Conv2d(3, 8, 1), nn.PixelShuffle(2)])
seq_case("pixelunshuffle", (3, 4, 4), lambda: [nn.Conv2d(3, 2, 1), nn.PixelUnshuffle(2)])
seq_case("channelshuffle", (3, 4, 4), lambda: [nn.Conv2d(3, 6, 1), nn.ChannelShuffle(2), nn.Conv2d(6, 4, 1)])

# ---------------------------------------------------------------------------------------------------------------
# Activations (Linear(8, 16) -> act -> Linear(16, 10))

act_case("prelu1", lambda: nn.PReLU())
act_case("prelu_c", lambda: nn.PReLU(16))
seq_case("prelu_c_conv", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.PReLU(4)])
act_case("elu", lambda: nn.ELU(alpha=0.7))
act_case("selu", lambda: nn.SELU())
act_case("celu", lambda: nn.CELU(alpha=1.3))
act_case("gelu", lambda: nn.GELU())
act_case("gelu_tanh", lambda: nn.GELU(approximate="tanh"))
act_case("silu", lambda: nn.SiLU())
act_case("mish", lambda: nn.Mish())
act_case("hardtanh", lambda: nn.Hardtanh(-0.5, 0.5))
act_case("relu6", lambda: nn.Sequential(Fn(lambda h: h * 4), nn.ReLU6()))
act_case("softplus", lambda: nn.Softplus(beta=2, threshold=1))
act_case("softsign", lambda: nn.Softsign())
act_case("tanhshrink", lambda: nn.Tanhshrink())
act_case("softshrink", lambda: nn.Softshrink(0.3))
act_case("hardshrink", lambda: nn.Hardshrink(0.3))
act_case("logsigmoid", lambda: nn.LogSigmoid())
act_case("threshold", lambda: nn.Threshold(0.1, 20.0))
act_case("softmin", lambda: nn.Softmin(dim=1))
act_case("hardswish", lambda: nn.Hardswish())
act_case("hardsigmoid", lambda: nn.Hardsigmoid())
act_case("leakyrelu", lambda: nn.LeakyReLU(0.2))
act_case("glu", lambda: nn.GLU(dim=1))
act_case("rrelu_train", lambda: nn.RReLU(), note="RReLU samples its slopes in training mode (RandomUniformLike)")
seq_case("softmax2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Softmax2d()])


@case("logsoftmax_nll", (8,))
def _():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, C)
            self.lsm = nn.LogSoftmax(dim=1)
            self.nll = nn.NLLLoss()

        def forward(self, x, y):
            return self.nll(self.lsm(self.lin(x)), y)
    return M()


# ---------------------------------------------------------------------------------------------------------------
# Embeddings and misc layers


def _tokens(rng):
    t = rng.integers(0, 20, (B, 5)).astype(np.int64)
    t[:, -1] = 0  # padding index present
    return t


@case("embedding_padidx", (5,), x_int=_tokens)
def _():
    return Classifier(nn.Sequential(nn.Embedding(20, 8, padding_idx=0), Fn(lambda h: h.mean(1)), nn.Linear(8, C)))


@case("embedding_maxnorm", (5,), x_int=_tokens, note="max_norm renorms the weight in place")
def _():
    return Classifier(nn.Sequential(nn.Embedding(20, 8, max_norm=1.0), Fn(lambda h: h.mean(1)), nn.Linear(8, C)))


@case("embeddingbag_sum", (5,), x_int=_tokens)
def _():
    return Classifier(nn.Sequential(nn.EmbeddingBag(20, 8, mode="sum"), nn.Linear(8, C)))


@case("embeddingbag_mean", (5,), x_int=_tokens)
def _():
    return Classifier(nn.Sequential(nn.EmbeddingBag(20, 8, mode="mean"), nn.Linear(8, C)))


@case("embeddingbag_max", (5,), x_int=_tokens)
def _():
    return Classifier(nn.Sequential(nn.EmbeddingBag(20, 8, mode="max"), nn.Linear(8, C)))


class BilinearNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)
        self.bil = nn.Bilinear(8, 6, C)

    def forward(self, x):
        return self.bil(x, self.lin(x))


case("bilinear", (8,))(lambda: Classifier(BilinearNet()))
seq_case("unflatten", (8,), lambda: [nn.Linear(8, 12), nn.Unflatten(1, (3, 4)), nn.Conv1d(3, 4, 2)])
seq_case("identity_flatten", (3, 4), lambda: [nn.Identity(), nn.Flatten(0, -1), nn.Unflatten(0, (B, 12))])

# ---------------------------------------------------------------------------------------------------------------
# Pooling

seq_case("maxpool1d_ceil", (3, 8), lambda: [nn.Conv1d(3, 4, 1), nn.MaxPool1d(3, 2, ceil_mode=True)])
seq_case("maxpool1d_dil", (3, 9), lambda: [nn.Conv1d(3, 4, 1), nn.MaxPool1d(2, 1, dilation=2)])
seq_case("maxpool2d_ceil_pad", (3, 7, 7), lambda: [nn.Conv2d(3, 4, 1), nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)])
seq_case("maxpool3d_dil", (2, 5, 5, 5), lambda: [nn.Conv3d(2, 3, 1), nn.MaxPool3d(2, stride=1, dilation=2)])
seq_case("maxpool3d_ceil", (2, 5, 5, 5), lambda: [nn.Conv3d(2, 3, 1), nn.MaxPool3d(2, stride=2, ceil_mode=True)])
seq_case("avgpool1d_incl", (3, 8), lambda: [nn.Conv1d(3, 4, 1), nn.AvgPool1d(3, 2, padding=1, count_include_pad=True)])
seq_case("avgpool1d_excl", (3, 8),
         lambda: [nn.Conv1d(3, 4, 1), nn.AvgPool1d(3, 2, padding=1, count_include_pad=False)])
seq_case("avgpool3d_incl", (2, 4, 4, 4),
         lambda: [nn.Conv3d(2, 3, 1), nn.AvgPool3d(3, 2, padding=1, count_include_pad=True)])
seq_case("avgpool3d_excl", (2, 4, 4, 4),
         lambda: [nn.Conv3d(2, 3, 1), nn.AvgPool3d(3, 2, padding=1, count_include_pad=False)])
seq_case("avgpool2d_ceil", (3, 7, 7), lambda: [nn.Conv2d(3, 4, 1), nn.AvgPool2d(2, 2, ceil_mode=True)])
seq_case("adaptiveavgpool1d", (3, 8), lambda: [nn.Conv1d(3, 4, 1), nn.AdaptiveAvgPool1d(4)])
seq_case("adaptiveavgpool1d_uneven", (3, 7), lambda: [nn.Conv1d(3, 4, 1), nn.AdaptiveAvgPool1d(3)])
seq_case("adaptiveavgpool2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(2)])
seq_case("adaptiveavgpool2d_uneven", (3, 5, 5), lambda: [nn.Conv2d(3, 4, 1), nn.AdaptiveAvgPool2d(3)])
seq_case("adaptivemaxpool2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.AdaptiveMaxPool2d(2)])
seq_case("adaptivemaxpool1d", (3, 8), lambda: [nn.Conv1d(3, 4, 1), nn.AdaptiveMaxPool1d(4)])
seq_case("lppool2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.LPPool2d(2, 2)])
seq_case("lppool1d", (3, 8), lambda: [nn.Conv1d(3, 4, 1), nn.LPPool1d(2, 2)])
seq_case("fractionalmaxpool2d", (3, 6, 6),
         lambda: [nn.Conv2d(3, 4, 1), nn.FractionalMaxPool2d(2, output_size=3)])

# ---------------------------------------------------------------------------------------------------------------
# Padding, fold

seq_case("zeropad2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.ZeroPad2d((1, 2, 0, 1))])
seq_case("constantpad2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.ConstantPad2d((1, 2, 0, 1), 0.5)])
seq_case("constantpad1d", (3, 4), lambda: [nn.Conv1d(3, 4, 1), nn.ConstantPad1d(2, -1.0)])
seq_case("reflectionpad2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.ReflectionPad2d((1, 2, 0, 1))])
seq_case("reflectionpad1d", (3, 5), lambda: [nn.Conv1d(3, 4, 1), nn.ReflectionPad1d(2)])
seq_case("replicationpad2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.ReplicationPad2d((1, 2, 0, 1))])
seq_case("replicationpad3d", (2, 3, 3, 3), lambda: [nn.Conv3d(2, 3, 1), nn.ReplicationPad3d(1)])
seq_case("replicationpad1d", (3, 5), lambda: [nn.Conv1d(3, 4, 1), nn.ReplicationPad1d((2, 1))])
seq_case("reflectionpad3d", (2, 3, 3, 3), lambda: [nn.Conv3d(2, 3, 1), nn.ReflectionPad3d(1)])
seq_case("constantpad3d", (2, 3, 3, 3), lambda: [nn.Conv3d(2, 3, 1), nn.ConstantPad3d((1, 0, 0, 1, 1, 1), 0.5)])
seq_case("adaptiveavgpool3d", (2, 4, 4, 4), lambda: [nn.Conv3d(2, 3, 1), nn.AdaptiveAvgPool3d(2)])
seq_case("adaptivemaxpool3d", (2, 4, 4, 4), lambda: [nn.Conv3d(2, 3, 1), nn.AdaptiveMaxPool3d(2)])
seq_case("instancenorm3d_affine", (2, 3, 3, 3), lambda: [nn.Conv3d(2, 3, 1), nn.InstanceNorm3d(3, affine=True)])
seq_case("upsamplingbilinear2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.UpsamplingBilinear2d(scale_factor=2)])
seq_case("upsamplingnearest2d", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.UpsamplingNearest2d(size=(6, 7))])
seq_case("lazy_linear_conv", (3, 4, 4), lambda: [nn.LazyConv2d(4, 3), nn.Flatten(), nn.LazyLinear(16), nn.Tanh()])
seq_case("alphadropout_p0", (8,), lambda: [nn.Linear(8, 16), nn.AlphaDropout(0.0), nn.SELU()])


class UnpoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)

    def forward(self, x):
        y, i = self.pool(self.conv(x))
        return self.unpool(y, i)


seq_case("maxunpool2d", (3, 4, 4), lambda: [UnpoolNet()])
seq_case("pad_negative", (3, 6, 6), lambda: [nn.Conv2d(3, 4, 1), Fn(lambda h: F.pad(h, (-1, 1, 0, -2)))])
seq_case("unfold", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Unfold(kernel_size=2, stride=2)])
seq_case("unfold_overlap", (3, 4, 4), lambda: [nn.Conv2d(3, 4, 1), nn.Unfold(kernel_size=3, padding=1)])
seq_case("fold", (12, 4), lambda: [nn.Conv1d(12, 12, 1), nn.Fold(output_size=(4, 4), kernel_size=2, stride=2)])

# ---------------------------------------------------------------------------------------------------------------
# Distances


class PairNet(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.a = nn.Linear(8, 60)
        self.b = nn.Linear(8, 60)
        self.f = f

    def forward(self, x):
        return self.f(self.a(x).view(B, C, 6), self.b(x).view(B, C, 6))


case("cosine_similarity", (8,))(lambda: Classifier(PairNet(lambda a, b: 5 * nn.CosineSimilarity(dim=2)(a, b))))
case("pairwise_distance", (8,))(lambda: Classifier(PairNet(lambda a, b: -nn.PairwiseDistance()(a, b))))
case("cdist", (8,))(lambda: Classifier(PairNet(lambda a, b: -torch.cdist(a, b).mean(2))))

# ---------------------------------------------------------------------------------------------------------------
# Tensor ops after a Linear


def op_case(name, f, n_hidden=C, note=""):
    """Linear(8, n_hidden) -> f -> (Linear to 10 if f's output is not [B, 10])."""
    seq_case(name, (8,), lambda: [nn.Linear(8, n_hidden), Fn(f)], note)


class Buf(nn.Module):
    """Linear(8, n) then f(h, buffer)."""

    def __init__(self, n, buf, f):
        super().__init__()
        self.lin = nn.Linear(8, n)
        self.register_buffer("b", buf)
        self.f = f

    def forward(self, x):
        return self.f(self.lin(x), self.b)


op_case("cumsum", lambda h: torch.cumsum(h, dim=1))
op_case("cumsum_reverse", lambda h: torch.cumsum(h.flip(1), dim=1).flip(1))
op_case("flip", lambda h: torch.flip(h, [1]))
op_case("roll", lambda h: torch.roll(h, shifts=3, dims=1))
op_case("roll_2d", lambda h: torch.roll(h.view(B, 4, 4), shifts=(1, -1), dims=(1, 2)), n_hidden=16)
op_case("topk", lambda h: torch.topk(h, 10, dim=1).values, n_hidden=16)
op_case("sort", lambda h: torch.sort(h, dim=1).values)
op_case("sort_desc_idx", lambda h: h.gather(1, torch.sort(h, dim=1, descending=True).indices))
op_case("argmax_onehot", lambda h: h * F.one_hot(h.argmax(1), C).float())
op_case("where_mask", lambda h: torch.where(h > 0, h, 0.1 * h))
op_case("max_dim", lambda h: h.view(B, C, 2).max(dim=2).values, n_hidden=20)
op_case("amax_amin", lambda h: h.view(B, C, 2).amax(2) + h.view(B, C, 2).amin(2), n_hidden=20)
op_case("logsumexp", lambda h: torch.logsumexp(h.view(B, C, 2), dim=2), n_hidden=20)
op_case("var_std", lambda h: h.view(B, C, 3).var(2) + h.view(B, C, 3).std(2, unbiased=False), n_hidden=30)
op_case("norm_dim", lambda h: torch.norm(h.view(B, C, 3), dim=2), n_hidden=30)
op_case("norm_p1", lambda h: torch.norm(h.view(B, C, 3), p=1, dim=2), n_hidden=30)
op_case("norm_all", lambda h: h / torch.norm(h))
op_case("chunk_cat", lambda h: torch.cat(list(reversed(torch.chunk(h, 2, dim=1))), dim=1))
op_case("stack_unbind", lambda h: torch.stack(torch.unbind(h.view(B, 2, C), 1), 2).sum(2), n_hidden=20)
op_case("tril_triu", lambda h: (torch.tril(h.view(B, 4, 4)) - torch.triu(h.view(B, 4, 4), 1)), n_hidden=16)
op_case("math_a", lambda h: torch.atan2(h[:, :C], h[:, C:]) + torch.pow(h[:, :C].abs() + 1, 1.5)
        + torch.rsqrt(h[:, C:] ** 2 + 1) + torch.reciprocal(h[:, :C] ** 2 + 2), n_hidden=20)
op_case("math_b", lambda h: torch.exp(0.3 * h) + torch.log1p(h * h) + torch.expm1(0.2 * h) + torch.sin(h)
        + torch.cos(h) + torch.tanh(h) + torch.erf(h))
op_case("math_c", lambda h: torch.sqrt(h * h + 1) + torch.log(h * h + 1) + torch.sigmoid(h) + torch.abs(h) * 0.1
        + torch.sign(h) + torch.floor(h) + torch.round(h))
op_case("pow_tensor", lambda h: torch.pow(h[:, :C].abs() + 1, torch.tanh(h[:, C:])), n_hidden=20)
op_case("clamp_float", lambda h: torch.clamp(h, -0.5, 0.5))
op_case("atan_asin", lambda h: torch.atan(h) + torch.asin(torch.tanh(h) * 0.9) + torch.acos(torch.tanh(h) * 0.9))
op_case("sinh_cosh", lambda h: torch.sinh(h) + torch.cosh(h) + torch.tan(0.3 * h))
op_case("sin_cos_tan", lambda h: torch.sin(h) + torch.cos(h) + torch.tan(0.3 * h))
case("clamp_tensor", (8,))(lambda: Classifier(
    Buf(C, torch.linspace(-1, 0, C), lambda h, lo: torch.clamp(h, min=lo, max=lo + 1.2))))
case("masked_fill", (8,))(lambda: Classifier(
    Buf(C, torch.tensor([i % 3 == 0 for i in range(C)]), lambda h, m: h.masked_fill(m, -1.0))))
case("masked_fill_dyn", (8,))(lambda: Classifier(
    Buf(C, torch.zeros(1), lambda h, _: h.masked_fill(h < -0.7, 0.0))))
case("gather", (8,))(lambda: Classifier(
    Buf(16, torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [15, 8, 9, 7, 9, 3, 2, 3, 8, 4]]),
        lambda h, idx: torch.gather(h, 1, idx))))
case("index_select", (8,))(lambda: Classifier(
    Buf(16, torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 15, 3]), lambda h, idx: h.index_select(1, idx))))
case("scatter_add", (8,))(lambda: Classifier(
    Buf(16, torch.tensor([i % C for i in range(16)]),
        lambda h, idx: torch.zeros_like(h[:, :C]).scatter_add(1, idx.expand(B, 16), h))))
case("index_add", (8,))(lambda: Classifier(
    Buf(16, torch.tensor([i % C for i in range(16)]), lambda h, idx: torch.zeros_like(h[:, :C]).index_add(1, idx, h))))
case("advanced_index", (8,))(lambda: Classifier(
    Buf(16, torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 15, 3]), lambda h, idx: h[:, idx])))


class Einsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)
        self.w = nn.Parameter(torch.randn(C, 8, 6) * 0.3)

    def forward(self, x):
        return torch.einsum("bi,oij,bj->bo", x, self.w, self.lin(x))


case("einsum_bilinear", (8,))(lambda: Classifier(Einsum()))
# A repeated letter within an operand: the diagonal of each sample's 4x4 block, and it contracted with another operand.
op_case("einsum_diagonal", lambda h: torch.cat([torch.einsum("bii->bi", h[:, :16].reshape(-1, 4, 4)),
                                                torch.einsum("bii,bij->bj", h[:, :16].reshape(-1, 4, 4),
                                                             h[:, 16:32].reshape(-1, 4, 4))], 1), n_hidden=32)


class MatmulBroadcast(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 12)
        self.w = nn.Parameter(torch.randn(5, 4, 2) * 0.5)
        self.out = nn.Linear(30, C)

    def forward(self, x):
        h = self.lin(x).view(B, 1, 3, 4) @ self.w  # [B, 5, 3, 2]
        return self.out(h.reshape(B, 30))


case("matmul_broadcast", (8,))(lambda: Classifier(MatmulBroadcast()))


class Baddbmm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 12)
        self.w = nn.Parameter(torch.randn(B, 4, 5) * 0.5)
        self.bias = nn.Parameter(torch.randn(B, 3, 5) * 0.1)
        self.out = nn.Linear(15, C)

    def forward(self, x):
        return self.out(torch.baddbmm(self.bias, self.lin(x).view(B, 3, 4), self.w).reshape(B, 15))


case("baddbmm", (8,), note="parameters with the batch dim (not splittable by a data plan as data)")(
    lambda: Classifier(Baddbmm()))

# ---------------------------------------------------------------------------------------------------------------
# Recurrent (x [B, 5, 4])


class RNNNet(nn.Module):
    def __init__(self, rnn, n_out):
        super().__init__()
        self.rnn = rnn
        self.out = nn.Linear(n_out, C)

    def forward(self, x):
        return self.out(self.rnn(x)[0][:, -1])


case("gru_bi2", (5, 4))(lambda: Classifier(RNNNet(nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=True),
                                                  12)))
case("rnn_relu", (5, 4))(lambda: Classifier(RNNNet(nn.RNN(4, 6, nonlinearity="relu", batch_first=True), 6)))
case("rnn_tanh2", (5, 4))(lambda: Classifier(RNNNet(nn.RNN(4, 6, num_layers=2, batch_first=True), 6)))
case("lstm_bi", (5, 4))(lambda: Classifier(RNNNet(nn.LSTM(4, 6, bidirectional=True, batch_first=True), 12)))
case("lstm_proj", (5, 4))(lambda: Classifier(RNNNet(nn.LSTM(4, 6, proj_size=3, batch_first=True), 3)))
case("lstm_timemajor", (5, 4), note="batch_first=False on batch-major data: transpose inside")(
    lambda: Classifier(nn.Sequential(Fn(lambda x: x.transpose(0, 1)), Fn(lambda x: x),
                                     RNNNetTM(nn.LSTM(4, 6), 6))))


class RNNNetTM(nn.Module):
    def __init__(self, rnn, n_out):
        super().__init__()
        self.rnn = rnn
        self.out = nn.Linear(n_out, C)

    def forward(self, x):
        return self.out(self.rnn(x)[0][-1])


class CellNet(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.cell = {"gru": nn.GRUCell, "lstm": nn.LSTMCell, "rnn": nn.RNNCell}[kind](4, 6)
        self.out = nn.Linear(6, C)

    def forward(self, x):
        h = x.new_zeros(B, 6)
        c = x.new_zeros(B, 6)
        for t in range(x.shape[1]):
            if self.kind == "lstm":
                h, c = self.cell(x[:, t], (h, c))
            else:
                h = self.cell(x[:, t], h)
        return self.out(h)


case("grucell_unroll", (5, 4))(lambda: Classifier(CellNet("gru")))
case("lstmcell_unroll", (5, 4))(lambda: Classifier(CellNet("lstm")))
case("rnncell_unroll", (5, 4))(lambda: Classifier(CellNet("rnn")))

# ---------------------------------------------------------------------------------------------------------------
# Attention (x [B, 5, 8])


class MHA(nn.Module):
    def __init__(self, masks):
        super().__init__()
        self.masks = masks
        self.att = nn.MultiheadAttention(8, 2, batch_first=True)
        self.register_buffer("causal", torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))
        self.register_buffer("pos", torch.arange(5))
        self.out = nn.Linear(8, C)

    def forward(self, x):
        if self.masks:
            pad = (x[:, :, 0] > 0.8) & (self.pos > 0)  # never masks position 0
            h = self.att(x, x, x, key_padding_mask=pad, attn_mask=self.causal, need_weights=False)[0]
        else:
            h = self.att(x, x, x, need_weights=False)[0]
        return self.out(h.mean(1))


case("mha", (5, 8))(lambda: Classifier(MHA(False)))
case("mha_masks", (5, 8))(lambda: Classifier(MHA(True)))


class MHAKdim(nn.Module):
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=4)
        self.k = nn.Linear(8, 6)
        self.v = nn.Linear(8, 4)
        self.out = nn.Linear(8, C)

    def forward(self, x):
        return self.out(self.att(x, self.k(x), self.v(x), need_weights=True)[0].mean(1))


case("mha_kdim_vdim", (5, 8))(lambda: Classifier(MHAKdim()))


class Decoder(nn.Module):
    def __init__(self, norm_first=False):
        super().__init__()
        self.mem = nn.Linear(8, 8)
        self.dec = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                              norm_first=norm_first)
        self.register_buffer("causal", torch.triu(torch.full((5, 5), float("-inf")), 1))
        self.out = nn.Linear(8, C)

    def forward(self, x):
        return self.out(self.dec(x, self.mem(x), tgt_mask=self.causal).mean(1))


case("transformer_decoder_layer", (5, 8))(lambda: Classifier(Decoder()))
case("transformer_decoder_layer_normfirst_gelu", (5, 8))(lambda: Classifier(Decoder(True)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                                    activation="gelu", batch_first=True), 2)
        self.out = nn.Linear(8, C)

    def forward(self, x):
        return self.out(self.enc(x).mean(1))


case("transformer_encoder_gelu", (5, 8))(lambda: Classifier(Encoder()))

# ---------------------------------------------------------------------------------------------------------------
# Losses: forward(x [B, 8], y) = loss(Linear(8, n)(x), y)


class LossNet(nn.Module):
    def __init__(self, n, f):
        super().__init__()
        self.lin = nn.Linear(8, n)
        self.f = f

    def forward(self, x, y):
        return self.f(self.lin(x), y)


def loss_case(name, n, f, y, note=""):
    case(name, (8,), note, y=y)(lambda: LossNet(n, f))


_f = lambda shape: lambda rng: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
_01 = lambda shape: lambda rng: (rng.random(shape) > 0.5).astype(np.float32)  # noqa: E731
_pm1 = lambda shape: lambda rng: np.where(rng.random(shape) > 0.5, 1.0, -1.0).astype(np.float32)  # noqa: E731


def _probs(rng):
    p = rng.random((B, C)).astype(np.float32) + 0.1
    return (p / p.sum(1, keepdims=True)).astype(np.float32)


loss_case("mse", 4, nn.MSELoss(), _f((B, 4)))
loss_case("mse_sum", 4, nn.MSELoss(reduction="sum"), _f((B, 4)))
loss_case("l1", 4, nn.L1Loss(), _f((B, 4)))
loss_case("smoothl1", 4, nn.SmoothL1Loss(beta=0.5), _f((B, 4)))
loss_case("huber", 4, nn.HuberLoss(delta=0.7), _f((B, 4)))
loss_case("bce_logits_posw", 4, nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 0.5, 3.0])), _01((B, 4)))
loss_case("bce_sigmoid", 4, lambda h, y: nn.BCELoss()(torch.sigmoid(h), y), _01((B, 4)))
loss_case("bce_weight", 4, nn.BCEWithLogitsLoss(weight=torch.tensor([1.0, 2.0, 0.5, 3.0])), _01((B, 4)))


def _nll_y(rng):
    t = rng.integers(0, C, (B, 3)).astype(np.int64)
    t[0, 1] = -100
    t[1, 2] = -100
    return t


loss_case("nll_weight_ignore", 30,
          lambda h, y: nn.NLLLoss(weight=torch.linspace(0.5, 2.0, C).to(h.dtype), ignore_index=-100)(
              F.log_softmax(h.view(B, C, 3), 1), y), _nll_y)
loss_case("ce_ignore_index", 30,
          lambda h, y: nn.CrossEntropyLoss(ignore_index=-100)(h.view(B, C, 3), y), _nll_y)
loss_case("ce_label_smoothing", C, nn.CrossEntropyLoss(label_smoothing=0.1), None)
loss_case("ce_weight", C, nn.CrossEntropyLoss(weight=torch.linspace(0.5, 2.0, C)), None)
loss_case("ce_probs", C, nn.CrossEntropyLoss(), _probs)
loss_case("ce_probs_sum", C, nn.CrossEntropyLoss(reduction="sum"), _probs)
loss_case("ce_probs_smoothing", C, nn.CrossEntropyLoss(label_smoothing=0.2), _probs)
loss_case("ce_probs_2d", 40, lambda h, y: F.cross_entropy(h.view(B, C, 2, 2), y),
          lambda rng: np.stack([_probs(rng) for _ in range(4)], -1).reshape(B, C, 2, 2))
loss_case("ce_sum", C, nn.CrossEntropyLoss(reduction="sum"), None)
loss_case("ce_2d", 40, lambda h, y: F.cross_entropy(h.view(B, C, 2, 2), y),
          lambda rng: rng.integers(0, C, (B, 2, 2)).astype(np.int64))
loss_case("kldiv", C, lambda h, y: nn.KLDivLoss(reduction="batchmean")(F.log_softmax(h, 1), y), _probs)
loss_case("kldiv_logtarget", C,
          lambda h, y: nn.KLDivLoss(reduction="batchmean", log_target=True)(F.log_softmax(h, 1), torch.log(y)), _probs)
loss_case("margin_ranking", 8, lambda h, y: nn.MarginRankingLoss(margin=0.1)(h[:, :4], h[:, 4:], y), _pm1((B, 4)))
loss_case("hinge_embedding", 4, nn.HingeEmbeddingLoss(margin=1.5), _pm1((B, 4)))
loss_case("cosine_embedding", 8, lambda h, y: nn.CosineEmbeddingLoss(margin=0.1)(h[:, :4], h[:, 4:], y), _pm1((B,)))
loss_case("soft_margin", 4, nn.SoftMarginLoss(), _pm1((B, 4)))
loss_case("multilabel_soft_margin", 4, nn.MultiLabelSoftMarginLoss(), _01((B, 4)))
loss_case("triplet_distance", 12, lambda h, y: nn.TripletMarginWithDistanceLoss(
    distance_function=lambda a, b: (a - b).abs().sum(-1), margin=0.5)(h[:, :4] + y, h[:, 4:8], h[:, 8:]), _f((B, 4)))
loss_case("triplet_margin", 12, lambda h, y: nn.TripletMarginLoss(margin=1.0)(h[:, :4] + y, h[:, 4:8], h[:, 8:]),
          _f((B, 4)))
loss_case("poisson_nll", 4, nn.PoissonNLLLoss(log_input=True),
          lambda rng: rng.integers(0, 5, (B, 4)).astype(np.float32))
loss_case("gaussian_nll", 8, lambda h, y: nn.GaussianNLLLoss()(h[:, :4], y, F.softplus(h[:, 4:]) + 0.1), _f((B, 4)))
loss_case("multi_margin", C, nn.MultiMarginLoss(), None)
loss_case("multilabel_margin", 4, nn.MultiLabelMarginLoss(),
          lambda rng: np.array([[2, 0, -1, 1], [1, -1, 0, 0]], dtype=np.int64))
loss_case("ctc", 40, lambda h, y: F.ctc_loss(F.log_softmax(h.view(B, 8, 5).transpose(0, 1), 2), y,
                                           torch.full((B,), 8, dtype=torch.long),
                                           torch.full((B,), 3, dtype=torch.long)),
          lambda rng: rng.integers(1, 5, (B, 3)).astype(np.int64))


# Losses as a user writes them by hand (torch 1.13 cannot export most loss modules at opset 13)
loss_case("mse_manual", 4, lambda h, y: ((h - y) ** 2).mean(), _f((B, 4)))
loss_case("l1_manual", 4, lambda h, y: (h - y).abs().mean(), _f((B, 4)))
loss_case("smoothl1_manual", 4,
          lambda h, y: torch.where((h - y).abs() < 0.5, (h - y) ** 2, (h - y).abs() - 0.25).mean(), _f((B, 4)))
loss_case("bce_manual", 4, lambda h, y: -(y * torch.log(torch.sigmoid(h)) + (1 - y) * torch.log(1 - torch.sigmoid(h)))
          .mean(), _01((B, 4)))
loss_case("margin_ranking_manual", 8, lambda h, y: torch.clamp(-y * (h[:, :4] - h[:, 4:]) + 0.1, min=0).mean(),
          _pm1((B, 4)))
loss_case("soft_margin_manual", 4, lambda h, y: F.softplus(-y * h).mean(), _pm1((B, 4)))
loss_case("triplet_manual", 12, lambda h, y: F.relu(F.pairwise_distance(h[:, :4] + y, h[:, 4:8])
                                                   - F.pairwise_distance(h[:, :4] + y, h[:, 8:]) + 1.0).mean(),
          _f((B, 4)))
loss_case("poisson_manual", 4, lambda h, y: (torch.exp(h) - y * h).mean(),
          lambda rng: rng.integers(0, 5, (B, 4)).astype(np.float32))
loss_case("ce_smoothing_manual", C, lambda h, y: 0.9 * F.cross_entropy(h, y) - 0.1 * F.log_softmax(h, 1).mean(1).mean(),
          None)
loss_case("ce_probs_manual", C, lambda h, y: -(y * F.log_softmax(h, 1)).sum(1).mean(), _probs)
loss_case("hinge_manual", C, lambda h, y: torch.clamp(1 - h.gather(1, y.view(B, 1)) + h, min=0).mean(), None)

# Norms applied straight to the graph input (no input gradient needed)
case("layernorm_input", (5, 8))(lambda: Classifier(nn.Sequential(nn.LayerNorm(8), nn.Flatten(), nn.Linear(40, C))))
case("layernorm_input_noaffine", (5, 8))(lambda: Classifier(
    nn.Sequential(nn.LayerNorm(8, elementwise_affine=False), nn.Linear(8, 8), nn.Flatten(), nn.Linear(40, C))))
case("groupnorm_input", (4, 3, 3))(lambda: Classifier(
    nn.Sequential(nn.GroupNorm(2, 4), nn.Flatten(), nn.Linear(36, C))))
case("batchnorm_input", (4, 3, 3))(lambda: Classifier(
    nn.Sequential(nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(36, C))))
case("instancenorm_input", (4, 3, 3))(lambda: Classifier(
    nn.Sequential(nn.InstanceNorm2d(4, affine=True), nn.Flatten(), nn.Linear(36, C))))
op_case("flip_2d", lambda h: torch.flip(h.view(B, 4, 4), [1, 2]), n_hidden=16)
op_case("slice_step2", lambda h: h[:, ::2], n_hidden=20)


# The same cases at a later opset (torch exports some ops only there)
def at_opset(name, opset):
    CASES[f"{name}_opset{opset}"] = dict(CASES[name], opset=opset)


for _n, _o in (("scatter_add", 16), ("tril_triu", 14), ("localresponsenorm", 17), ("instancenorm2d_track", 17),
               ("layernorm_2d", 17), ("layernorm_input", 17), ("index_add", 16), ("upsample_bicubic", 17),
               ("gelu_tanh", 17), ("var_std", 17)):
    at_opset(_n, _o)


# Ops that mix samples (a data plan must combine them across ranks), and more plausible layers
op_case("batch_softmax", lambda h: F.softmax(h, dim=0) * 4)
op_case("batch_center", lambda h: h - h.mean(0, keepdim=True))
op_case("batch_std_norm", lambda h: (h - h.mean(0)) / (h.var(0, unbiased=False) + 1e-3).sqrt(),
        note="hand-written batch norm")
loss_case("contrastive_batch", 6,
          lambda h, y: F.cross_entropy(F.normalize(h, dim=1) @ F.normalize(h, dim=1).t() * 5, y),
          lambda rng: np.arange(B, dtype=np.int64))
op_case("prod_dim", lambda h: torch.prod(h.view(B, C, 2), dim=2), n_hidden=20)
op_case("isnan_where", lambda h: torch.where(torch.isnan(h), torch.zeros_like(h), h))
op_case("isinf_where", lambda h: torch.where(torch.isinf(h), torch.zeros_like(h), h))
op_case("prod_odd", lambda h: torch.prod(torch.prod(h.view(B, 2, 3, 5) * 0.8, dim=3), dim=1), n_hidden=30)
op_case("cumprod", lambda h: torch.cumprod(h * 0.5, dim=1))
op_case("maximum_minimum", lambda h: torch.maximum(h[:, :C], h[:, C:]) + torch.minimum(h[:, :C], -h[:, C:]),
        n_hidden=20)
op_case("repeat_expand", lambda h: h.repeat(1, 2)[:, 3:13] + h[:, :1].expand(B, C))
op_case("repeat_interleave", lambda h: h.repeat_interleave(2, dim=1), n_hidden=5)
op_case("dropout_p0", lambda h: F.dropout(h, p=0.0, training=True))
op_case("interp_area", lambda h: F.interpolate(h.view(B, 2, 4, 3), size=(2, 3), mode="area").reshape(B, 12),
        n_hidden=24)
op_case("lerp_addcmul", lambda h: torch.lerp(h[:, :C], h[:, C:], 0.3) + torch.addcmul(h[:, :C], h[:, C:], h[:, :C],
                                                                                     value=0.5), n_hidden=20)
op_case("std_mean", lambda h: torch.cat(torch.std_mean(h.view(B, 2, 5), dim=2), 1) * h[:, :4], n_hidden=10)
op_case("nan_to_num", lambda h: torch.nan_to_num(torch.log(h), nan=0.5, neginf=-3.0))
op_case("tensordot", lambda h: torch.tensordot(h.view(B, 2, 5), h.new_ones(5, 3) * 0.1 + torch.eye(5, 3, dtype=h.dtype),
                                               dims=([2], [0])).reshape(B, 6), n_hidden=10)
op_case("cross", lambda h: torch.cross(h[:, :3], h[:, 3:6], dim=1) + h[:, 6:9], n_hidden=9)
op_case("amin_amax", lambda h: torch.amax(h.view(B, 2, 5), dim=2) - torch.amin(h.view(B, 2, 5), dim=2), n_hidden=10)
op_case("sort_values", lambda h: torch.sort(h, dim=1, descending=True).values * torch.arange(1.0, C + 1))
op_case("argsort_gather", lambda h: torch.gather(h, 1, torch.argsort(h[:, :C].detach(), dim=1)))
op_case("narrow_movedim", lambda h: torch.movedim(h.view(B, 2, 5), 1, 2).narrow(1, 1, 3).reshape(B, 6), n_hidden=10)
op_case("fmod_remainder", lambda h: torch.fmod(h * 3, 1.5) + torch.remainder(h * 3, 1.5))
op_case("log2_log10", lambda h: torch.log2(h * h + 1) + torch.log10(h * h + 1) + torch.square(h))
op_case("int_sum_over_batch", lambda h: h * (h.detach() > 0).sum(0, keepdim=True).float())
op_case("int_max_min", lambda h: h * (torch.amax((h.detach() * 3).long(), dim=1, keepdim=True)
                                     - torch.amin((h.detach() * 3).long(), dim=1, keepdim=True)).float())
# Random draws: a VAE's reparameterisation (mean + noise * exp(log_var / 2)), and a fixed-shape uniform draw.
op_case("randn_like", lambda h: torch.cat([h[:, :5] + torch.randn_like(h[:, :5]) * torch.exp(0.5 * h[:, 5:]),
                                           h[:, 5:]], 1))
op_case("rand_fixed_shape", lambda h: h * torch.rand(B, C))
op_case("bucketize", lambda h: torch.bucketize(h.detach(), torch.tensor([-0.5, 0.0, 0.5])).float() * h)
op_case("det", lambda h: torch.linalg.det(h[:, :9].view(B, 3, 3) + 3 * torch.eye(3)).unsqueeze(1) * h[:, 9:],
        n_hidden=19)
op_case("det_4x4", lambda h: torch.linalg.det(h[:, :16].view(B, 4, 4) + 2 * torch.eye(4)).unsqueeze(1) * h[:, 16:],
        n_hidden=26)
seq_case("linear_nobias", (8,), lambda: [nn.Linear(8, 16, bias=False), nn.Tanh()])
seq_case("weight_norm", (8,), lambda: [nn.utils.weight_norm(nn.Linear(8, 16)), nn.Tanh()])
seq_case("conv_nobias_bn", (3, 5, 5), lambda: [nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU()])


class GridSample(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(48, 6)
        self.conv = nn.Conv2d(3, 4, 1)
        self.out = nn.Linear(64, C)

    def forward(self, x):
        theta = self.loc(x.reshape(B, 48)).view(B, 2, 3) * 0.1 + torch.tensor([[1.0, 0, 0], [0, 1.0, 0]], dtype=x.dtype)
        grid = F.affine_grid(theta, [B, 4, 4, 4], align_corners=False)
        return self.out(F.grid_sample(self.conv(x), grid, align_corners=False).reshape(B, 64))


case("grid_sample", (3, 4, 4), note="spatial transformer", )(lambda: Classifier(GridSample()))
at_opset("grid_sample", 16)


class GridSampleManual(nn.Module):
    """A grid from the input (tanh, times `scale` past [-1, 1] so some points fall outside), F.grid_sample with
    `kw`."""

    def __init__(self, scale=1.2, **kw):
        super().__init__()
        self.scale = scale
        self.loc = nn.Linear(48, 32)
        self.conv = nn.Conv2d(3, 4, 1)
        self.out = nn.Linear(64, C)
        self.kw = kw

    def forward(self, x):
        grid = torch.tanh(self.loc(x.reshape(B, 48))).view(B, 4, 4, 2) * self.scale
        return self.out(F.grid_sample(self.conv(x), grid, **self.kw).reshape(B, 64))


for _name, _kw in (("grid_sample_manual", dict(align_corners=False)),
                   ("grid_sample_border_ac", dict(padding_mode="border", align_corners=True)),
                   ("grid_sample_nearest", dict(mode="nearest", align_corners=False)),
                   # reflected up to 3 times (the grid spans [-4, 4])
                   ("grid_sample_reflection", dict(padding_mode="reflection", align_corners=False, scale=4.0)),
                   ("grid_sample_reflection_ac", dict(padding_mode="reflection", align_corners=True, scale=4.0)),
                   ("grid_sample_reflection_nearest",
                    dict(mode="nearest", padding_mode="reflection", align_corners=False, scale=4.0)),
                   # bicubic: 4 taps per axis, each padded on its own
                   ("grid_sample_bicubic", dict(mode="bicubic", align_corners=False)),
                   ("grid_sample_bicubic_border_ac", dict(mode="bicubic", padding_mode="border", align_corners=True)),
                   ("grid_sample_bicubic_reflection",
                    dict(mode="bicubic", padding_mode="reflection", align_corners=False, scale=4.0))):
    case(_name, (3, 4, 4), note="opset 16 GridSample")(lambda _kw=_kw: Classifier(GridSampleManual(**_kw)))
    CASES[_name]["opset"] = 16


# A parameter whose leading dim equals the batch size (2)
seq_case("linear_out2", (8,), lambda: [nn.Linear(8, 2), nn.Tanh()])


class BmmParam(nn.Module):
    """torch.bmm of the activations [B, 3, 4] with a [B, 4, 5] parameter (batch-sized leading dim, no bias)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 12)
        self.w = nn.Parameter(torch.randn(B, 4, 5) * 0.5)
        self.out = nn.Linear(15, C)

    def forward(self, x):
        return self.out(torch.bmm(self.lin(x).view(B, 3, 4), self.w).reshape(B, 15))


case("bmm_param", (8,))(lambda: Classifier(BmmParam()))


# ---------------------------------------------------------------------------------------------------------------
# What each case is expected to do: every case not listed passes all four checks.


def export_fails(text, reason):
    """torch 1.13 cannot export the case: its export error names `text`."""
    return dict(kind="export_fails", stage="export", text=text, reason=reason)


def torch_differs(reason):
    """torch's export computes something else than the module: Cleave's eval differs from torch; the 2 ranks match
    eval."""
    return dict(kind="torch_differs", stage="eval", text="", reason=reason)


def random_draws(reason):
    """The case draws random numbers: Cleave's differ from torch's; the 2 ranks match eval."""
    return dict(kind="random_draws", stage="eval", text="", reason=reason)


def gap(stage, text, reason):
    """A Cleave gap: `stage` (ir, eval or ranks) fails with one error line from cleave naming `text`."""
    return dict(kind="gap", stage=stage, text=text, reason=reason)


EXPECTED = {
    # (a) torch 1.13 cannot export it (opset 13 unless the name says otherwise).
    "conv2d_same": export_fails("aten::_convolution_mode", "Conv2d(padding='same') has no ONNX symbolic"),
    "channelshuffle": export_fails("aten::channel_shuffle", "ChannelShuffle has no ONNX symbolic"),
    "ce_probs_smoothing": export_fails("ONNX does not support label_smoothing", "torch 1.13 exports label smoothing "
                                       "only with class-index targets"),
    "threshold": export_fails("non-zero threshold", "Threshold exports only with threshold 0"),
    "bilinear": export_fails("aten::bilinear", "Bilinear has no ONNX symbolic (einsum_bilinear writes it by hand)"),
    "unflatten": export_fails("aten::unflatten", "Unflatten has no ONNX symbolic in 1.13"),
    "identity_flatten": export_fails("aten::unflatten", "Unflatten has no ONNX symbolic in 1.13"),
    "adaptiveavgpool1d_uneven": export_fails("not factor of input size",
                                             "adaptive pooling exports only to a divisor of the input size"),
    "adaptiveavgpool2d_uneven": export_fails("not factor of input size",
                                             "adaptive pooling exports only to a divisor of the input size"),
    "fractionalmaxpool2d": export_fails("aten::fractional_max_pool2d", "FractionalMaxPool has no ONNX symbolic"),
    "fold": export_fails("aten::col2im", "Fold (col2im) exports only at opset 18"),
    "tril_triu": export_fails("version 14", "tril/triu (Trilu) export from opset 14 (tril_triu_opset14 passes)"),
    "math_a": export_fails("aten::atan2", "atan2 has no ONNX symbolic"),
    "math_b": export_fails("aten::expm1", "expm1 has no ONNX symbolic (sin_cos_tan covers Sin and Cos)"),
    "sinh_cosh": export_fails("aten::sinh", "sinh has no ONNX symbolic, at opset 13 or 17 (sin_cos_tan covers Tan)"),
    "cumprod": export_fails("aten::cumprod", "cumprod has no ONNX symbolic"),
    "index_add": export_fails("duplicated values in 'index'", "index_add exports only with distinct indices"),
    "index_add_opset16": export_fails("duplicated values in 'index'", "index_add exports only with distinct indices"),
    "lstm_proj": export_fails("LSTMs with projections", "LSTM(proj_size=...) has no ONNX export"),
    "grid_sample": export_fails("aten::affine_grid_generator", "affine_grid has no ONNX symbolic"),
    "grid_sample_opset16": export_fails("aten::affine_grid_generator", "affine_grid has no ONNX symbolic"),
    "instancenorm2d_track_opset17": export_fails("output size 5", "torch's opset-17 export of a tracking "
                                                 "InstanceNorm gives BatchNormalization 5 outputs: ONNX's check fails"),
    "ce_label_smoothing": export_fails("label_smoothing", "CrossEntropyLoss(label_smoothing) has no ONNX export "
                                       "(ce_smoothing_manual writes it by hand)"),
    # the aten *_loss functions have no ONNX symbolic at opset 13 (the *_manual cases write them by hand)
    "mse": export_fails("aten::mse_loss", "MSELoss has no ONNX symbolic"),
    "mse_sum": export_fails("aten::mse_loss", "MSELoss has no ONNX symbolic"),
    "l1": export_fails("aten::l1_loss", "L1Loss has no ONNX symbolic"),
    "smoothl1": export_fails("aten::smooth_l1_loss", "SmoothL1Loss has no ONNX symbolic"),
    "huber": export_fails("aten::huber_loss", "HuberLoss has no ONNX symbolic"),
    "bce_sigmoid": export_fails("aten::binary_cross_entropy", "BCELoss has no ONNX symbolic"),
    "margin_ranking": export_fails("aten::margin_ranking_loss", "MarginRankingLoss has no ONNX symbolic"),
    "hinge_embedding": export_fails("aten::hinge_embedding_loss", "HingeEmbeddingLoss has no ONNX symbolic"),
    "cosine_embedding": export_fails("aten::cosine_embedding_loss", "CosineEmbeddingLoss has no ONNX symbolic"),
    "soft_margin": export_fails("aten::soft_margin_loss", "SoftMarginLoss has no ONNX symbolic"),
    "triplet_margin": export_fails("aten::triplet_margin_loss", "TripletMarginLoss has no ONNX symbolic"),
    "alphadropout_p0": export_fails("aten::alpha_dropout", "AlphaDropout has no ONNX symbolic in training mode"),
    "maxunpool2d": export_fails("aten::max_unpool2d", "MaxUnpool2d has no ONNX symbolic at opset 13"),
    "poisson_nll": export_fails("aten::poisson_nll_loss", "PoissonNLLLoss has no ONNX symbolic"),
    "multi_margin": export_fails("aten::multi_margin_loss", "MultiMarginLoss has no ONNX symbolic"),
    "multilabel_margin": export_fails("aten::multilabel_margin_loss", "MultiLabelMarginLoss has no ONNX symbolic"),
    "ctc": export_fails("aten::ctc_loss", "CTCLoss has no ONNX symbolic"),

    # (b) torch exports ONNX that differs from its own module: Cleave computes the export, so its loss or gradients
    # differ from torch's; the 2 ranks are checked against Cleave's eval step instead.
    "softplus": torch_differs("torch's export drops Softplus's threshold (linear above it): log(1 + exp) everywhere"),
    "conv2d_circular": torch_differs("torch's export of circular padding wraps in x[-2:-1] (the second-last row "
                                     "and column) instead of x[-1:]"),
    "scatter_add": torch_differs("at opset 13 torch exports scatter_add as ScatterElements without reduction: "
                                 "repeated indices overwrite instead of adding (scatter_add_opset16 passes)"),
    "embedding_padidx": torch_differs("torch's export drops Embedding's padding_idx: the padding row gets a "
                                      "gradient (torch's stays zero)"),

    # (c) Cleave gaps: ops or modes Cleave does not support yet.
    "rrelu_train": random_draws("RReLU in training mode draws its slopes (RandomUniformLike)"),
    "randn_like": random_draws("the reparameterisation trick's noise (RandomNormalLike)"),
    "rand_fixed_shape": random_draws("torch.rand of a fixed shape (RandomUniform)"),
}

# The CI subset (no case arguments): each family once, one case of each expectation kind. (Batch and instance norms
# after a conv are in image_layers.py and the torchvision tests; here they run on the graph input.)
CI_CASES = (
    "conv2d_groups", "convtranspose2d_dil", "upsample_bilinear", "upsample_bicubic", "groupnorm", "layernorm_2d", "layernorm_input",
    "batchnorm_input", "instancenorm_input", "pixelshuffle", "gelu_tanh", "embedding_maxnorm", "maxpool2d_ceil_pad",
    "reflectionpad2d", "unfold_overlap", "cumsum_reverse", "flip_2d", "scatter_add_opset16", "gru_bi2",
    "lstm_timemajor", "rnn_relu", "mha_masks", "transformer_decoder_layer_normfirst_gelu", "nll_weight_ignore",
    "bce_logits_posw", "conv2d_same", "softplus", "topk", "localresponsenorm", "ce_probs_2d", "embeddingbag_mean",
    "prod_odd", "grid_sample_border_ac", "int_sum_over_batch",
)


# ---------------------------------------------------------------------------------------------------------------
# The checks


class StageFailed(Exception):
    """A stage of a case failed: `stage` (export, ir, eval, ranks), `message` (one line), and for a cleave command
    its exit status and stderr."""

    def __init__(self, stage, message, returncode=None, stderr=""):
        super().__init__(message)
        self.stage, self.message, self.returncode, self.stderr = stage, message, returncode, stderr


def error_lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def cleave(stage, cmd, log):
    """Runs a cleave command, appending it and its output to log; its stdout, or StageFailed."""
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise StageFailed(stage, f"`{os.path.basename(cmd[0])} {cmd[1]}` timed out after {TIMEOUT}s")
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n# exit {r.returncode}, {time.time() - t0:.1f}s\n{r.stdout}\n{r.stderr}\n")
    if r.returncode != 0:
        lines = error_lines(r.stderr) or error_lines(r.stdout)
        what = f"`cleave {cmd[1]}` exited with {r.returncode}"
        if r.returncode < 0:
            what = f"`cleave {cmd[1]}` crashed (signal {-r.returncode})"
        raise StageFailed(stage, what + (f": {lines[-1][:300]}" if lines else ""), r.returncode, r.stderr)
    return r.stdout


def reference(make, state, x, y):
    """torch's float64 and float32 loss and gradients at the saved state (integer inputs stay integers)."""
    out = {}
    for dtype in (torch.float64, torch.float32):
        m = make()
        m.load_state_dict(state)
        m = m.to(dtype).train()
        cv = lambda a: torch.from_numpy(a).to(dtype) if a.dtype.kind == "f" else torch.from_numpy(a)  # noqa: E731
        loss = m(cv(x), cv(y))
        loss.backward()
        out[dtype] = (loss.item(), {n: p.grad.double().numpy() for n, p in m.named_parameters() if p.grad is not None})
    unused = tuple(n for n, p in m.named_parameters() if p.grad is None)
    return tc.Reference(*out[torch.float64], *out[torch.float32], unused)


def run_case(cleave_bin, name, spec, d, torch_wrong):
    """The four checks of one case in folder d. Raises StageFailed at the first that fails; with torch_wrong, eval's
    mismatch with torch does not fail it: returns eval's problems (and the 2 ranks are held to eval's loss, and their
    gradients to eval's within RANKS_GRAD_RTOL of each parameter's largest).
    Returns [] when all pass."""
    log = os.path.join(d, "log.txt")
    rng = np.random.default_rng(0)
    x = spec["x_int"](rng) if spec["x_int"] is not None else \
        rng.standard_normal((B,) + tuple(spec["x_shape"])).astype(np.float32)
    y = spec["y"](rng) if spec["y"] is not None else rng.integers(0, C, B).astype(np.int64)
    torch.manual_seed(0)
    model = spec["make"]().train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    path = os.path.join(d, "model.onnx")
    try:
        tc.export(model, (torch.from_numpy(x), torch.from_numpy(y)), path, spec["opset"])
    except Exception as e:  # noqa: BLE001 (torch raises several kinds)
        with open(log, "a") as f:
            f.write(traceback.format_exc())
        raise StageFailed("export", "torch export: " + ((error_lines(str(e)) or [repr(e)])[0])[:300])
    data = tc.save_data(d, "in", {"x": x, "y": y})

    cleave("ir", [cleave_bin, "ir", path, "--batch", str(B)], log)

    ref = reference(spec["make"], state, x, y)
    sgd = ["--optimizer", "sgd", "--lr", str(tc.LR)]
    saved = os.path.join(d, "eval_saved.onnx")
    out = cleave("eval", [cleave_bin, "eval", path, "--data", data, "--batch", str(B), "--steps", "1",
                          "--save-model", saved] + sgd, log)
    eval_loss = tc.step_loss(out)
    with open(log, "a") as f:
        eval_problems = tc.check_step(name + " eval", eval_loss, tc.recovered_gradients(path, saved), ref, slack=2,
                                      loss_slack=2, skip_unused=True, file=f)[0]
    if eval_problems and not torch_wrong:
        raise StageFailed("eval", eval_problems[0])

    bundle = os.path.join(d, "data2")
    cleave("ranks", [cleave_bin, "compile", path, "-o", bundle, "--planner", "data", "--devices", "2",
                     "--batch", str(B)] + sgd, log)
    saved2 = os.path.join(d, "data2_saved.onnx")
    out = cleave("ranks", [cleave_bin, "run", bundle, "--data", data, "--steps", "1", "--save-model", saved2]
                 + runtime_flags(cleave_bin), log)
    got = losses(out)
    if len(got) != 1:
        raise StageFailed("ranks", f"2 ranks: {len(got)} loss lines, want 1")
    rel = abs(got[0] - eval_loss) / abs(eval_loss)
    if not rel <= RANKS_RTOL:
        raise StageFailed("ranks", f"2 ranks: loss {got[0]:.8g} vs eval's {eval_loss:.8g} (rel {rel:.3g})")
    if torch_wrong:  # the 2 ranks' gradients are eval's, up to summation order
        want, have = tc.recovered_gradients(path, saved), tc.recovered_gradients(path, saved2)
        floor = 1e-3 * max(float(np.abs(g).max()) for g in want.values())
        for k, g in want.items():
            err = float(np.abs(have[k] - g).max()) / max(float(np.abs(g).max()), floor)
            if not err <= RANKS_GRAD_RTOL:
                raise StageFailed("ranks", f"2 ranks: gradient of {k} off from eval's by {err:.3g} of its largest")
    else:
        with open(log, "a") as f:
            problems = tc.check_step(name + " 2 ranks", got[0], tc.recovered_gradients(path, saved2), ref, slack=2,
                                     loss_slack=2, nonzero=True, skip_unused=True, file=f)[0]
        # Judged on the nonzero set: drop the problems check_step found over all the gradients.
        problems = [p for p in problems if " gradient of " not in p or p.endswith(", nonzero)")]
        if problems:
            raise StageFailed("ranks", problems[0])
    return eval_problems


def verdict(name, expect, outcome, eval_problems):
    """(ok, text) of a case's outcome (None or a StageFailed) against its expectation (None: pass everything)."""
    if isinstance(outcome, StageFailed) and outcome.returncode is not None and outcome.returncode < 0:
        return False, f"{outcome.stage}: {outcome.message}"
    if expect is None:
        if outcome is None:
            return True, ""
        return False, f"{outcome.stage}: {outcome.message}"
    want = f"expected {expect['kind']}: {expect['reason']}"
    if expect["kind"] in ("torch_differs", "random_draws"):
        if outcome is not None:
            return False, f"{outcome.stage}: {outcome.message} ({want})"
        if expect["kind"] == "random_draws":  # torch's own float32 and float64 runs draw apart: no power either way
            return True, want
        if not eval_problems:
            return False, f"matches torch now: remove it from EXPECTED ({want})"
        return True, f"{want} [{eval_problems[0]}]"
    if outcome is None:
        return False, f"passes now: remove it from EXPECTED ({want})"
    if outcome.stage != expect["stage"]:
        return False, f"fails at {outcome.stage}, not {expect['stage']}: {outcome.message} ({want})"
    if expect["kind"] == "gap":
        lines = error_lines(outcome.stderr)
        if outcome.returncode is None or len(lines) != 1 or expect["text"] not in lines[0]:
            return False, (f"{outcome.message}: want one error line naming '{expect['text']}', got "
                           f"{len(lines)} line(s) ({want})")
    elif expect["text"] not in outcome.message:
        return False, f"{outcome.message}: want it to name '{expect['text']}' ({want})"
    return True, want


def main():
    argv = sys.argv[1:]
    keep = None
    if "--keep" in argv:
        i = argv.index("--keep")
        if i + 1 >= len(argv):
            sys.exit("--keep needs a folder")
        keep = argv[i + 1]
        del argv[i:i + 2]
    flags = {a for a in argv if a.startswith("--")}
    unknown = flags - {"--all", "--list"}
    args = [a for a in argv if not a.startswith("--")]
    if unknown or (len(args) < 2 and "--list" not in flags):
        sys.exit("usage: " + __doc__.split("Usage: ")[1] + f"unknown flags {sorted(unknown)}" * bool(unknown))
    assert not set(EXPECTED) - set(CASES), f"EXPECTED names no case: {sorted(set(EXPECTED) - set(CASES))}"
    assert not set(CI_CASES) - set(CASES), f"CI_CASES names no case: {sorted(set(CI_CASES) - set(CASES))}"
    globs = args[2:]
    if globs:
        names = [n for n in CASES if any(fnmatch.fnmatch(n, g) for g in globs)]
        if not names:
            sys.exit(f"no case matches {globs} (--list lists them)")
    elif "--all" in flags or "--list" in flags:
        names = list(CASES)
    else:
        names = [n for n in CASES if n in CI_CASES]
    if "--list" in flags:
        for n in names:
            e = EXPECTED.get(n)
            print(f"{n:42s} {'ci' if n in CI_CASES else '  '}  "
                  + (f"{e['kind']}{'' if e['kind'] != 'gap' else ' at ' + e['stage']}: {e['reason']}" if e else "pass"))
        return 0
    cleave_bin = os.path.abspath(args[0])
    torch.set_num_threads(1)
    t_all = time.time()
    deviations, counts = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.abspath(keep) if keep else tmp
        for n in names:
            t0 = time.time()
            d = os.path.join(root, n)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            expect = EXPECTED.get(n)
            outcome, eval_problems = None, []
            try:
                # (torch's warnings about the models; a -inf mask buffer's NaN "gradient", which no check reads)
                with warnings.catch_warnings(), np.errstate(invalid="ignore"):
                    warnings.simplefilter("ignore")
                    eval_problems = run_case(cleave_bin, n, CASES[n], d,
                                             torch_wrong=expect is not None and expect["kind"] in ("torch_differs",
                                                                                                  "random_draws"))
            except StageFailed as e:
                outcome = e
            except Exception as e:  # noqa: BLE001 (a bug of the case or of this script)
                outcome = StageFailed("test", f"{type(e).__name__}: {e}"[:300])
                traceback.print_exc()
            ok, text = verdict(n, expect, outcome, eval_problems)
            kind = "pass" if expect is None else expect["kind"]
            counts[kind] = counts.get(kind, 0) + ok
            if not ok:
                deviations.append(n)
            print(f"{n:42s} {'ok' if ok else 'FAIL':4s} {time.time() - t0:5.1f}s  {text}"[:400], flush=True)
    print(f"{len(names)} cases in {time.time() - t_all:.0f}s: {counts.get('pass', 0)} pass all four checks, "
          f"{counts.get('export_fails', 0)} torch cannot export, {counts.get('torch_differs', 0)} torch exports "
          f"wrong (2 ranks match eval), {counts.get('random_draws', 0)} draw random numbers (2 ranks match eval), "
          f"{counts.get('gap', 0)} Cleave gaps as expected; {len(deviations)} deviate"
          + (f": {' '.join(deviations)}" if deviations else ""))
    return 1 if deviations else 0


if __name__ == "__main__":
    sys.exit(main())
