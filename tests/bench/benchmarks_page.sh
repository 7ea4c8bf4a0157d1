#!/usr/bin/env bash
# Writes docs/benchmarks.md: runs the benchmark scripts of tests/bench/ and puts each one's output under a heading
# that says on which machine (uname -m, the CPU model from /proc/cpuinfo, the core count), when, with which exact
# command and in how long it ran. The page is generated: edit this script or the benchmarks, not the page.
#
# Usage: tests/bench/benchmarks_page.sh [--measured] [--cuda] [--only NAME[,NAME...]] [-o PAGE] [BUILD_DIR]
#   BUILD_DIR   a build of this tree (default build/): BUILD_DIR/tools/cleave, BUILD_DIR/runtime
#   (default)   the planning benchmarks: shapes only, no MPI run, about 10 minutes on 2 cores in all
#               (plan_zoo explain_zoo search_zoo oracle_zoo frontier_zoo flexflow_nmt frontier_profile;
#               frontier_profile builds the target frontier_profile in BUILD_DIR when it is missing)
#   --measured  also the benchmarks that build bundles and time them on MPI ranks of this machine (accuracy ~10-15
#               min, planners_profile ~17 min, batch_calibration a few minutes, cpu_vs_torch ~20 min, bundle_build
#               ~10 min): left out by default for their time and because they need the cores to themselves
#   --cuda      batch_calibration on one GPU (backend cuda) instead of the CPU (with --measured or --only)
#   gpu_run     (--only gpu_run) tests/gpu/run.sh: the GPU tests, the small models' GPU steps with and without CUDA
#               graphs, and tests/gpu/bench_vs_torch.sh at real sizes; needs a GPU. On a machine lent without this
#               tree's build dependencies, run it there (tests/gpu/prebuilt.sh) and bring its output back:
#               GPU_RUN_LOG=FILE GPU_MACHINE='...' GPU_DATE='...' puts that log in the section instead
#   --only      just these sections (names above); the other sections of the existing page are kept as they are
#   -o PAGE     the page to write (default docs/benchmarks.md)
# Sections not run this time keep their previous text (each carries its own machine, date and command), so a page
# can combine runs on several machines. The scripts' knobs (ZOO_MODELS, DEVICES, STEPS, ...) pass through from the
# environment and are written into the recorded command. Exit status: 1 if any benchmark exited non-zero.
set -uo pipefail

default_set=(plan_zoo explain_zoo search_zoo oracle_zoo frontier_zoo flexflow_nmt frontier_profile)
measured_set=(accuracy planners_profile batch_calibration cpu_vs_torch bundle_build)
gpu_set=(gpu_run)
all_sets=("${default_set[@]}" "${measured_set[@]}" "${gpu_set[@]}")
knobs=(ZOO_MODELS PLANNERS DEVICES TOPOLOGY BATCH ITERATIONS SEED STEPS REPEATS ROUNDS PREDICTORS CASES MODELS MODEL
       BASELINES PLAN_FLAGS RUNTIME_DIR BASELINE THREADS DP DP_MODELS)

title() {
  case $1 in
    plan_zoo) echo "Planning the papers' big models without their weights (cleave plan --planner data, 8 devices)" ;;
    explain_zoo) echo "Cost model totals of the zoo models' data plans (8 devices of k80x8)" ;;
    search_zoo) echo "Search planners at 8 devices: search time, bytes moved, communication time, peak memory" ;;
    oracle_zoo) echo "ParaDL's oracle on the papers' CNNs (1..16 devices of p100-4x4)" ;;
    frontier_zoo) echo "The frontier planner on TensorOpt's models (16 devices of v100-2x8)" ;;
    flexflow_nmt) echo "The flexflow planner on FlexFlow's NMT (16 devices of p100-4x4)" ;;
    frontier_profile) echo "What a full profile costs the frontier search (TensorOpt's Transformer, 16 devices of v100-2x8)" ;;
    accuracy) echo "Accuracy of the cost model and simulator against measured steps on MPI ranks" ;;
    planners_profile) echo "Do the search planners find faster plans with a measured profile? (2 MPI ranks)" ;;
    batch_calibration) echo "Predicting an unmeasured batch from a profile (1 device)" ;;
    cpu_vs_torch) echo "The CPU backend against torch 1.13: step times at 1 thread, and scaling on 2 ranks (data and tofu plans)" ;;
    bundle_build) echo "From cleave compile to the first step: 2-rank bundles (and ResNet-18 on 8 ranks) with the runtime cached" ;;
    gpu_run) echo "On one GPU: the GPU tests, CUDA graphs on the small models, and real sizes against torch eager" ;;
  esac
}

measured=0 cuda=0 only="" page="" build=""
while [ $# -gt 0 ]; do
  case $1 in
    --measured) measured=1 ;;
    --cuda) cuda=1 ;;
    --only) only=$2; shift ;;
    -o) page=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
build=$(readlink -f "${build:-build}")
[ -n "$page" ] && page=$(readlink -f "$page")
cd "$(dirname "$0")/../.."
page=${page:-$PWD/docs/benchmarks.md}
cleave=$build/tools/cleave
if [ ! -x "$cleave" ]; then
  echo "error: $cleave does not exist (build the tree first: bash tools/build.sh)" >&2
  exit 2
fi

if [ -n "$only" ]; then
  IFS=, read -ra run <<<"$only"
  for n in "${run[@]}"; do
    [ -n "$(title "$n")" ] || { echo "error: unknown benchmark '$n' (one of: ${all_sets[*]})" >&2; exit 2; }
  done
else
  run=("${default_set[@]}")
  [ "$measured" = 1 ] && run+=("${measured_set[@]}")
fi

