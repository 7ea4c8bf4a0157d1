"""The ops of issue 24 (ReduceL2, ReduceL1, ReduceLogSumExp, ReduceSumSquare, LpNormalization, Tile, DepthToSpace,
SpaceToDepth, ArgMax, ArgMin, CumSum, Mod, OneHot, Trilu, Einsum) and GatherElements, ScatterElements and GatherND train
one step like torch, on 1 rank (`cleave eval`) and on 2 (`cleave compile --planner data --devices 2` + `cleave run`).

Six models, each a trainable weight w times an input x, the ops under test on the product, and a scalar loss:
  - torch_reduce: torch 1.13's export (opset 14, training mode, no constant folding) of logsumexp, norm p=2 and p=1
    (ReduceLogSumExp, ReduceL2, ReduceL1), and triu/tril of run-time values (Trilu, lowered to Where);
  - torch_layout: the export of pixel_shuffle (DepthToSpace CRD), repeat (Tile), cumsum, a reversed cumsum (flip:
    Slice with step -1), fmod (Mod fmod=1), argmax (ArgMax, cast to float: no gradient flows through it) and one_hot of an int64 input (OneHot with int64 values);
  - torch_einsum: torch.einsum (Einsum) contracting batches (attention's bqd,bkd->bqk and bqk,bkd->bqd), a linear
    map, a per-sample dot, an outer product, three operands, an implicit output and a transpose with a sum;
  - onnx_ops: the ops torch does not export, written with onnx.helper and computed in torch by their ONNX definition:
    ReduceSumSquare, LpNormalization p=1 and p=2, DepthToSpace DCR, SpaceToDepth, exclusive reverse CumSum, ArgMin with
    select_last_index, Mod fmod=0 (torch.remainder), and OneHot with negative indices and trainable float values;
  - torch_gather: torch's export (opset 16) of gather (GatherElements, indices smaller than the data), scatter
    (ScatterElements, distinct targets, a gradient for both the data and the updates) and scatter_add (ScatterElements
    reduction add, repeated targets), the indices int64 inputs split with the batch;
  - onnx_gathernd: GatherND written with onnx.helper, batch_dims 1 on the activations (row tuples, and full-depth
    tuples of one element), batch_dims 0 on the weight itself (its gradient a scatter-add of both ranks' samples), with
    negative indices; torch computes it by advanced indexing.
Checks, as image_layers.py: the loss within relative 1e-5 of torch float64's; each parameter's gradient, recovered from
the saved model as (w0 - w1) / lr, no further from torch float64's (relative to the parameter's largest gradient) than
torch float32's own, and at most max(1e-5, that); the 2-rank bundle likewise.
Usage (CTest): /usr/bin/python3 tests/e2e/index_ops.py <cleave-binary> <source-dir>
"""
import os
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

SRC = sys.argv[2] if len(sys.argv) > 2 else "."
sys.path.insert(0, os.path.join(SRC, "tests", "codegen"))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
import torch_compare as tc  # noqa: E402
from bundle_check import check_output as sh, run_partitioned  # noqa: E402

BATCH = 4


# ---- torch-exported models ----

class TorchReduce(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, x):
        h = x * self.w
        return (torch.logsumexp(h, dim=2).sum() + torch.norm(h, p=2, dim=1).sum() +
                0.5 * torch.norm(h, p=1, dim=(1, 2)).sum() + (torch.triu(h, diagonal=1) ** 2).sum() +
                (torch.tril(h, diagonal=-1) ** 3).sum()) / BATCH


