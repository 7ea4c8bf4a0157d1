"""Helper of tests/bench/cpu_vs_torch.sh: exports the benchmark models to ONNX and times torch on them.

  cpu_vs_torch.py export MODEL DIR   writes DIR/MODEL.onnx (torch 1.13, training mode, opset 14, no constant folding,
                                     dropout 0) with the loss as its output, and DIR/MODEL_x.npy, DIR/MODEL_y.npy (one
                                     batch); prints the batch size
  cpu_vs_torch.py torch MODEL STEPS [THREADS]
                                     times STEPS SGD steps (lr 0.01, zero_grad + forward + loss + backward + step) of
                                     the same model in torch at THREADS threads (default 1); prints the median step in
                                     seconds after the first (a warm-up)
  cpu_vs_torch.py ddp MODEL STEPS RANKS
                                     the same with torch's DistributedDataParallel over RANKS processes (gloo, one
                                     thread each, the batch split among them as Cleave's data plan splits it); prints
                                     rank 0's median step

Models: mlp (784-2048-2048-10, batch 128), resnet18 (torchvision, 10 classes, 32x32, batch 32), transformer
(nn.TransformerEncoder d=256, 4 heads, 4 layers, ff 1024, seq 64, batch 16, mean-pooled into a 10-way Linear).
Each is wrapped in a cross-entropy loss, models/zoo/generate.py's Classifier.
"""
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "zoo"))
from generate import Classifier  # noqa: E402

CLASSES = 10

class Encoder(nn.Module):
    def __init__(self, d=256, heads=4, layers=4):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def make(name):
    """(model, x shape, batch)."""
    torch.manual_seed(0)
    if name == "mlp":
        net = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, CLASSES))
        return Classifier(net), (128, 784)
    if name == "resnet18":
        import torchvision
        return Classifier(torchvision.models.resnet18(num_classes=CLASSES)), (32, 3, 32, 32)
    if name == "transformer":
        return Classifier(Encoder()), (16, 64, 256)
    raise SystemExit(f"unknown model {name}")


def data(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, CLASSES, shape[0]).astype(np.int64)
    return x, y


def export(name, out):
    model, shape = make(name)
    x, y = data(shape)
    model.train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (torch.from_numpy(x), torch.from_numpy(y)), os.path.join(out, name + ".onnx"),
                      opset_version=14, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x", "y"])
    model.load_state_dict(state)
    np.save(os.path.join(out, name + "_x.npy"), x)
    np.save(os.path.join(out, name + "_y.npy"), y)
    print(shape[0])


def time_torch(name, steps, threads=1):
    torch.set_num_threads(threads)
    model, shape = make(name)
    x, y = (torch.from_numpy(a) for a in data(shape))
    model.train()
    print(median_step(model, x, y, steps))


def median_step(net, x, y, steps, before_each=lambda: None):
    """The median SGD step (lr 0.01) of `net` on one batch after the first, `before_each` run untimed before each."""
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    times = []
    for _ in range(steps):
        before_each()
        t = time.perf_counter()
        opt.zero_grad()
        net(x, y).backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def ddp_rank(rank, ranks, name, steps, port, out):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    model, shape = make(name)
    x, y = (torch.from_numpy(a) for a in data(shape))
    per = shape[0] // ranks
    x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
    model.train()
    step = median_step(DistributedDataParallel(model), x, y, steps, dist.barrier)
    if rank == 0:
        out.put(step)
    dist.destroy_process_group()


def time_ddp(name, steps, ranks):
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=ddp_rank, args=(r, ranks, name, steps, port, out)) for r in range(ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit("a DDP process failed")
    print(out.get())


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "torch":
        time_torch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif sys.argv[1] == "ddp":
        time_ddp(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(__doc__)
