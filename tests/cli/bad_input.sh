#!/usr/bin/env bash
# Bad input: every case must print exactly one line on stderr, starting "error: " and naming the problem, exit
# non-zero, print nothing on stdout, and leave no output file behind.
# Usage: bad_input.sh CLEAVE_BINARY SOURCE_DIR
set -u
cleave=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$src/tests/cli/make_bad_models.py" "$work/models" || { echo "cannot generate bad models"; exit 1; }
/usr/bin/python3 -c "import numpy as np; np.save('$work/x.npy', np.ones((2,4),np.float32)); np.save('$work/y.npy', np.zeros(2,np.int64))"
failures=0

# expect NAME EXIT_CODE FRAGMENT -- cleave args...  (EXIT_CODE '*' = any non-zero)
expect() {
  local name=$1 want_code=$2 fragment=$3
  shift 4
  rm -f "$work/out.onnx"
  "$cleave" "$@" >"$work/stdout" 2>"$work/stderr"
  local code=$?
  local lines
  lines=$(wc -l <"$work/stderr")
  local problem=""
  if [ "$code" -eq 0 ]; then problem="exit code 0"
  elif [ "$want_code" != "*" ] && [ "$code" -ne "$want_code" ]; then problem="exit code $code, want $want_code"
  elif [ "$lines" -ne 1 ]; then problem="$lines lines on stderr, want 1"
  elif ! grep -q "^error: " "$work/stderr"; then problem="stderr does not start with 'error: '"
  elif ! grep -qF -- "$fragment" "$work/stderr"; then problem="stderr lacks '$fragment'"
  elif [ -s "$work/stdout" ]; then problem="something was printed on stdout"
  elif [ -e "$work/out.onnx" ]; then problem="an output file was left behind"
  fi
  if [ -n "$problem" ]; then
    echo "FAIL $name: $problem"
    sed 's/^/    stderr: /' "$work/stderr" | head -5
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/stderr")"
  fi
}

