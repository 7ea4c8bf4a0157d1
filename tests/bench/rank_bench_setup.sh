# Sourced by the benchmarks that run bundles on MPI ranks here (accuracy.sh, planners_profile.sh) with their arguments
# CLEAVE_BINARY SOURCE_DIR [WORK_DIR]: sets cleave, src, work (made; a temporary directory by default), topology
# (models/topologies/cpu-local.json), rtflag (--runtime-dir of $RUNTIME_DIR, default the runtime next to
# CLEAVE_BINARY's build, when it holds libcleave_rt_cpu.a), lets mpirun run as root, and defines model_file.
cleave=$(readlink -f "$1")
src=$(readlink -f "$2")
work=${3:-$(mktemp -d)}
mkdir -p "$work"
work=$(readlink -f "$work")
topology=$src/models/topologies/cpu-local.json
rt=${RUNTIME_DIR:-$(dirname "$(dirname "$cleave")")/runtime}
rtflag=()
[ -f "$rt/libcleave_rt_cpu.a" ] && rtflag=(--runtime-dir "$rt")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The model file of a name: mlp and cnn (models/), or <family>-tiny generated once into $work/models by the zoo.
model_file() {
  case $1 in
    mlp | cnn) echo "$src/models/$1.onnx" ;;
    *-tiny)
      local f=$work/models/$1.onnx
      if [ ! -f "$f" ]; then
        mkdir -p "$work/models"
        /usr/bin/python3 "$src/models/zoo/generate.py" --family "${1%-tiny}" --variant tiny -o "$f" >&2 || return 1
      fi
      echo "$f" ;;
  esac
}