class TorchLayout(nn.Module):
    CLASSES = 5

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 2, 3))

    def forward(self, x, y):
        h = x * self.w                                           # [B, 8, 2, 3]
        loss = (F.pixel_shuffle(h, 2) ** 2).sum()                # DepthToSpace CRD -> [B, 2, 4, 6]
        loss = loss + (h.repeat(1, 2, 1, 3) ** 3).sum() * 0.1     # Tile
        loss = loss + (torch.cumsum(h, dim=3) ** 2).sum()        # CumSum
        rev = torch.cumsum(h.flip(3), dim=3).flip(3)             # Slice with step -1 (and its gradient)
        loss = loss + (rev * torch.arange(1.0, 4.0)).sum()
        loss = loss + (torch.fmod(h, 0.7) ** 2).sum()            # Mod fmod=1
        top = torch.argmax(h, dim=1).float()                     # ArgMax, no gradient
        loss = loss + (h.sum(dim=1) * top).sum() * 0.1
        hot = F.one_hot(y, self.CLASSES).float()                 # OneHot [B, 8, 5] of int64 y [B, 8]
        loss = loss + (hot * h.sum(dim=(2, 3)).unsqueeze(2)).sum()
        return loss / BATCH


class TorchEinsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, x):
        h = x * self.w                                                   # [B, 6, 5]
        att = torch.einsum("bqd,bkd->bqk", h, x)                         # [B, 6, 6]
        ctx = torch.einsum("bqk,bkd->bqd", torch.softmax(att, dim=2), h)  # [B, 6, 5]
        loss = (ctx ** 2).sum() + torch.einsum("bqd,dk->bqk", h, self.w.t()).pow(2).sum() * 0.1
        loss = loss + torch.einsum("bqd,bqd->b", h, x).sum() + torch.einsum("bi,bj->bij", h[:, 0], h[:, 1]).pow(2).sum()
        loss = loss + torch.einsum("bqd,qe,be->b", h, self.w, x[:, 0]).sum() * 0.1
        loss = loss + torch.einsum("bqd,qd", h, self.w).pow(2).sum() + torch.einsum("bqd->dq", h).pow(2).sum()
        return loss / BATCH


# ---- the helper-built model: ONNX ops torch does not export, and torch's computation of each ----