machine() {
  # The model name alone hides which CPU a cloud host lent ("AMD EPYC"): its family, model and widest vector ISA
  # tell hosts apart, and kernels (ours, torch's) run different code on each.
  local cpu family model isa=SSE
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  family=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1)
  model=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)
  grep -qw avx2 /proc/cpuinfo && isa=AVX2
  grep -qw avx512f /proc/cpuinfo && isa=AVX-512
  echo "$(uname -m), ${cpu:-unknown CPU} (family ${family:-?}, model ${model:-?}, $isa), $(nproc) cores"
}

# The command line of benchmark $1, as run from the source tree's root.
command_of() {
  local prefix="" k
  for k in "${knobs[@]}"; do
    [ -n "${!k+x}" ] && prefix+="$k=$(printf '%q' "${!k}") "
  done
  case $1 in
    frontier_profile) echo "${prefix}tests/bench/frontier_profile.sh $build ." ;;
    batch_calibration) echo "${prefix}tests/bench/batch_calibration.sh $build . $([ "$cuda" = 1 ] && echo cuda || echo cpu)" ;;
    gpu_run) if [ -n "${GPU_RUN_LOG:-}" ]; then echo "cat $(printf '%q' "$GPU_RUN_LOG")  # brought back from the GPU machine (its comment lines say what ran there)"
             else echo "${prefix}tests/gpu/run.sh $build"; fi ;;
    *) echo "${prefix}tests/bench/$1.sh $cleave ." ;;
  esac
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for n in "${run[@]}"; do
  cmd=$(command_of "$n")
  echo "== $n: $cmd" >&2
  start=$(date +%s)
  when=$(date -u '+%Y-%m-%d %H:%M UTC')
  # Each benchmark's own temporary work directory goes under the scratch directory, removed at the end.
  mkdir -p "$scratch/$n/tmp"
  TMPDIR=$scratch/$n/tmp bash -c "$cmd" >"$scratch/$n/out" 2>"$scratch/$n/err"
  code=$?
  secs=$(($(date +%s) - start))
  [ "$code" -ne 0 ] && status=1
  echo "   exit $code after $secs s" >&2
  {
    echo "<!-- section $n -->"
    echo "## $n: $(title "$n")"
    echo
    if [ "$n" = gpu_run ] && [ -n "${GPU_RUN_LOG:-}" ]; then
      echo "Machine: ${GPU_MACHINE:-a GPU machine}. Date: ${GPU_DATE:-unknown}. Run there and brought back as a log."
    else
      echo "Machine: $(machine). Date: $when. Wall time: $secs s. Exit status: $code."
    fi
    echo
    echo "Command (from the source tree's root):"
    echo
    echo '```'
    echo "$cmd"
    echo '```'
    echo
    echo '```text'
    cat "$scratch/$n/out"
    echo '```'
    # Progress goes to stderr; keep only what says that something was skipped or failed.
    if grep -qiE 'skip|error|fail' "$scratch/$n/err" || [ "$code" -ne 0 ]; then
      echo
      echo "Its stderr (lines that name a skip, an error or a failure; the last 20 lines when it exited non-zero):"
      echo
      echo '```text'
      { grep -iE 'skip|error|fail' "$scratch/$n/err"; [ "$code" -ne 0 ] && tail -20 "$scratch/$n/err"; } | awk '!seen[$0]++' | head -40
      echo '```'
    fi
    echo "<!-- end section $n -->"
  } >"$scratch/$n/section"
done

# A section of the existing page, markers included, or nothing.
old_section() {
  [ -f "$page" ] || return 0
  awk -v n="$1" '$0 == "<!-- section " n " -->" {on = 1} on {print} $0 == "<!-- end section " n " -->" {on = 0}' "$page"
}

mkdir -p "$(dirname "$page")"
{
  echo "# Benchmarks"
  echo
  echo "Generated by \`tests/bench/benchmarks_page.sh\` from the benchmark scripts in \`tests/bench/\`; do not edit by"
  echo "hand. Each section says on which machine, when and with which command it was produced: sections from different"
  echo "runs (or machines) may stand side by side. Timings on a shared virtual machine drift by tens of percent within"
  echo "minutes, so compare figures within one section rather than across sections."
  echo
  echo "Regenerate with \`tests/bench/benchmarks_page.sh [BUILD_DIR]\` (the planning benchmarks, about 10 minutes on 2"
  echo "cores), \`--measured\` to add the benchmarks that time bundles on MPI ranks (about an hour more), \`--only"
  echo "NAME,...\` to rerun some sections and keep the rest. What each benchmark does is in the header of its script."
  echo
  echo "| section | script | in the default run |"
  echo "|---|---|---|"
  for n in "${all_sets[@]}"; do
    d=yes
    [[ " ${measured_set[*]} " == *" $n "* ]] && d="no (\`--measured\`)"
    if [[ " ${gpu_set[*]} " == *" $n "* ]]; then
      echo "| $n | \`tests/gpu/run.sh\` | no (\`--only $n\`, on a GPU) |"
      continue
    fi
    echo "| $n | \`tests/bench/$n.sh\` | $d |"
  done
  for n in "${all_sets[@]}"; do
    echo
    if [ -f "$scratch/$n/section" ]; then
      cat "$scratch/$n/section"
    elif [ -n "$(old_section "$n")" ]; then
      old_section "$n"
    else
      echo "<!-- section $n -->"
      echo "## $n: $(title "$n")"
      echo
      echo "Not generated yet: \`tests/bench/benchmarks_page.sh --only $n [BUILD_DIR]\`."
      echo "<!-- end section $n -->"
    fi
  done
} >"$scratch/page"
mv "$scratch/page" "$page"
echo "wrote $page" >&2
exit $status
