#!/usr/bin/python3
"""Prints the expected output shapes used by shape_rules_test.cpp, computed by torch 1.13 / numpy (not by us).
Run with Debian's /usr/bin/python3 (it has torch); paste the printed lines into the test when cases change."""
import numpy as np
import torch
import torch.nn.functional as F

def conv(x, w, stride, pad, dil, groups):
    # pad = (begin, end) per spatial dim, applied explicitly so asymmetric pads are covered.
    xt = torch.zeros(x)
    flat = []
    for b, e in reversed(pad):
        flat += [b, e]
    xt = F.pad(xt, flat)
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(x)]
    return list(fn(xt, torch.zeros(w), stride=stride, dilation=dil, groups=groups).shape)

def pool(kind, x, k, stride, pad, dil, ceil):
    xt = torch.zeros(x)
    if kind == "max":
        return list(F.max_pool2d(xt, k, stride, pad, dil, ceil_mode=ceil).shape)
    return list(F.avg_pool2d(xt, k, stride, pad, ceil_mode=ceil).shape)

print("conv_a", conv([2, 4, 9, 7], [6, 2, 3, 2], [2, 1], [(1, 2), (0, 1)], [2, 1], 2))
print("conv_b", conv([1, 3, 11], [4, 3, 3], [3], [(2, 1)], [1], 1))
print("conv_c", conv([1, 2, 5, 4, 4], [2, 2, 2, 3, 2], [1, 1, 1], [(1, 1), (1, 1), (0, 0)], [1, 1, 1], 1))
print("maxpool_ceil", pool("max", [1, 1, 4, 4], 3, 2, 0, 1, True))
print("maxpool_ceil_pad", pool("max", [1, 1, 5, 5], 2, 2, 1, 1, True))
print("maxpool_dil", pool("max", [1, 1, 10, 10], 3, 2, 1, 2, False))
print("avgpool_ceil", pool("avg", [1, 1, 7, 7], 3, 2, 1, 1, True))
print("matmul_1d_nd", list(torch.matmul(torch.zeros(3), torch.zeros(2, 3, 4)).shape))
print("matmul_nd_1d", list(torch.matmul(torch.zeros(2, 4, 3), torch.zeros(3)).shape))
print("matmul_bcast", list(torch.matmul(torch.zeros(2, 1, 3, 4), torch.zeros(5, 4, 6)).shape))
print("slice_neg", list(np.zeros((7, 6))[1:5:3, 5::-2].shape))
print("gather", list(np.take(np.zeros((3, 5, 2)), np.zeros((4, 2), dtype=np.int64), axis=1).shape))
print("bcast", list((np.zeros((2, 1, 4)) + np.zeros((3, 1))).shape))
