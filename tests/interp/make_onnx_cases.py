#!/usr/bin/python3
"""Copies the inputs and expected outputs of a few ONNX node tests (ONNX's own conformance data) into the
reference format of tests/interp, so test_interp checks kernels against ONNX without needing the importer.

Run: /usr/bin/python3 tests/interp/make_onnx_cases.py > tests/interp/onnx_cases.txt
Lines are `onnx.<test>.<tensor name> dims values...` (dims comma-separated, "-" for a scalar).
"""
import glob
import os

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = "/usr/share/libonnx-testdata/data/node"
TESTS = [
    "test_adam", "test_adam_multiple", "test_momentum", "test_nesterov_momentum", "test_momentum_multiple",
    "test_adagrad", "test_adagrad_multiple", "test_batchnorm_epsilon_training_mode",
    "test_maxpool_with_argmax_2d_precomputed_strides", "test_maxpool_with_argmax_2d_precomputed_pads",
    "test_gather_negative_indices", "test_slice_neg_steps", "test_sce_mean_weight_ii_4d_log_prob",
    "test_nllloss_NCd1d2d3_none_no_weight_negative_ii", "test_averagepool_2d_ceil", "test_maxpool_2d_ceil",
    "test_maxpool_2d_dilations", "test_averagepool_2d_pads_count_include_pad", "test_batchnorm_epsilon",
    "test_gemm_all_attributes", "test_gemm_default_scalar_bias", "test_pow_types_float32_int64",
    "test_pow_types_int64_float32", "test_pow_types_int64_int64",
]

for test in TESTS:
    model = onnx.load(os.path.join(ROOT, test, "model.onnx"))
    names = [i.name for i in model.graph.input] + [o.name for o in model.graph.output]
    files = sorted(glob.glob(os.path.join(ROOT, test, "test_data_set_0", "input_*.pb")))
    files += sorted(glob.glob(os.path.join(ROOT, test, "test_data_set_0", "output_*.pb")))
    assert len(files) == len(names), test
    for name, path in zip(names, files):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        a = numpy_helper.to_array(t).astype(np.float64)
        dims = ",".join(str(d) for d in a.shape) if a.ndim else "-"
        print(f"onnx.{test}.{name} {dims} " + " ".join(repr(float(v)) for v in a.ravel()))
