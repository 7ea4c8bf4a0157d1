"""Writes one benchmark model of the papers (Tofu, FlexFlow, TensorOpt, ParaDL) as an ONNX training model.

    /usr/bin/python3 models/zoo/generate.py --family wresnet --variant 152-10 -o /tmp/wr.onnx --batch 8

Families and variants (`tiny` everywhere: a few-KB model of the same structure for tests):
  wresnet      D-K, D in 50/101/152, K in 4/6/8/10   224x224 (nets_cnn.py)
  resnet       50, 101, 152                          224x224
  alexnet      full                                  224x224
  vgg16        full                                  224x224
  inception3   full                                  299x299
  rnn          L-H, e.g. 10-8K (K = 1024)            20 steps (nets_seq.py)
  rnntc, rnnlm, nmt   full                           FlexFlow's RNN models
  transformer  tensoropt, bert-base                  BERT-style encoder (bert-base: 12 layers, width 768, 128
                                                     tokens, no dropout: tests/gpu/bench_vs_torch.sh)
  decoder      gpt2-small                            GPT-2-style causal decoder (12 layers, width 768, 128 tokens,
                                                     vocabulary 50257, no dropout: tests/gpu/bench_vs_torch.sh)

The model is forward(inputs..., y) -> scalar cross-entropy `loss`, exported with training=TrainingMode.TRAINING and
do_constant_folding=False (opset 15; 17 for the transformer and decoder, whose LayerNorm then exports as
LayerNormalization).
Images are input `x` float32 [N,3,S,S]; token models take int64 `x` (and `src`/`tgt` for nmt). Labels `y` are int64.
The batch dim is symbolic ("N") unless --batch fixes it. Initializers keep torch's names. --weights chooses how
their values are stored (export.py): inline (default for tiny), external, sparse (default otherwise), none.
Deterministic: torch.manual_seed(--seed) before building the values, so reruns give the same bytes.
"""
import argparse
import collections
import os
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import nets_cnn  # noqa: E402
import nets_seq  # noqa: E402

F32, I64 = torch.float32, torch.int64


