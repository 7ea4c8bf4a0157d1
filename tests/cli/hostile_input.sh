#!/usr/bin/env bash
# Hostile input (issue 25): models, plans, data files and output paths that crashed Cleave, printed raw or several
# lines, or were silently accepted. Every case must print exactly one line on stderr, starting "error: " and naming the
# problem, exit 1 (2 for unsupported ops), print nothing on stdout, and leave no output file behind.
# Usage: hostile_input.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/cli/make_bad_models.py" "$work/models" >/dev/null || { echo "cannot generate bad models"; exit 1; }
/usr/bin/python3 "$src/tests/cli/make_hostile_models.py" "$work/hostile" || { echo "cannot generate hostile models"; exit 1; }
cd "$work" || exit 1
/usr/bin/python3 - <<'PY' || { echo "cannot generate data files"; exit 1; }
import numpy as np
np.save("x.npy", np.ones((2, 4), np.float32))
np.save("y.npy", np.zeros(2, np.int64))
np.save("x_bool.npy", np.ones((2, 4), bool))
np.save("x_uint8.npy", np.ones((2, 4), np.uint8))
np.save("x_fortran.npy", np.asfortranarray(np.arange(8, dtype=np.float32).reshape(2, 4)))
np.save("y_float.npy", np.array([3.5, 1.0]))
np.save("y_three.npy", np.zeros(3, np.int64))
data = open("x.npy", "rb").read()
open("x_shape.npy", "wb").write(data.replace(b"(2, 4)", b"(2, q)"))
PY
mkdir -p "$work/a_directory.npy"
failures=0

# expect NAME EXIT_CODE FRAGMENT -- cleave args...
expect() {
  local name=$1 want_code=$2 fragment=$3
  shift 4
  rm -rf "$work/out.onnx" "$work/out.plan" "$work/bundle"
  "$cleave" "$@" >"$work/stdout" 2>"$work/stderr"
  local code=$?
  local lines
  lines=$(wc -l <"$work/stderr")
  local problem=""
  if [ "$code" -ne "$want_code" ]; then problem="exit code $code, want $want_code"
  elif [ "$lines" -ne 1 ]; then problem="$lines lines on stderr, want 1"
  elif ! grep -q "^error: " "$work/stderr"; then problem="stderr does not start with 'error: '"
  elif ! grep -qF -- "$fragment" "$work/stderr"; then problem="stderr lacks '$fragment'"
  elif [ -s "$work/stdout" ]; then problem="something was printed on stdout"
  elif [ -e "$work/out.onnx" ] || [ -e "$work/out.plan" ] || [ -e "$work/bundle" ]; then problem="an output was left behind"
  elif ls -a "$work" | grep -q '\.tmp'; then problem="a temporary file was left behind"
  fi
  if [ -n "$problem" ]; then
    echo "FAIL $name: $problem"
    head -c 600 "$work/stderr" | sed 's/^/    stderr: /'
    failures=$((failures + 1))
  else
    echo "ok   $name: $(head -c 300 "$work/stderr")"
  fi
}

