"""MaxUnpool (lowered at import to a ScatterElements of X into zeros at MaxPool's flat indices) trains like torch:
a float64 model, Conv -> MaxPool 2x2 (with its Indices output) -> MaxUnpool -> times a weight map -> sum, built with
onnx.helper (torch 1.13 cannot export max_unpool2d), on 6x6 maps without output_shape and on 7x7 maps with
output_shape 7x7 (the window does not divide 7: MaxPool's indices address the 7x7 map, as torch's output_size and
onnxruntime take them). One `cleave eval` SGD step at lr 1 must give torch float64's loss and gradients (conv weight
and weight map, w0 - w1 from the saved model; torch: conv2d, max_pool2d with indices, max_unpool2d) within 1e-9 of
each parameter's largest; 3 steps on 2 ranks (`--planner data`) must equal eval's.
Usage (CTest): /usr/bin/python3 tests/e2e/max_unpool_vs_torch.py <cleave-binary> <source-dir>
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "codegen"))
import bundle_check as bc  # noqa: E402

TOL = 1e-9
N, C = 2, 3


def model(path, H):
    """x [N, C, H, H] -> Conv(w, pad 1) -> MaxPool 2x2 (Y, I) -> MaxUnpool (to H x H: output_shape when 2 does not
    divide H) * m -> sum: the loss."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((C, C, 3, 3))
    m = rng.standard_normal((1, C, H, H))
    given = H % 2 != 0
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c"], ["p", "i"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxUnpool", ["p", "i"] + (["shape"] if given else []), ["u"], name="unpool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Mul", ["u", "m"], ["um"], name="weigh"),
        helper.make_node("ReduceSum", ["um"], ["loss"], name="sum", keepdims=0),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m"),
             numpy_helper.from_array(np.array([N, C, H, H], dtype=np.int64), "shape")]
    g = helper.make_graph(nodes, "unpool", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["N", C, H, H])],
                          [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])],
                          initializer=inits if given else inits[:2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w, m


def torch_reference(x, w, m):
    tw, tm = torch.tensor(w, requires_grad=True), torch.tensor(m, requires_grad=True)
    c = F.conv2d(torch.tensor(x), tw, padding=1)
    p, i = F.max_pool2d(c, 2, 2, return_indices=True)
    u = F.max_unpool2d(p, i, 2, 2, output_size=c.shape[2:])
    loss = (u * tm).sum()
    loss.backward()
    return loss.item(), {"w": tw.grad.numpy(), "m": tm.grad.numpy()}


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: max_unpool_vs_torch.py <cleave-binary> <source-dir>")
    cleave = sys.argv[1]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for H in (6, 7):
            x = np.random.default_rng(2).standard_normal((3 * N, C, H, H))
            xp = os.path.join(tmp, f"x{H}.npy")
            np.save(xp, x)
            tag = f"{H}x{H}" + (" (output_shape)" if H % 2 else "")
            path, saved = os.path.join(tmp, f"unpool{H}.onnx"), os.path.join(tmp, f"unpool{H}_1.onnx")
            w, m = model(path, H)
            r = subprocess.run([cleave, "eval", path, "--data", f"x={xp}", "--batch", str(N), "--steps", "1",
                                "--optimizer", "sgd", "--lr", "1", "--save-model", saved], capture_output=True,
                               text=True)
            if r.returncode != 0:
                problems.append(f"{tag}: cleave eval exited with {r.returncode}: {r.stderr.strip()[-400:]}")
                continue
            loss = bc.losses(r.stdout)[0]
            ref, grads = torch_reference(x[:N], w, m)
            if abs(loss - ref) > 1e-8 * abs(ref):  # the loss line prints 9 digits
                problems.append(f"{tag}: loss {loss!r} vs torch {ref!r}")
            w0, w1 = bc.weights(path), bc.weights(saved)
            for name, want in grads.items():
                err = np.abs((w0[name] - w1[name]) - want).max() / np.abs(want).max()
                print(f"{tag}: gradient of {name} off by {err:.2g} of its largest value", file=sys.stderr)
                if not err <= TOL:
                    problems.append(f"{tag}: gradient of {name} off by {err:.3g} of its largest value")
            # 3 steps on 2 ranks against eval's.
            ref3 = os.path.join(tmp, f"unpool{H}_3.onnx")
            r = subprocess.run([cleave, "eval", path, "--data", f"x={xp}", "--batch", str(N), "--steps", "3",
                                "--optimizer", "sgd", "--lr", "0.01", "--save-model", ref3], capture_output=True,
                               text=True, check=True)
            got, saved2 = bc.run_partitioned(cleave, path, os.path.join(tmp, f"bundle{H}"),
                                             ["--planner", "data", "--devices", "2", "--batch", str(N), "--optimizer",
                                              "sgd", "--lr", "0.01"], f"x={xp}", 3)
            found, worst = bc.compare_run(f"{tag}: 2 ranks", got, bc.losses(r.stdout), saved2, bc.weights(ref3), 3)
            print(f"{tag}: 2 ranks vs eval over 3 steps: worst loss rel {worst:.2g}", file=sys.stderr)
            problems += found
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print("ok: MaxUnpool's loss and gradients match torch float64; 2 ranks equal eval over 3 steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
