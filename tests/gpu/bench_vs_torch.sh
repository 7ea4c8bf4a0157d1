#!/bin/bash
# Cleave against torch eager on one GPU at real sizes: ResNet-50 at 224x224, batch 64, a BERT-base-like encoder
# (12 layers, width 768, 12 heads, 128 tokens, batch 32; models/zoo/generate.py's transformer bert-base) and a
# GPT-2-small-like decoder (the same sizes, causal, vocabulary 50257, batch 16: generate.py's decoder gpt2-small),
# trained by
# SGD (lr 0.01) on random inputs. Per model and precision: the 1-rank bundle's median step (CLEAVE_PROFILE, after a
# warm-up step; CUDA graphs as the run decides), torch's (tests/gpu/bench_torch.py, same GPU), their ratio, samples/s,
# and memory (Cleave: the arena codegen planned, manifest.json; torch: peak allocated). bf16 is torch.autocast on
# torch's side and --precision bf16 on Cleave's (autocast's rounding; tensors in float32, GEMMs and convolutions on
# bf16 tensor cores; the bf16 bundle runs again with CLEAVE_LOW_MATH=tf32, or each of BENCH_LOW_MATH's values).
# Usage: tests/gpu/bench_vs_torch.sh BUILD_DIR [build|run|all]   (build: models, weights, data and bundles, no GPU
#   needed; run: the timings). The models are BUILD_DIR/gpu_models/{resnet50,bert,gpt2}.onnx when there (tests/gpu/
#   prebuilt.sh pack exports them: graphs only, weights filled here by fill_weights.py), else exported with Debian's
#   torch. PYTHON (default python3) must have torch with CUDA for the run phase, numpy and onnx for the build.
#   BENCH_MODELS (default "resnet50 bert gpt2") and BENCH_PRECISIONS (default "fp32 tf32 bf16") pick a subset;
#   PROFILE_DIR: also profile each bundle statement by statement (tests/gpu/profile_top.py prints where its step goes;
#   PROFILE_PRECISIONS picks which).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$1" && pwd)
phase=${2:-all}
PY=${PYTHON:-python3}
WORK=${BENCH_DIR:-$BUILD/bench_vs_torch}
archs=${CUDA_ARCHS:-90}
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# name family variant batch
models=$(awk -v want="${BENCH_MODELS:-resnet50 bert gpt2}" \
  'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) ok[w[i]] = 1 } ok[$1]' <<< "resnet50 resnet 50 64
bert transformer bert-base 32
gpt2 decoder gpt2-small 16")
precisions=${BENCH_PRECISIONS:-fp32 tf32 bf16}

build_model() {
  local name=$1 family=$2 variant=$3 batch=$4
  local m=$WORK/$name
  mkdir -p "$m"
  if [ -f "$BUILD/gpu_models/$name.onnx" ]; then
    cp "$BUILD/gpu_models/$name.onnx" "$m/$name.onnx"
  else
    /usr/bin/python3 "$SRC/models/zoo/generate.py" --family "$family" --variant "$variant" --batch "$batch" \
      --weights none -o "$m/$name.onnx" 2> /dev/null
  fi
  "$PY" "$SRC/tests/gpu/fill_weights.py" "$m/$name.onnx" > /dev/null
  "$PY" - "$m" "$family" "$batch" <<'PY'
import sys
import numpy as np
out, family, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(0)
n = 3 * batch  # the sample stream wraps around
if family == "resnet":
    np.save(f"{out}/x.npy", rng.standard_normal((n, 3, 224, 224), dtype=np.float32))
    np.save(f"{out}/y.npy", rng.integers(0, 1000, n).astype(np.int64))
else:  # token ids and labels over the vocabulary (BERT's, GPT-2's)
    vocab = 50257 if family == "decoder" else 30522
    for k in ("x", "y"):
        np.save(f"{out}/{k}.npy", rng.integers(0, vocab, (n, 128)).astype(np.int64))
PY
  for p in $precisions; do
    local b=$m/bundle_$p
    "$BUILD/tools/cleave" compile "$m/$name.onnx" --batch "$batch" --optimizer sgd --lr 0.01 --backend cuda \
      --precision "$p" -o "$b" 2> "$m/compile_$p.log"
    cmake -S "$b" -B "$b/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLEAVE_RUNTIME_DIR="$BUILD/runtime" \
      "-DCMAKE_CUDA_ARCHITECTURES=$archs" > /dev/null
    ninja -C "$b/build" > "$m/build_$p.log" 2>&1 ||
      { echo "bench: $name $p: bundle build failed (see $m/build_$p.log)"; return 1; }
  done
}

if [ "$phase" = build ] || [ "$phase" = all ]; then
  t0=$(date +%s)
  pids=()
  while read -r name family variant batch <&3; do
    build_model "$name" "$family" "$variant" "$batch" &
    pids+=($!)
  done 3<<< "$models"
  for p in "${pids[@]}"; do wait "$p"; done
  echo "bench: models, data and bundles built in $(( $(date +%s) - t0 )) s"
fi

if [ "$phase" = run ] || [ "$phase" = all ]; then
  step_ms() { sed -n 's/.*profile: step median \([0-9.e+-]*\) s.*/\1/p' "$1" | awk '{printf "%.2f", $1 * 1000}'; }
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  printf '%-9s %5s %-5s %12s %12s %8s %12s %12s %10s %10s %s\n' model batch prec "cleave ms" "torch ms" "ratio" \
    "cleave smp/s" "torch smp/s" "cleave MB" "torch MB" "graphs"
  # (The models come on descriptor 3: mpirun reads standard input.)
  while read -r name family variant batch <&3; do
    m=$WORK/$name
    for p in $precisions; do
      b=$m/bundle_$p
      CLEAVE_PROFILE=$m/prof_$p "$b/launch/mpirun.sh" "$b/build" --steps 12 x="$m/x.npy" y="$m/y.npy" \
        > "$m/run_$p.txt" 2> "$m/run_$p.err" < /dev/null ||
        { echo "bench: $name $p: the Cleave run failed:"; grep -h '^cleave' "$m/run_$p.err" | head -3; }
      c_ms=$(step_ms "$m/run_$p.err")
      grep -q "CUDA graphs: step" "$m/run_$p.err" && graphs=on || graphs=off
      if [ -z "$c_ms" ]; then
        graphs="off (failed on)"
        # Whether it fails without graphs too.
        CLEAVE_PROFILE=$m/prof_$p "$b/launch/mpirun.sh" "$b/build" --steps 12 --cuda-graphs off x="$m/x.npy" \
          y="$m/y.npy" > "$m/run_$p.txt" 2> "$m/run_eager_$p.err" < /dev/null ||
          { echo "bench: $name $p: without CUDA graphs too:"; grep -h '^cleave' "$m/run_eager_$p.err" | head -3; }
        c_ms=$(step_ms "$m/run_eager_$p.err")
        [ -n "$c_ms" ] || c_ms="fail"
      fi
      c_mb=$("$PY" -c "import json, sys; m = json.load(open(sys.argv[1]))
print(round(m['per_rank'][0]['peak_memory_bytes'] / 2**20))" "$b/manifest.json" 2> /dev/null || echo "?")
      t_line=$("$PY" "$SRC/tests/gpu/bench_torch.py" "$SRC" "$family" "$variant" "$batch" "$p" 2>&1 | tail -1 || true)
      t_ms=$(echo "$t_line" | awk '$3 == "step_ms" {print $4}')
      t_mb=$(echo "$t_line" | awk '$3 == "step_ms" {print $6}')
      [ -n "$t_ms" ] || { t_ms="fail"; echo "bench: torch $name $p: $t_line"; }
      ratio=$(awk -v a="$c_ms" -v b="$t_ms" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
      )
      c_sps=$(awk -v a="$c_ms" -v n="$batch" 'BEGIN { if (a + 0 > 0) printf "%.0f", n * 1000 / a; else print "-" }')
      t_sps=$(awk -v a="$t_ms" -v n="$batch" 'BEGIN { if (a + 0 > 0) printf "%.0f", n * 1000 / a; else print "-" }')
      printf '%-9s %5d %-5s %12s %12s %8s %12s %12s %10s %10s %s\n' "$name" "$batch" "$p" "$c_ms" "$t_ms" "$ratio" \
        "$c_sps" "$t_sps" "$c_mb" "$t_mb" "$graphs"
    done
    for p in $precisions; do echo "  $name $p last loss: $(tail -1 "$m/run_$p.txt" 2> /dev/null)"; done
    # bf16's GEMMs and convolutions on other tensor cores (runtime/cuda: CLEAVE_LOW_MATH), the same bundle.
    if [[ " $precisions " == *" bf16 "* ]]; then
      for lm in ${BENCH_LOW_MATH-tf32}; do
        b=$m/bundle_bf16
        CLEAVE_LOW_MATH=$lm CLEAVE_PROFILE=$m/prof_bf16_$lm "$b/launch/mpirun.sh" "$b/build" --steps 12 \
          x="$m/x.npy" y="$m/y.npy" > "$m/run_bf16_$lm.txt" 2> "$m/run_bf16_$lm.err" < /dev/null || true
        echo "  $name bf16 with CLEAVE_LOW_MATH=$lm: $(step_ms "$m/run_bf16_$lm.err") ms/step" \
          "(last: $(tail -1 "$m/run_bf16_$lm.txt" 2> /dev/null))"
      done
    fi
    # Where the steps go: each statement timed (without CUDA graphs), the sites summed by op type.
    if [ -n "${PROFILE_DIR:-}" ]; then
      mkdir -p "$PROFILE_DIR"
      for p in ${PROFILE_PRECISIONS:-$precisions}; do
        b=$m/bundle_$p
        CLEAVE_PROFILE=$PROFILE_DIR/${name}_$p "$b/launch/mpirun.sh" "$b/build" --steps 4 --cuda-graphs off \
          x="$m/x.npy" y="$m/y.npy" > /dev/null 2>&1 < /dev/null &&
          "$PY" "$SRC/tests/gpu/profile_top.py" "$PROFILE_DIR/${name}_$p.rank_0.json" 12 ||
          echo "bench: $name $p: the profiled run failed"
      done
    fi
  done 3<<< "$models"
fi
