#!/usr/bin/env bash
# Planning without the weights: `cleave plan` works on a model whose external data file is absent; `cleave compile`
# then fails with one error line naming the file, before writing anything; with the file present (real values or a
# sparse file), compile reads it, and the weight shards equal those of the same model with inline initializers.
# Usage: external_weights.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

mkdir -p "$work/none" "$work/ext" "$work/inline" "$work/sparse"
# One python process for the four (importing torch is the slow part).
/usr/bin/python3 - "$src" "$work" 2>/dev/null <<'PY' || { echo "cannot generate the models"; exit 1; }
import sys
sys.path.insert(0, sys.argv[1] + "/models/zoo")
import generate
for d, w in (("none", "none"), ("ext", "external"), ("inline", "inline"), ("sparse", "sparse")):
    generate.generate("resnet", "tiny", f"{sys.argv[2]}/{d}/m.onnx", batch=4, weights=w)
PY
[ -e "$work/none/m.data" ] && fail "--weights none wrote a data file"

# 1. plan without the data file
if "$cleave" plan "$work/none/m.onnx" --planner data --devices 2 >"$work/none.plan" 2>"$work/err"; then
  cmp -s "$work/none.plan" <("$cleave" plan "$work/inline/m.onnx" --planner data --devices 2 2>/dev/null) ||
    fail "the plan without weights differs from the plan of the inline model"
  echo "ok   plan without the data file: $(wc -l <"$work/none.plan") plan lines"
else
  fail "plan without the data file: $(cat "$work/err")"
fi

# 2. compile without it: one error line naming the file, nothing written
expect_compile_error() {
  local name=$1 model=$2 fragment=$3
  rm -rf "$work/bundle"
  "$cleave" compile "$model" --planner data --devices 2 -o "$work/bundle" >"$work/out" 2>"$work/err"
  local code=$? problem=""
  if [ "$code" -eq 0 ]; then problem="exit code 0"
  elif [ "$(wc -l <"$work/err")" -ne 1 ]; then problem="$(wc -l <"$work/err") lines on stderr"
  elif ! grep -q "^error: .*external data missing: " "$work/err"; then problem="unexpected message"
  elif ! grep -qF -- "$fragment" "$work/err"; then problem="stderr lacks '$fragment'"
  elif ls "$work" | grep -q "^bundle"; then problem="a bundle or temporary directory was left behind"
  fi
  if [ -n "$problem" ]; then fail "$name: $problem: $(cat "$work/err")"; else echo "ok   $name: $(cat "$work/err")"; fi
}
expect_compile_error "compile without the data file" "$work/none/m.onnx" "$work/none/m.data (needs "
cp -r "$work/ext" "$work/short"
truncate -s 1000 "$work/short/m.data"
expect_compile_error "compile with a short data file" "$work/short/m.onnx" "has 1000 bytes"

# 3. compile with the data: same weight shards as the inline model; a sparse file compiles (zeros)
for v in ext inline sparse; do
  "$cleave" compile "$work/$v/m.onnx" --planner data --devices 2 -o "$work/b_$v" 2>"$work/err" ||
    fail "compile $v: $(cat "$work/err")"
done
# (A data plan's ranks hold the same shards: one file, weights/ranks.bin, for both.)
cmp -s "$work/b_ext/weights/ranks.bin" "$work/b_inline/weights/ranks.bin" ||
  fail "weights from external data differ from the inline model's"
[ -s "$work/b_sparse/weights/ranks.bin" ] || fail "sparse model: no weights written"
[ "$failures" -eq 0 ] && echo "ok   compile reads external data: rank weights equal the inline model's"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "external_weights: all cases pass"
