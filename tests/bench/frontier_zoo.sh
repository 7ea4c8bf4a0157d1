#!/usr/bin/env bash
# Benchmark (on demand, not in CI): the frontier planner (planner/search/frontier.h) at 16 devices of v100-2x8 on
# TensorOpt's models: WResNet-50-4 (the zoo's WResNet with TensorOpt's depth 50 and width 4) and the Transformer
# (`--variant tensoropt`), shapes only (generate.py --weights none). Per model: the load time (import + autodiff)
# and the frontier search time (wall: cost graph, FT, re-scoring the candidates, as `cleave plan` reports it on
# stderr; targets 60 s and 10 s after TensorOpt's Table 3, 1,292 s and 201 s), the frontier's points (predicted
# step seconds, peak bytes per device: estimate_cost), and each baseline planner's point with "DOMINATES" (it is at least as good in both and better in one than some frontier
# point: a failure of the frontier, exit 1), "dominated" (a frontier point is at least as good in both) or "beside"
# (neither: the frontier does not reach that far along the other axis).
# Usage: tests/bench/frontier_zoo.sh CLEAVE_BINARY SOURCE_DIR [WORK_DIR]
# Other models: ZOO_MODELS="family:variant:batch ..."; BASELINES (default "data owt tofu icml18 allrow spartan
# equalchop"); DEVICES (16); TOPOLOGY (v100-2x8).
set -u
cleave=$1
src=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
models=${ZOO_MODELS:-"wresnet:50-4:32 transformer:tensoropt:32"}
baselines=${BASELINES:-"data owt tofu icml18 allrow spartan equalchop"}
devices=${DEVICES:-16}
topology=${TOPOLOGY:-v100-2x8}
status=0
for spec in $models; do
  IFS=: read -r family variant batch <<<"$spec"
  name="$family-$variant-b$batch"
  onnx="$work/$name.onnx"
  if [ ! -f "$onnx" ] && ! /usr/bin/python3 "$src/models/zoo/generate.py" --family "$family" --variant "$variant" \
      --batch "$batch" --weights none -o "$onnx" >"$work/$name.gen.log" 2>&1; then
    echo "$name: generator failed: $(grep -m1 -i error "$work/$name.gen.log")"
    status=1
    continue
  fi
  log="$work/$name.frontier.log"
  if ! "$cleave" plan "$onnx" --planner frontier --devices "$devices" --topology "$topology" \
      --frontier-table "$work/$name.frontier.txt" --frontier-svg "$work/$name.frontier.svg" \
      --frontier-baselines "$(echo $baselines | tr ' ' ',')" -o "$work/$name.frontier.plan" 2>"$log"; then
    echo "$name: frontier failed: $(grep -m1 '^error' "$log")"
    status=1
    continue
  fi
  load=$(sed -n 's/.*(load \([0-9.]*\) s, .*/\1/p' "$log")
  search=$(sed -n 's/^frontier over .*, search \([0-9.]*\) s.*/\1/p' "$log")
  echo "== $name over $devices devices of $topology: load $load s, frontier search $search s (baselines not included)"
  grep '^# frontier\|^# eliminations' "$work/$name.frontier.txt"
  printf '%-24s %14s %18s  %s\n' point step_seconds peak_memory_bytes status
  grep -v '^#' "$work/$name.frontier.txt" | while read -r i step peak _; do
    printf '%-24s %14s %18s  %s\n' "frontier[$i]" "$step" "$peak" ""
  done
  while read -r _ _ b step peak verdict; do
    [ "$verdict" = "dominates-a-frontier-point" ] && verdict=DOMINATES
    printf '%-24s %14s %18s  %s\n' "$b" "$step" "$peak" "$verdict"
  done < <(grep "^# baseline " "$work/$name.frontier.txt")
  grep -q 'dominates-a-frontier-point' "$work/$name.frontier.txt" && status=1
  grep '^# baseline-model\|^# chosen' "$work/$name.frontier.txt"
done
exit $status