class Classifier(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


def image(make_net, side):
    return lambda: Classifier(make_net()), [("x", (3, side, side), F32), ("y", (), I64)], 15


def tokens(make, steps, names=("x",), label_steps=True):
    ins = [(n, (steps,), I64) for n in names] + [("y", (steps,) if label_steps else (), I64)]
    return make, ins, 15


def parse_hidden(text):
    return int(text[:-1]) * 1024 if text.upper().endswith("K") else int(text)


def resolve(family, variant):
    """(make_module, inputs, opset) of a family's variant; raises ValueError naming what is wrong."""
    tiny = variant == "tiny"
    if family in ("wresnet", "resnet"):
        if tiny:
            base = 8 if family == "wresnet" else 4
            # 32x32, as torch users train it: stage 4 then runs on 1x1 maps, so its training-mode BatchNorms take
            # their statistics over the batch alone. With a batch of 4-8 that amplifies float rounding ~10x per BN
            # and puts ReLU inputs within 1e-6 of 0, so runs that round differently drift apart within a few SGD
            # steps; torch float32 and float64 do too (tests/e2e/zoo_tiny.py measures it). Tests train it with
            # batch 16 and lr 0.01, where torch float32 and float64 agree to ~1e-6 over 5 steps.
            return image(lambda: nets_cnn.ResNet([1, 1, 1, 1], base=base, classes=10), 32)
        depth, _, widen = variant.partition("-") if family == "wresnet" else (variant, "", "1")
        if int(depth) not in nets_cnn.RESNET_BLOCKS or (family == "wresnet" and int(widen) not in (4, 6, 8, 10)):
            raise ValueError(f"{family} variant {variant!r}: expected "
                             f"{'D-K with D in 50/101/152 and K in 4/6/8/10' if family == 'wresnet' else '50/101/152'}")
        blocks = nets_cnn.RESNET_BLOCKS[int(depth)]
        return image(lambda: nets_cnn.ResNet(blocks, base=64 * int(widen)), 224)
    if family == "alexnet":
        return image(lambda: nets_cnn.alexnet(10, 1 / 16, 1, 32) if tiny else nets_cnn.alexnet(), 64 if tiny else 224)
    if family == "vgg16":
        return image(lambda: nets_cnn.vgg16(10, 1 / 16, 1, 32) if tiny else nets_cnn.vgg16(), 32 if tiny else 224)
    if family == "inception3":
        return image(lambda: nets_cnn.InceptionV3(10, 1 / 16, False) if tiny else nets_cnn.InceptionV3(),
                     75 if tiny else 299)
    if family == "rnn":
        layers, hidden, vocab = (2, 8, 16) if tiny else (None, None, 10000)
        if not tiny:
            try:
                l_text, h_text = variant.split("-")
                layers, hidden = int(l_text), parse_hidden(h_text)
            except ValueError:
                raise ValueError(f"rnn variant {variant!r}: expected L-H, e.g. 10-8K") from None
        return tokens(lambda: nets_seq.LstmLM(layers, hidden, vocab), 20)
    if family == "rnntc":
        cfg = (2, 8, 16, 2, 10) if tiny else (4, 1024, 20000, 2, 40)
        return tokens(lambda: nets_seq.LstmClassifier(*cfg[:4]), cfg[4], label_steps=False)
    if family == "rnnlm":
        cfg = (2, 8, 16) if tiny else (2, 2048, 10000)
        return tokens(lambda: nets_seq.LstmLM(*cfg), 20)
    if family == "nmt":
        cfg = (2, 8, 16) if tiny else (2, 1024, 32000)
        return tokens(lambda: nets_seq.Seq2Seq(*cfg), 20 if not tiny else 6, names=("src", "tgt"))
    if family == "transformer":
        cfg = {"tiny": (2, 16, 2, 32, 8, 32, 0.0), "tensoropt": (24, 1024, 16, 4096, 512, 30522, 0.1),
               "bert-base": (12, 768, 12, 3072, 128, 30522, 0.0)}[variant]
        make, ins, _ = tokens(lambda: nets_seq.Encoder(*cfg), cfg[4])
        return make, ins, 17
    if family == "decoder":
        cfg = {"tiny": (2, 16, 2, 32, 8, 32), "gpt2-small": (12, 768, 12, 3072, 128, 50257)}[variant]
        make, ins, _ = tokens(lambda: nets_seq.Decoder(*cfg), cfg[4])
        return make, ins, 17
    raise ValueError(f"unknown family {family!r}")


def check_variant(family, variant):
    if variant == "tiny":
        return
    fixed = {"alexnet": ["full"], "vgg16": ["full"], "inception3": ["full"], "rnntc": ["full"], "rnnlm": ["full"],
             "nmt": ["full"], "transformer": ["tensoropt", "bert-base"], "decoder": ["gpt2-small"]}
    if family in fixed and variant not in fixed[family]:
        raise ValueError(f"{family} variant {variant!r}: expected {' or '.join(fixed[family])} or tiny")


def generate(family, variant, out, batch=None, weights=None, seed=0, opset=None):
    check_variant(family, variant)
    make, inputs, default_opset = resolve(family, variant)
    weights = weights or ("inline" if variant == "tiny" else "sparse")
    torch.manual_seed(seed)
    model = export.export_structure(make, inputs, batch, opset or default_opset)
    specs = export.param_specs(make)
    values = None
    if weights in ("inline", "external"):
        torch.manual_seed(seed)
        values = make().state_dict()
    data_path = os.path.splitext(out)[0] + ".data"
    data_name = os.path.basename(data_path)
    model.graph.name = f"{family}_{variant}"
    onnx.checker.check_model(model)  # before the initializers: the checker would look for external data in the cwd
    params, data_bytes, used = export.attach_initializers(model, specs, weights, data_name, values)
    tmp = out + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, out)
    if weights in ("external", "sparse"):
        export.write_external(data_path, specs, used, weights, values)
    elif os.path.exists(data_path) and weights == "none":
        os.remove(data_path)
    hist = collections.Counter(n.op_type for n in model.graph.node)
    print(f"{out}: {family} {variant}: {params} parameters ({params * 4 / 2**30:.2f} GiB as float32), "
          f"{len(model.graph.node)} nodes, weights {weights}" +
          (f" ({data_name}, {data_bytes} bytes)" if weights != "inline" else ""), file=sys.stderr)
    print("  ops: " + ", ".join(f"{k} {hist[k]}" for k in sorted(hist)), file=sys.stderr)
    return params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--batch", type=int, help="fix the batch dimension (default: symbolic N)")
    ap.add_argument("--weights", choices=["inline", "external", "sparse", "none"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, choices=range(13, 18), metavar="13..17")
    a = ap.parse_args(argv)
    if a.batch is not None and a.batch <= 0:
        ap.error("--batch must be positive")
    try:
        generate(a.family, a.variant, a.output, a.batch, a.weights, a.seed, a.opset)
    except ValueError as e:
        sys.exit(f"error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
