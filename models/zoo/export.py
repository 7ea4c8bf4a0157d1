"""Exports a training model (forward + scalar loss) to ONNX without materialising its weights.

torch.onnx.export traces the model by running it. A WResNet-152-10 has billions of parameters, so the trace runs on
the *meta* device (shapes only, no storage, no arithmetic) with export_params=False: every parameter becomes a graph
input, which `attach_initializers` turns back into an initializer of the right dtype and dims whose values are
  - "inline":   the seeded torch initialisation, in raw_data (small models: the tests train these);
  - "external": the same values in `<model>.data` next to the model (ONNX external data);
  - "sparse":   external data references into `<model>.data`, written as a sparse file of the right length
                (truncate: no disk blocks, reads as zeros) — planning never reads it, compiling would read zeros;
  - "none":     external data references and no data file at all (`cleave plan` works, `cleave compile` names
                the missing file).
The graph is the one torch exports for the real model (same symbolic functions), except that the initializers are
declared after the fact. Three workarounds make meta tracing work in torch 1.13, each scoped to the export call:
  1. initializer de-duplication compares data pointers, which are all null on meta: it is skipped (parameters that
     share storage do not occur in these nets);
  2. ONNX shape-type inference copies parameter values: it runs without them (their types are known);
  3. aten::convolution's meta kernel is Python code that the tracer records into the graph as a constant: convolutions
     go through an autograd.Function whose symbolic emits exactly the Conv node torch's own symbolic would.
"""
import contextlib
import io

import onnx
import torch
import torch.nn as nn
from onnx import numpy_helper

ALIGN = 64  # byte alignment of each tensor in the external data file


class _MetaConv(torch.autograd.Function):
    """Conv2d that only computes its output shape; exported as ONNX Conv (as torch.onnx's symbolic_opset9 does)."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups, out_shape):
        return x.new_empty(out_shape)

    @staticmethod
    def symbolic(g, x, w, b, stride, padding, dilation, groups, out_shape):
        kernel = w.type().sizes()[2:]
        args = [x, w] if b is None or b.node().mustBeNone() else [x, w, b]
        return g.op("Conv", *args, kernel_shape_i=kernel, strides_i=list(stride),
                    pads_i=list(padding) + list(padding), dilations_i=list(dilation), group_i=groups)


def _meta_conv_forward(self, x):
    if self.padding_mode != "zeros" or isinstance(self.padding, str):
        raise ValueError("zoo nets use numeric zero padding")
    # The output shape is computed here, untraced: shape arithmetic inside the Function's forward breaks the trace.
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        (n, _, h, w), (kh, kw) = x.shape, self.weight.shape[2:]
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        out = (int(n), int(self.weight.shape[0]), (int(h) + 2 * ph - dh * (int(kh) - 1) - 1) // sh + 1,
               (int(w) + 2 * pw - dw * (int(kw) - 1) - 1) // sw + 1)
    finally:
        torch._C._set_tracing_state(state)
    return _MetaConv.apply(x, self.weight, self.bias, tuple(self.stride), tuple(self.padding),
                           tuple(self.dilation), self.groups, out)


@contextlib.contextmanager
def _meta_export_patches():
    c = torch._C
    saved = (c._jit_pass_onnx_deduplicate_initializers, c._jit_pass_onnx_graph_shape_type_inference,
             nn.Conv2d.forward)
    infer = saved[1]

    def infer_with_stand_ins(graph, params, opset):
        # Without values: parameters are typed graph inputs already, and copying stand-ins would allocate them.
        return infer(graph, {k: v for k, v in params.items() if not v.is_meta}, opset)

    c._jit_pass_onnx_deduplicate_initializers = lambda graph, params, training: params
    c._jit_pass_onnx_graph_shape_type_inference = infer_with_stand_ins
    nn.Conv2d.forward = _meta_conv_forward
    try:
        yield
    finally:
        c._jit_pass_onnx_deduplicate_initializers, c._jit_pass_onnx_graph_shape_type_inference, \
            nn.Conv2d.forward = saved


def export_structure(make_module, inputs, batch, opset):
    """Traces make_module() on the meta device. `inputs`: [(name, shape without batch, torch dtype)]; the first
    dim of every input is the batch (symbolic "N" when batch is None). Returns the ModelProto (no initializers)."""
    with _no_init():
        module = make_module()
    module.train()
    trace_batch = batch or 2
    args = tuple(torch.empty((trace_batch,) + tuple(shape), dtype=dt, device="meta") for _, shape, dt in inputs)
    names = [n for n, _, _ in inputs]
    dynamic = None if batch else {n: {0: "N"} for n in names}
    buf = io.BytesIO()
    with _meta_export_patches():
        torch.onnx.export(module, args, buf, input_names=names, output_names=["loss"], dynamic_axes=dynamic,
                          export_params=False, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=opset)
    return onnx.load_from_string(buf.getvalue())


_DTYPES = {torch.float32: onnx.TensorProto.FLOAT, torch.int64: onnx.TensorProto.INT64}
_ELEM = {torch.float32: 4, torch.int64: 8}


def _nbytes(shape, dt):
    n = 1
    for d in shape:
        n *= int(d)
    return n * _ELEM[dt]


def param_specs(make_module):
    """(name, shape, torch dtype) of every parameter and buffer, without allocating them."""
    with _no_init():
        module = make_module()
    return [(k, tuple(v.shape), v.dtype) for k, v in module.state_dict().items()]


@contextlib.contextmanager
def _no_init():
    """Builds modules with parameters on the meta device (torch 1.13 has no `with torch.device`)."""
    orig = nn.Module.register_parameter, nn.Module.register_buffer

    def reg_param(self, name, param):
        if param is not None and not param.is_meta:
            param = nn.Parameter(param.to("meta"), param.requires_grad)
        return orig[0](self, name, param)

    def reg_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not tensor.is_meta:
            tensor = tensor.to("meta")
        return orig[1](self, name, tensor, persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = reg_param, reg_buffer
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = orig


def attach_initializers(model, specs, weights, data_name, values=None):
    """Turns the graph inputs named in `specs` into initializers (see the module doc for `weights`), in graph-input
    order. Returns (params, data_bytes, names): how many values they hold, the length the external data file must
    have, and their names in file order."""
    by_name = {n: (shape, dt) for n, shape, dt in specs}
    g = model.graph
    keep = [i for i in g.input if i.name not in by_name]
    used = [i.name for i in g.input if i.name in by_name]
    del g.input[:]
    g.input.extend(keep)
    offset, total = 0, 0
    for name in used:
        shape, dt = by_name[name]
        total += _nbytes(shape, dt) // _ELEM[dt]
        if weights == "inline":
            t = numpy_helper.from_array(values[name].detach().numpy(), name)
        else:
            t = onnx.TensorProto(name=name, data_type=_DTYPES[dt], dims=list(shape))
            nbytes = _nbytes(shape, dt)
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            offset = (offset + nbytes + ALIGN - 1) // ALIGN * ALIGN
        g.initializer.append(t)
    return total, offset, used


def write_external(path, specs, used_names, weights, values=None):
    """Writes the external data file for `weights` "external" (values) or "sparse" (truncate to length)."""
    by_name = {n: (shape, dt) for n, shape, dt in specs}
    with open(path, "wb") as f:
        offset = 0
        for name in used_names:
            shape, dt = by_name[name]
            nbytes = _nbytes(shape, dt)
            if weights == "external":
                f.seek(offset)
                f.write(values[name].detach().numpy().tobytes())
            offset = (offset + nbytes + ALIGN - 1) // ALIGN * ALIGN
        f.truncate(offset)