def onnx_ops_model(path, w, v):
    f = TensorProto.FLOAT
    n = helper.make_node
    c = lambda name, a: numpy_helper.from_array(np.asarray(a), name)  # noqa: E731
    nodes = [
        n("Mul", ["x", "w"], ["h"]),                                               # [B, 8, 4, 6]
        n("ReduceSumSquare", ["h"], ["ss"], axes=[2], keepdims=0),                 # [B, 8, 6]
        n("LpNormalization", ["h"], ["l2n"], axis=1, p=2),
        n("LpNormalization", ["h"], ["l1n"], axis=-1, p=1),
        n("DepthToSpace", ["h"], ["d2s"], blocksize=2, mode="DCR"),               # [B, 2, 8, 12]
        n("SpaceToDepth", ["h"], ["s2d"], blocksize=2),                            # [B, 32, 2, 3]
        n("CumSum", ["h", "axis3"], ["cs"], exclusive=1, reverse=1),
        n("ArgMin", ["h"], ["amin"], axis=1, keepdims=1, select_last_index=1),     # [B, 1, 4, 6]
        n("Cast", ["amin"], ["aminf"], to=f),
        n("Mod", ["h", "c07"], ["md"], fmod=0),
        n("OneHot", ["y", "depth", "v"], ["hot"], axis=-1),                        # [B, 8, 6]
    ]
    terms = ["ss", "l2n", "l1n", "d2s", "s2d", "cs", "md"]
    for t in terms:
        nodes += [n("Mul", [t, t], [t + "_sq"]), n("ReduceSum", [t + "_sq"], [t + "_sum"], keepdims=0)]
    nodes += [n("Mul", ["h", "aminf"], ["ha"]), n("ReduceSum", ["ha"], ["ha_sum"], keepdims=0),
              n("Mul", ["hot", "ss"], ["hs"]), n("ReduceSum", ["hs"], ["hs_sum"], keepdims=0),
              n("Sum", [t + "_sum" for t in terms] + ["ha_sum", "hs_sum"], ["total"]),
              n("Div", ["total", "batch"], ["loss"])]
    graph = helper.make_graph(
        nodes, "onnx_ops",
        [helper.make_tensor_value_info("x", f, [BATCH, 8, 4, 6]),
         helper.make_tensor_value_info("y", TensorProto.INT64, [BATCH, 8])],
        [helper.make_tensor_value_info("loss", f, [])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(v, "v"), c("axis3", np.int64(3)),
         c("c07", np.float32(0.7)), c("depth", np.int64(6)), c("batch", np.float32(BATCH))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def onnx_ops_torch(p, x, y):
    h = x * p["w"]
    b = h.shape[0]
    ss = (h * h).sum(dim=2)
    l2n = h / h.norm(p=2, dim=1, keepdim=True)
    l1n = h / h.abs().sum(dim=-1, keepdim=True)
    d2s = h.reshape(b, 2, 2, 2, 4, 6).permute(0, 3, 4, 1, 5, 2).reshape(b, 2, 8, 12)
    s2d = h.reshape(b, 8, 2, 2, 3, 2).permute(0, 3, 5, 1, 2, 4).reshape(b, 32, 2, 3)
    cs = h.flip(3).cumsum(3).flip(3) - h
    amin = 7 - h.flip(1).argmin(dim=1, keepdim=True)
    md = torch.remainder(h, 0.7)
    hot = torch.where(F.one_hot(y % 6, 6).bool(), p["v"][1], p["v"][0])
    total = sum((t * t).sum() for t in (ss, l2n, l1n, d2s, s2d, cs, md))
    total = total + (h * amin.to(h.dtype)).sum() + (hot * ss).sum()
    return total / b


# ---- gathers and scatters: torch's export of gather/scatter/scatter_add, and GatherND by onnx.helper ----

class TorchGather(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, x, gi, si):
        h = x * self.w                                           # [B, 6, 5]
        g = torch.gather(h, 2, gi)                               # GatherElements [B, 4, 3]
        loss = (g ** 2).sum()
        s = h.scatter(1, si, h[:, 2:4, :] * 2.0)                 # ScatterElements none, si [B, 2, 5] distinct
        loss = loss + (s ** 3).sum() * 0.1
        a = h.scatter_add(2, gi, g)                              # ScatterElements add, repeated targets
        return (loss + (a ** 2).sum()) / BATCH


def gathernd_model(path, w):
    i64 = TensorProto.INT64
    n = helper.make_node
    nodes = [
        n("Mul", ["x", "w"], ["h"]),                                      # [B, 6, 5]
        n("GatherND", ["h", "i1"], ["g1"], batch_dims=1),                 # rows: [B, 3, 5]
        n("GatherND", ["w", "i2"], ["g2"]),                               # elements of w: [B]
        n("GatherND", ["h", "i3"], ["g3"], batch_dims=1),                 # elements: [B, 2]
        n("Mul", ["g1", "g1"], ["g1_sq"]), n("ReduceSum", ["g1_sq"], ["s1"], keepdims=0),
        n("Mul", ["g2", "g2"], ["g2_sq"]), n("Mul", ["g2_sq", "g2"], ["g2_cu"]),
        n("ReduceSum", ["g2_cu"], ["s2"], keepdims=0),
        n("Mul", ["g3", "g3"], ["g3_sq"]), n("ReduceSum", ["g3_sq"], ["s3"], keepdims=0),
        n("Sum", ["s1", "s2", "s3"], ["total"]),
        n("Div", ["total", "batch"], ["loss"]),
    ]
    graph = helper.make_graph(
        nodes, "onnx_gathernd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 6, 5]),
         helper.make_tensor_value_info("i1", i64, [BATCH, 3, 1]),
         helper.make_tensor_value_info("i2", i64, [BATCH, 2]),
         helper.make_tensor_value_info("i3", i64, [BATCH, 2, 2])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(BATCH), "batch")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def gathernd_torch(p, x, i1, i2, i3):
    h = x * p["w"]
    b = torch.arange(h.shape[0]).unsqueeze(1)
    g1 = h[b, i1[..., 0]]                                        # negative indices count from the end, as in ONNX
    g2 = p["w"][i2[:, 0], i2[:, 1]]
    g3 = h[b, i3[..., 0], i3[..., 1]]
    return ((g1 ** 2).sum() + (g2 ** 3).sum() + (g3 ** 2).sum()) / h.shape[0]


# ---- comparison ----

def run_case(cleave, name, path, data, ref, tmp):
    """One step of `cleave eval` and of the data plan on 2 ranks against torch (tests/e2e/torch_compare.py): the
    gradients have no floor (no parameter's is zero)."""
    sgd = ["--optimizer", "sgd", "--lr", str(tc.LR)]
    saved = os.path.join(tmp, f"{name}_eval.onnx")
    out = sh([cleave, "eval", path, "--data", data, "--batch", str(BATCH), "--steps", "1", "--save-model", saved] + sgd)
    problems = tc.check_step(f"{name} eval", tc.step_loss(out), tc.recovered_gradients(path, saved), ref, floor=0)[0]
    got, saved = run_partitioned(cleave, path, os.path.join(tmp, name + "_data2"),
                                 ["--planner", "data", "--devices", "2", "--batch", str(BATCH)] + sgd, data, 1)
    if len(got) != 1:
        return problems + [f"{name} 2 ranks: {len(got)} loss lines, want 1"]
    return problems + tc.check_step(f"{name} 2 ranks", got[0], tc.recovered_gradients(path, saved), ref, floor=0)[0]


def main():
    cleave = sys.argv[1]
    problems = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        # torch_reduce
        torch.manual_seed(0)
        m = TorchReduce()
        x = rng.standard_normal((BATCH, 6, 5)).astype(np.float32)
        path = os.path.join(tmp, "torch_reduce.onnx")
        ops = tc.export(m, (torch.from_numpy(x),), path, 14, ["x"])
        print("torch_reduce: ONNX ops " + ", ".join(ops), flush=True)
        for need in ("ReduceLogSumExp", "ReduceL2", "ReduceL1", "Trilu"):
            if need not in ops:
                problems.append(f"torch_reduce: the export has no {need}")
        w = m.w.detach().numpy()
        ref = tc.function_reference(lambda p, xx: TorchReduce.forward(SimpleNamespace(w=p["w"]), xx), {"w": w}, [x])
        problems += run_case(cleave, "torch_reduce", path, tc.save_data(tmp, "torch_reduce", {"x": x}), ref, tmp)

        # torch_layout
        torch.manual_seed(1)
        m = TorchLayout()
        x = rng.standard_normal((BATCH, 8, 2, 3)).astype(np.float32)
        y = rng.integers(0, TorchLayout.CLASSES, (BATCH, 8)).astype(np.int64)
        path = os.path.join(tmp, "torch_layout.onnx")
        ops = tc.export(m, (torch.from_numpy(x), torch.from_numpy(y)), path)
        print("torch_layout: ONNX ops " + ", ".join(ops), flush=True)
        for need in ("DepthToSpace", "Tile", "CumSum", "Mod", "ArgMax", "OneHot"):
            if need not in ops:
                problems.append(f"torch_layout: the export has no {need}")
        w = m.w.detach().numpy()
        ref = tc.function_reference(
            lambda p, xx, yy: TorchLayout.forward(SimpleNamespace(w=p["w"], CLASSES=5), xx, yy), {"w": w}, [x, y])
        problems += run_case(cleave, "torch_layout", path, tc.save_data(tmp, "torch_layout", {"x": x, "y": y}), ref,
                             tmp)

        # torch_einsum
        torch.manual_seed(2)
        m = TorchEinsum()
        x = rng.standard_normal((BATCH, 6, 5)).astype(np.float32)
        path = os.path.join(tmp, "torch_einsum.onnx")
        ops = tc.export(m, (torch.from_numpy(x),), path, names=["x"])
        print("torch_einsum: ONNX ops " + ", ".join(ops), flush=True)
        if "Einsum" not in ops:
            problems.append("torch_einsum: the export has no Einsum")
        w = m.w.detach().numpy()
        ref = tc.function_reference(lambda p, xx: TorchEinsum.forward(SimpleNamespace(w=p["w"]), xx), {"w": w}, [x])
        problems += run_case(cleave, "torch_einsum", path, tc.save_data(tmp, "torch_einsum", {"x": x}), ref, tmp)

        # onnx_ops
        w = rng.standard_normal((8, 4, 6)).astype(np.float32)
        v = np.array([0.25, 1.5], np.float32)
        x = rng.standard_normal((BATCH, 8, 4, 6)).astype(np.float32)
        y = rng.integers(-6, 6, (BATCH, 8)).astype(np.int64)
        path = os.path.join(tmp, "onnx_ops.onnx")
        onnx_ops_model(path, w, v)
        ref = tc.function_reference(onnx_ops_torch, {"w": w, "v": v}, [x, y])
        problems += run_case(cleave, "onnx_ops", path, tc.save_data(tmp, "onnx_ops", {"x": x, "y": y}), ref, tmp)
        # torch_gather
        torch.manual_seed(3)
        m = TorchGather()
        x = rng.standard_normal((BATCH, 6, 5)).astype(np.float32)
        gi = rng.integers(0, 5, (BATCH, 4, 3)).astype(np.int64)
        si = np.argsort(rng.random((BATCH, 6, 5)), axis=1)[:, :2, :].astype(np.int64)
        path = os.path.join(tmp, "torch_gather.onnx")
        ops = tc.export(m, tuple(torch.from_numpy(a) for a in (x, gi, si)), path, 16, ["x", "gi", "si"])
        print("torch_gather: ONNX ops " + ", ".join(ops), flush=True)
        for need in ("GatherElements", "ScatterElements"):
            if need not in ops:
                problems.append(f"torch_gather: the export has no {need}")
        reductions = sorted({a.s.decode() for nd in onnx.load(path).graph.node if nd.op_type == "ScatterElements"
                             for a in nd.attribute if a.name == "reduction"})
        if "add" not in reductions:
            problems.append(f"torch_gather: no ScatterElements with reduction add (reductions {reductions})")
        w = m.w.detach().numpy()
        ref = tc.function_reference(lambda p, *a: TorchGather.forward(SimpleNamespace(w=p["w"]), *a), {"w": w},
                                    [x, gi, si])
        problems += run_case(cleave, "torch_gather", path,
                             tc.save_data(tmp, "torch_gather", {"x": x, "gi": gi, "si": si}), ref, tmp)

        # onnx_gathernd
        w = rng.standard_normal((6, 5)).astype(np.float32)
        x = rng.standard_normal((BATCH, 6, 5)).astype(np.float32)
        i1 = rng.integers(-6, 6, (BATCH, 3, 1)).astype(np.int64)
        i2 = np.stack([rng.integers(-6, 6, BATCH), rng.integers(-5, 5, BATCH)], axis=1).astype(np.int64)
        i2[2] = i2[0]  # the same element of w from both ranks' samples
        i3 = np.stack([rng.integers(-6, 6, (BATCH, 2)), rng.integers(-5, 5, (BATCH, 2))], axis=2).astype(np.int64)
        path = os.path.join(tmp, "onnx_gathernd.onnx")
        gathernd_model(path, w)
        ref = tc.function_reference(gathernd_torch, {"w": w}, [x, i1, i2, i3])
        problems += run_case(cleave, "onnx_gathernd", path,
                             tc.save_data(tmp, "onnx_gathernd", {"x": x, "i1": i1, "i2": i2, "i3": i3}), ref, tmp)
    for p in problems:
        print("FAIL " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
