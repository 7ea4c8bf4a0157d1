#!/usr/bin/python3
"""Writes optim_reference.txt: parameters after each of two torch.optim steps on a fixed tiny model.

The model (mirrored in training_graph_test.cpp): y = tanh(x @ W + b), loss = sum(y * y), float64, with
W[i][j] = 0.5 * sin(4 * i + j + 1), b[j] = 0.1 * (j - 1.5), x[i][j] = cos(3 * i + j). Run with Debian's torch:
  /usr/bin/python3 tests/autodiff/make_optim_reference.py > tests/autodiff/optim_reference.txt
Each line: <config> <step> <param> <values...> (%.17g).
"""
import math

import torch

# name -> (constructor, kwargs). torch 1.13's SGD has no default lr: 0.01 is Cleave's documented default.
CONFIGS = [
    ("sgd_default", torch.optim.SGD, dict(lr=0.01)),
    ("sgd_wd", torch.optim.SGD, dict(lr=0.1, weight_decay=0.01)),
    ("momentum_default", torch.optim.SGD, dict(lr=0.01, momentum=0.9)),
    ("momentum_nesterov_wd", torch.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001)),
    ("adam_default", torch.optim.Adam, dict()),
    ("adam_custom", torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.01)),
    ("adamw_default", torch.optim.AdamW, dict()),
    ("adamw_custom", torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
]


def main():
    for name, ctor, kwargs in CONFIGS:
        w = torch.tensor([[0.5 * math.sin(4 * i + j + 1) for j in range(4)] for i in range(3)],
                         dtype=torch.float64, requires_grad=True)
        b = torch.tensor([0.1 * (j - 1.5) for j in range(4)], dtype=torch.float64, requires_grad=True)
        x = torch.tensor([[math.cos(3 * i + j) for j in range(3)] for i in range(2)], dtype=torch.float64)
        opt = ctor([w, b], **kwargs)
        for step in (1, 2):
            opt.zero_grad()
            y = torch.tanh(x @ w + b)
            loss = (y * y).sum()
            loss.backward()
            opt.step()
            for pname, p in (("W", w), ("b", b)):
                vals = " ".join("%.17g" % v for v in p.detach().reshape(-1).tolist())
                print(f"{name} {step} {pname} {vals}")


if __name__ == "__main__":
    main()