# Models: checked before ONNX's shape inference (frontend/model_checks.h), by every command alike.
h=$work/hostile
expect conv_stride0 1 'node "c" (Conv, opset 15): attribute "strides" must be positive, got [1,0]' -- ir "$h/conv_stride0.onnx"
expect maxpool_stride0 1 'node "p" (MaxPool, opset 15): attribute "strides" must be positive, got [0,1]' -- plan "$h/maxpool_stride0.onnx" -o "$work/out.plan"
expect conv_dilation_neg 1 'attribute "dilations" must be positive, got [-1,1]' -- ir "$h/conv_dilation_neg.onnx"
expect avgpool_kernel0 1 '(AveragePool, opset 15): attribute "kernel_shape" must be positive, got [2,0]' -- ir "$h/avgpool_kernel0.onnx"
expect conv_pads_neg 1 'attribute "pads" must not be negative, got [0,-1,0,0]' -- ir "$h/conv_pads_neg.onnx"
expect int64_raw_short 1 'initializer "k": raw_data has 8 bytes, shape [2] of i64 needs 16' -- ir "$h/reshape_shape_short.onnx"
expect int64_raw_long 1 'initializer "k": raw_data has 24 bytes, shape [2] of i64 needs 16' -- plan "$h/slice_axes_long.onnx" -o "$work/out.plan"
expect conv_valid_pads 1 'attribute "auto_pad" is VALID and explicit "pads" [1,1,1,1] are given too' -- ir "$h/conv_valid_pads.onnx"
expect optype_newline 2 '"r" (Re\nlu, ai.onnx, opset 15)' -- ir "$h/optype_newline.onnx"
expect name_newline 1 'node "a\nb" (Relu): names and op types must not contain control characters' -- ir "$h/name_newline.onnx"
expect gemm_transB2 1 'node "fc" (Gemm, opset 15): attribute "transB" must be 0 or 1, got 2' -- ir "$h/gemm_transB2.onnx"
expect gemm_transA_neg 1 'attribute "transA" must be 0 or 1, got -1' -- ir "$h/gemm_transA_neg.onnx"
expect gemm_alpha_nan 1 'attribute "alpha" must be finite, got nan' -- ir "$h/gemm_alpha_nan.onnx"
expect bn_eps_neg 1 '(BatchNormalization, opset 15): attribute "epsilon" must be >= 0, got -1' -- ir "$h/bn_eps_neg.onnx"
expect bn_training_mode7 1 'attribute "training_mode" must be 0 or 1, got 7' -- ir "$h/bn_training_mode7.onnx"
expect maxpool_ceil5 1 'attribute "ceil_mode" must be 0 or 1, got 5' -- ir "$h/maxpool_ceil5.onnx"
expect unsorted 1 'node "e" (Exp, opset 15): input "b" is produced by a later node "t" (nodes must be in topological order)' -- ir "$h/unsorted.onnx"
expect two_opsets 1 'imports the default (ai.onnx) opset twice (versions 15 and 13)' -- ir "$h/two_opsets.onnx"
# `cleave plan` reads no weights, yet refuses what `cleave ir` refuses.
for cmd in ir plan; do
  expect "float_raw_short_$cmd" 1 'initializer "w": raw_data has 44 bytes, shape [3,4] of f32 needs 48' -- $cmd "$h/float_raw_short.onnx" --batch 2
done

# Plans: the header, garbage lines, and explain refusing exactly what compile refuses.
m=$work/models
"$cleave" plan "$m/good.onnx" --batch 2 --devices 2 -o "$work/good2.plan" 2>/dev/null || { echo "cannot plan good.onnx"; exit 1; }
sed 's/^plan devices=2$/plan devices=2.0/' "$work/good2.plan" >"$work/devices_float.plan"
sed 's/^plan devices=2$/plan devices=2 extra/' "$work/good2.plan" >"$work/devices_extra.plan"
/usr/bin/python3 -c "open('$work/garbage.plan', 'w').write('plan devices=2\n' + 'x' * (1 << 20) + '\n')"
# Produced tensors' lines left out (compile completes them), and the update of w moved off w's devices.
grep -v '^tensor \(logits\|loss \|loss.log_prob\|w.grad\|w.next\|logits.grad\) ' "$work/good2.plan" >"$work/sparse.plan"
sed 's/^op w.update .*/op w.update devices=[0] mesh=[1] [-]/' "$work/sparse.plan" >"$work/update_elsewhere.plan"
for cmd in explain compile; do
  out=()
  [ "$cmd" = compile ] && out=(-o "$work/bundle")
  expect "devices_float_$cmd" 1 'devices_float.plan:1: unexpected text near ".0"' -- $cmd "$m/good.onnx" --batch 2 --plan "$work/devices_float.plan" "${out[@]}"
  expect "devices_extra_$cmd" 1 'devices_extra.plan:1: unexpected text near "extra"' -- $cmd "$m/good.onnx" --batch 2 --plan "$work/devices_extra.plan" "${out[@]}"
  expect "garbage_line_$cmd" 1 "garbage.plan:2: unknown line kind \"$(printf 'x%.0s' $(seq 80))...\"" -- $cmd "$m/good.onnx" --batch 2 --plan "$work/garbage.plan" "${out[@]}"
  expect "update_elsewhere_$cmd" 1 'the update of "w" is not held where the tensor lives' -- $cmd "$m/good.onnx" --batch 2 --plan "$work/update_elsewhere.plan" "${out[@]}"
done
expect plan_is_directory 1 "$work/a_directory.npy: is a directory, not a plan file" -- explain "$m/good.onnx" --batch 2 --plan "$work/a_directory.npy"
if ! "$cleave" explain "$m/good.onnx" --batch 2 --plan "$work/sparse.plan" >/dev/null 2>"$work/stderr"; then
  echo "FAIL explain_completes_plan: $(cat "$work/stderr")"
  failures=$((failures + 1))