m=$work/models
data="--data x=$work/x.npy,y=$work/y.npy --batch 2 --steps 1 --save-model $work/out.onnx"
expect truncated '*' "truncated.onnx" -- eval "$m/truncated.onnx" $data
expect garbage '*' "garbage.onnx" -- eval "$m/garbage.onnx" $data
expect missing_file '*' "nothere.onnx" -- eval "$m/nothere.onnx" $data
expect unknown_op 2 '"mystery" (Foo, com.example' -- eval "$m/unknown_op.onnx" $data
expect unknown_op_lists_all 2 '"uniq" (Unique' -- eval "$m/unknown_op.onnx" $data
expect unexpandable_function 2 '2 unsupported nodes: "uniq" (Unique, ai.onnx, opset 15), "wrap" (NeedsUnique, com.example, opset 1; its function body needs Unique)' -- eval "$m/unexpandable_function.onnx" $data
expect wrong_attr_type '*' "transB" -- eval "$m/wrong_attr_type.onnx" $data
expect missing_attr '*' "axis" -- eval "$m/missing_attr.onnx" $data
expect external_outside '*' "lies outside the model's directory" -- eval "$m/external_outside.onnx" $data
expect external_missing '*' "missing.bin" -- eval "$m/external_missing.onnx" $data
expect external_short '*' 'external data file "short.bin" has 20 bytes, fewer than' -- eval "$m/external_short.onnx" $data
expect symbolic_batch '*' "--batch" -- ir "$m/symbolic_batch.onnx"
expect nonscalar_loss '*' "logits" -- eval "$m/nonscalar_loss.onnx" $data
expect duplicate_name '*' "logits" -- eval "$m/duplicate_name.onnx" $data
expect cycle '*' "cycle" -- eval "$m/loop.onnx" $data
expect overflow '*' "overflows int64" -- ir "$m/huge.onnx"
expect batch_on_fixed_model '*' '--batch 2: the model'"'"'s inputs have no symbolic dimension to take it (input "x" [4294967296,4294967296]): pass --batch 4294967296' -- eval "$m/huge.onnx" $data
expect lpnorm_p3 2 'node "norm3" (LpNormalization, opset 15): p 3 is not supported (only 1 and 2)' -- eval "$m/lpnorm_p3.onnx" $data
expect depth_to_space_mode 2 'node "d2s" (DepthToSpace, opset 15): mode "XYZ" is not supported (DCR, CRD)' -- eval "$m/depth_to_space_mode.onnx" $data
expect gru_clip 2 'node "gru" (GRU, opset 15): attribute "clip" is not supported' -- eval "$m/gru_clip.onnx" $data
expect gather_elements_axis 1 'node "gath" (GatherElements, opset 15): axis 5 is out of range for rank 2' -- eval "$m/gather_elements_axis.onnx" $data
# Flags and data files.
expect batch_axis_range 1 '--batch-axis: input "x" has 2 dims, no axis 2' -- eval "$m/good.onnx" $data --batch-axis x=2
expect batch_axis_name 1 '--batch-axis: the model has no graph input "q"' -- eval "$m/good.onnx" $data --batch-axis q=0
expect batch_axis_form 1 '--batch-axis: expected NAME=AXIS (a dim number), got "x=-1"' -- plan "$m/good.onnx" --batch-axis x=-1
expect batch_axis_twice 1 '--batch-axis: input "x" given twice' -- plan "$m/good.onnx" --batch-axis x=0,x=1
expect batch_axis_ir 1 'has no input or label "net.0.weight"' -- plan "$src/tests/fuzz/seeds/ir/mlp.ir" --batch-axis net.0.weight=0
expect bad_data_flag '*' "--data" -- eval "$m/good.onnx" --data "x" --batch 2 --save-model "$work/out.onnx"
expect missing_data '*' '"y"' -- eval "$m/good.onnx" --data "x=$work/x.npy" --batch 2 --save-model "$work/out.onnx"
expect unknown_data '*' '"z"' -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y.npy,z=$work/x.npy" --batch 2 --save-model "$work/out.onnx"
expect data_shape '*' "y.npy: array of shape [2] cannot feed input \"x\" (needs [samples,4])" -- eval "$m/good.onnx" --data "x=$work/y.npy,y=$work/y.npy" --batch 2 --save-model "$work/out.onnx"
expect bad_npy '*' "garbage.onnx" -- eval "$m/good.onnx" --data "x=$m/garbage.onnx,y=$work/y.npy" --batch 2 --save-model "$work/out.onnx"
expect wrong_batch '*' "batch" -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y.npy" --batch 3 --save-model "$work/out.onnx"
expect unknown_freeze '*' "nope" -- eval "$m/good.onnx" $data --freeze nope
expect unknown_loss '*' "nope" -- ir "$m/good.onnx" --train --loss nope
expect save_dir_missing '*' "--save-model: directory" -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y.npy" --batch 2 --save-model "$work/no/such/dir/out.onnx"
expect test_no_loss_op '*' "no SoftmaxCrossEntropyLoss or NegativeLogLikelihoodLoss op" -- test "$m/nonscalar_loss.onnx" --data "x=$work/x.npy" --batch 2
# Flag values: one line naming the flag, exit 2 (usage), like any other bad input.
expect devices_zero 2 '--devices: must be a positive integer, got "0"' -- plan "$m/good.onnx" --batch 2 --devices 0
expect batch_not_a_number 2 '--batch: must be a positive integer, got "two"' -- eval "$m/good.onnx" --data "x=$work/x.npy,y=$work/y.npy" --batch two --save-model "$work/out.onnx"
expect unknown_flag 2 "--fast" -- plan "$m/good.onnx" --batch 2 --fast
expect run_build_type 2 "--build-type: Fast not in" -- run "$work" --data "x=$work/x.npy" --build-type Fast
# cleave oracle: the device range, strategies and planners are checked before any work.
expect oracle_range_empty '*' '--devices: range "8..2" is empty' -- oracle "$m/good.onnx" --batch 2 --devices 8..2
expect oracle_range_bad '*' '--devices: "1..x" is not a device count N, a list a,b,c or a range A..B' -- oracle "$m/good.onnx" --batch 2 --devices 1..x
expect oracle_too_many '*' "--devices: 64 devices, topology k80x8 has 8" -- oracle "$m/good.onnx" --batch 2 --devices 1..64
expect oracle_strategy '*' '--strategies: unknown strategy "model"' -- oracle "$m/good.onnx" --batch 2 --strategies data,model
expect oracle_planner '*' "--planners: unknown planner" -- oracle "$m/good.onnx" --batch 2 --planners data,nope
expect oracle_plans_dir '*' "--plans-dir: $work/nodir is not a directory" -- oracle "$m/good.onnx" --batch 2 --plans-dir "$work/nodir"
expect oracle_random '*' '--planners: "random" is not a search planner' -- oracle "$m/good.onnx" --batch 2 --planners random
expect describe_unknown '*' "Nope" -- describe Nope
# Profiles (cleave profile, --profile): one line naming the file and the field; nothing written.
echo '{"format": "cleave-profile-1", "compute": {"Gemm_0": {"b=2": -1}}}' >"$work/neg.json"
echo '{"format": "cleave-profile-1", "collectives": {"all_reduce": {"2": [[8, 1e-5], [4, 2e-5]]}}}' >"$work/order.json"
echo '{"format": "cleave-profile-1", "extra": 1}' >"$work/extra.json"
echo '{"format": ' >"$work/trunc.json"
expect profile_missing '*' "$work/none.json: cannot open profile file" -- explain "$m/good.onnx" --batch 2 --profile "$work/none.json"
expect profile_negative '*' "$work/neg.json: compute.Gemm_0.b=2: must be a positive number of seconds" -- explain "$m/good.onnx" --batch 2 --profile "$work/neg.json"
expect profile_curve_order '*' "$work/order.json: collectives.all_reduce.2[1]: bytes must increase along the curve" -- plan "$m/good.onnx" --batch 2 --profile "$work/order.json"
expect profile_unknown_field '*' "$work/extra.json: extra: unknown field" -- compile "$m/good.onnx" --batch 2 --profile "$work/extra.json" -o "$work/out.onnx"
expect profile_malformed '*' "$work/trunc.json: (top level): malformed JSON" -- explain "$m/good.onnx" --batch 2 --profile "$work/trunc.json"
echo '{"format": "cleave-profile-1", "statements": {"copy": [[0, 1e-6]]}}' >"$work/stmt.json"
expect profile_statement_bytes '*' "$work/stmt.json: statements.copy[0]: bytes must be positive" -- simulate "$m/good.onnx" --batch 2 --profile "$work/stmt.json"
expect profile_simulate_missing '*' "$work/none.json: cannot open profile file" -- simulate "$m/good.onnx" --batch 2 --profile "$work/none.json"
expect profile_out_dir '*' "-o: directory $work/no/such does not exist" -- profile "$m/good.onnx" --batch 2 -o "$work/no/such/p.json"
expect profile_repeats 2 '--repeats: must be a positive integer, got "0"' -- profile "$m/good.onnx" --batch 2 --repeats 0 -o "$work/out.onnx"
expect profile_backend 2 "--backend: rocm not in {cpu,cuda}" -- profile "$m/good.onnx" --batch 2 --backend rocm -o "$work/out.onnx"
mkdir -p "$work/no_runtime"
expect profile_runtime_dir '*' "--runtime-dir $work/no_runtime: no libcleave_rt_cuda.a for --backend cuda (build cleave with CLEAVE_ENABLE_CUDA=ON)" -- profile "$m/good.onnx" --batch 2 --backend cuda --runtime-dir "$work/no_runtime" -o "$work/out.onnx"
"$cleave" plan "$m/good.onnx" --batch 2 --devices 2 -o "$work/two.plan" 2>/dev/null
expect profile_plan_devices '*' "two.plan: the plan is for 2 devices, --devices says 1" -- profile "$m/good.onnx" --batch 2 --plan "$work/two.plan" -o "$work/out.onnx"
# The frontier planner's flags (planner/search/frontier.h); the table would go to out.onnx, which must not be left behind.
expect frontier_bad_mode '*' '--mode: "fast" is not mini-time, mini-parallelism or profile' -- plan "$m/good.onnx" --batch 2 --planner frontier --mode fast --frontier-table "$work/out.onnx"
expect frontier_nothing_fits '*' "--memory-limit 1: no frontier plan over 2 devices fits" -- plan "$m/good.onnx" --batch 2 --devices 2 --planner frontier --memory-limit 1 --frontier-table "$work/out.onnx"
expect frontier_empty_range '*' '--devices: range "4..2" is empty (4 > 2)' -- plan "$m/good.onnx" --batch 2 --planner frontier --mode profile --devices 4..2 --frontier-table "$work/out.onnx"
expect frontier_range_needs_profile '*' "--devices: a range 1..4 needs --mode profile" -- plan "$m/good.onnx" --batch 2 --planner frontier --devices 1..4 --frontier-table "$work/out.onnx"
expect frontier_range_too_big '*' "--devices 1..64: topology k80x8 has 8 devices" -- plan "$m/good.onnx" --batch 2 --planner frontier --mode profile --devices 1..64 --topology k80x8 --frontier-table "$work/out.onnx"
expect frontier_bad_range 2 '--devices: must be a positive integer, got "x"' -- plan "$m/good.onnx" --batch 2 --planner frontier --mode profile --devices 1..x
expect frontier_flag_without_frontier '*' "--mode applies to --planner frontier only" -- plan "$m/good.onnx" --batch 2 --planner data --mode profile
expect frontier_table_dir_missing '*' "--frontier-table: directory $work/no/such/dir does not exist" -- plan "$m/good.onnx" --batch 2 --planner frontier --frontier-table "$work/no/such/dir/t.txt"
expect frontier_unknown_baseline '*' '--frontier-baselines: unknown planner "nope"' -- plan "$m/good.onnx" --batch 2 --planner frontier --frontier-baselines data,nope --frontier-table "$work/out.onnx"

