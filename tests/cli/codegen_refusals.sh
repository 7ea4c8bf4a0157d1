#!/usr/bin/env bash
# What the interpreter runs but code generation cannot: `cleave compile` refuses it with one `error: ` line naming the
# tensor or node, exits non-zero and writes no bundle: a float16 tensor (the runtime has f32/f64/i64/i32/bool buffers
# only) and a model mixing float32 and float64 tensors (a bundle computes in one floating type), which `cleave eval`
# runs; and a float64 model compiled for the cuda backend, or with a --precision for float32 models.
# Usage: codegen_refusals.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" <<'PY' || { echo "cannot generate models"; exit 1; }
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]


def save(nodes, w_cols, name, x_type=TensorProto.FLOAT, w_type=np.float32):
    # x [2,4] -> nodes -> "h" [2,w_cols] -> Gemm -> SoftmaxCrossEntropyLoss with labels y.
    w = numpy_helper.from_array(np.linspace(-1, 1, 3 * w_cols, dtype=w_type).reshape(3, w_cols), "w")
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")
    nodes = nodes + [helper.make_node("Gemm", ["h", "w"], ["logits"], name="fc", transB=1),
                     helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"], name="sce")]
    loss_type = TensorProto.DOUBLE if w_type == np.float64 else TensorProto.FLOAT
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", x_type, [2, 4]),
                                            helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("loss", loss_type, [])], [w, pads])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    with open(f"{out}/{name}.onnx", "wb") as f:
        f.write(model.SerializeToString())


save([helper.make_node("Cast", ["x"], ["x_half"], name="to_half", to=TensorProto.FLOAT16),
      helper.make_node("Cast", ["x_half"], ["h"], name="to_float", to=TensorProto.FLOAT)], 4, "half")
save([helper.make_node("Cast", ["x"], ["x_double"], name="to_double", to=TensorProto.DOUBLE),
      helper.make_node("Cast", ["x_double"], ["h"], name="to_float", to=TensorProto.FLOAT)], 4, "mixed")
save([helper.make_node("Identity", ["x"], ["h"], name="same")], 4, "double", TensorProto.DOUBLE, np.float64)
np.save(f"{out}/x.npy", np.arange(8, dtype=np.float32).reshape(2, 4) / 8)
np.save(f"{out}/y.npy", np.array([0, 2], np.int64))
PY
failures=0

# expect NAME FRAGMENT MODEL [COMMAND...]: compile (or COMMAND) must fail with exactly one stderr line,
# `error: ...FRAGMENT...`, and leave no bundle.
expect() {
  local name=$1 fragment=$2 model=$3 problem=""
  shift 3
  rm -rf "$work/bundle"
  if [ $# -eq 0 ]; then set -- compile "$model" --planner data --devices 2 -o "$work/bundle"; fi
  "$cleave" "$@" >"$work/out" 2>"$work/err"
  local code=$?
  if [ "$code" -eq 0 ]; then problem="exit code 0"
  elif [ "$(wc -l <"$work/err")" -ne 1 ]; then problem="$(wc -l <"$work/err") lines on stderr, want 1"
  elif ! grep -q "^error: " "$work/err"; then problem="stderr does not start with 'error: '"
  elif ! grep -qF -- "$fragment" "$work/err"; then problem="stderr lacks '$fragment'"
  elif [ -e "$work/bundle" ]; then problem="a bundle was left behind"
  fi
  if [ -n "$problem" ]; then
    echo "FAIL $name: $problem"
    sed 's/^/    stderr: /' "$work/err" | head -5
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
  fi
}

expect float16 'tensor "x_half" has dtype f16, which code generation does not support' "$work/half.onnx"
expect mixed_f32_f64 'tensor "w" is f32 and tensor "x_double" f64: a bundle computes in one floating type' \
  "$work/mixed.onnx"
expect f64_cuda '--backend cuda: this model is float64, and float64 bundles run on the cpu backend only' \
  "$work/double.onnx" compile "$work/double.onnx" --devices 2 --backend cuda -o "$work/bundle"
expect f64_bf16 'double.onnx: --precision bf16 applies to float32 models; this model is float64' \
  "$work/double.onnx" compile "$work/double.onnx" --devices 2 --precision bf16 -o "$work/bundle"
expect f64_loss_scale 'double.onnx: --loss-scale applies to float32 models; this model is float64' \
  "$work/double.onnx" compile "$work/double.onnx" --devices 2 --loss-scale 1024 -o "$work/bundle"

# The same models are valid: the reference interpreter trains them.
for m in half mixed; do
  if ! "$cleave" eval "$work/$m.onnx" --data "x=$work/x.npy,y=$work/y.npy" --batch 2 --steps 1 \
      --save-model "$work/$m.trained.onnx" >"$work/out" 2>"$work/err"; then
    echo "FAIL eval $m:"; sed 's/^/    /' "$work/err" | head -5
    failures=$((failures + 1))
  else
    echo "ok   eval $m"
  fi
done

echo "$failures failures"
[ "$failures" -eq 0 ]