else
  echo "ok   explain_completes_plan"
fi

# Data files: one reader for the CLI and the ranks (runtime/common/npy_format.h); eval and test refuse up front.
d="--batch 2 --save-model $work/out.onnx"
expect npy_shape_not_numeric 1 "x_shape.npy: bad shape (2, q) in the .npy header" -- eval "$m/good.onnx" --data "x=$work/x_shape.npy,y=$work/y.npy" $d
expect npy_directory 1 "a_directory.npy: is a directory, not a .npy file" -- eval "$m/good.onnx" --data "x=$work/a_directory.npy,y=$work/y.npy" $d
expect npy_bool 1 "x_bool.npy: unsupported .npy dtype '|b1'" -- eval "$m/good.onnx" --data "x=$work/x_bool.npy,y=$work/y.npy" $d
expect npy_uint8 1 "x_uint8.npy: unsupported .npy dtype '|u1'" -- eval "$m/good.onnx" --data "x=$work/x_uint8.npy,y=$work/y.npy" $d
expect npy_fortran 1 "x_fortran.npy: fortran_order=True arrays are not supported" -- eval "$m/good.onnx" --data "x=$work/x_fortran.npy,y=$work/y.npy" $d
expect npy_float_labels 1 "y_float.npy: labels and indices must be an integer array, got dtype '<f8'" -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y_float.npy" $d
expect npy_float_labels_test 1 "y_float.npy: labels and indices must be an integer array" -- test "$m/good.onnx" --data "x=$work/x.npy,y=$work/y_float.npy" --batch 2
expect npy_sample_counts 1 '--data: "x" has 2 samples' -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y_three.npy" $d
expect npy_sample_counts_test 1 'has 3 (' -- test "$m/good.onnx" --data "x=$work/x.npy,y=$work/y_three.npy" --batch 2
# cleave run checks the data with the same reader before it builds anything.
"$cleave" compile "$m/good.onnx" --batch 2 --devices 2 -o "$work/b2" 2>/dev/null || { echo "cannot compile good.onnx"; exit 1; }
expect run_npy_bool 1 "x_bool.npy: unsupported .npy dtype '|b1'" -- run "$work/b2" --data "x=$work/x_bool.npy,y=$work/y.npy"
expect run_npy_fortran 1 "x_fortran.npy: fortran_order=True arrays are not supported" -- run "$work/b2" --data "x=$work/x_fortran.npy,y=$work/y.npy"
expect run_npy_float_labels 1 "y_float.npy: labels and indices must be an integer array" -- run "$work/b2" --data "x=$work/x.npy,y=$work/y_float.npy"
expect run_npy_shape 1 "x_shape.npy: bad shape (2, q)" -- run "$work/b2" --data "x=$work/x_shape.npy,y=$work/y.npy"
expect run_npy_directory 1 "a_directory.npy: is a directory" -- run "$work/b2" --data "x=$work/a_directory.npy,y=$work/y.npy"
expect run_sample_counts 1 "every input needs the same number" -- run "$work/b2" --data "x=$work/x.npy,y=$work/y_three.npy"
[ -e "$work/b2/build" ] && { echo "FAIL run_checks_first: cleave run configured the bundle before refusing its data"; failures=$((failures + 1)); }

# Outputs: only a regular file (or nothing) is ever replaced (ir/file_io.h).
expect save_model_device 1 "--save-model: /dev/full exists and is not a regular file; refusing to replace it" -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y.npy" --batch 2 --save-model /dev/full
expect run_save_model_device 1 "--save-model: /dev/full exists and is not a regular file" -- run "$work/b2" --data "x=$work/x.npy,y=$work/y.npy" --save-model /dev/full
[ -c /dev/full ] || { echo "FAIL /dev/full is no longer a character device"; failures=$((failures + 1)); }
mkfifo "$work/fifo"
expect plan_to_fifo 1 "-o: $work/fifo exists and is not a regular file" -- plan "$m/good.onnx" --batch 2 -o "$work/fifo"
mkdir -p "$work/not_a_bundle" && touch "$work/not_a_bundle/keep.txt"
expect compile_over_directory 1 "is a directory without manifest.json; refusing to replace it" -- compile "$m/good.onnx" --batch 2 -o "$work/not_a_bundle"
[ -e "$work/not_a_bundle/keep.txt" ] || { echo "FAIL compile replaced a directory that is not a bundle"; failures=$((failures + 1)); }

echo "$failures failures"
[ "$failures" -eq 0 ]