# cleave simulate: nothing written (the timeline goes to out.onnx, which must not appear), one error line.
"$cleave" plan "$src/models/mlp.onnx" --batch 2 --devices 2 -o "$work/mlp.plan" 2>/dev/null
sim="--batch 2 --timeline $work/out.onnx"
expect simulate_no_plan '*' "nothere.plan: cannot open plan file" -- simulate "$m/good.onnx" --plan "$work/nothere.plan" $sim
expect simulate_other_model '*' 'invalid plan: unknown tensor "net.0.weight"' -- simulate "$m/good.onnx" --plan "$work/mlp.plan" $sim
expect simulate_timeline_dir '*' "--timeline: directory" -- simulate "$m/good.onnx" --planner data --devices 2 --batch 2 --timeline "$work/no/dir/t.txt"
expect simulate_svg_dir '*' "--svg: directory" -- simulate "$m/good.onnx" --planner data --devices 2 $sim --svg "$work/no/dir/t.svg"
expect simulate_too_many_devices '*' "the plan uses 16 devices, topology k80x8 has 8" -- simulate "$m/good.onnx" --planner data --devices 16 --timeline "$work/out.onnx"
expect flexflow_iterations_elsewhere '*' "--iterations applies to --planner flexflow only" -- plan "$m/good.onnx" --batch 2 --planner data --iterations 5
expect flexflow_iterations_zero 2 '--iterations: must be a positive integer, got "0"' -- plan "$m/good.onnx" --batch 2 --planner flexflow --iterations 0
expect flexflow_too_many_devices '*' "flexflow planner: 32 devices, but topology p100-4x4 has 16" -- plan "$m/good.onnx" --planner flexflow --devices 32

echo "$failures failures"
[ "$failures" -eq 0 ]
