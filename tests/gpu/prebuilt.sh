#!/bin/bash
# Runs the GPU tests on a GPU machine that has the CUDA toolkit, cuDNN, NCCL, CMake, Ninja and a C++ compiler but not
# Cleave's Debian build dependencies (protobuf, ONNX, OpenMPI, OpenBLAS...), with a tree built elsewhere:
#   pack BUILD_DIR OUT_DIR   (on the build machine, a Debian with tools/setup.sh's packages) writes OUT_DIR/build.tar.gz
#                            (BUILD_DIR without object files and the compiler's static libraries), OUT_DIR/system.tar (the files of the Debian packages
#                            its programs, MPI's plugins and the bundle builds need: OpenMPI with its wrappers,
#                            OpenBLAS, protobuf, ...) and OUT_DIR/paths.txt (where the source and build trees were,
#                            and the alternatives links Debian's package scripts would make);
#   unpack OUT_DIR SRC_DIR   (on the GPU machine) puts them back: system files only where the machine has none (it
#                            never overwrites one), the build tree at its old path, the source tree linked there if
#                            it lives elsewhere, and cuDNN/NCCL found under /usr/local/cuda or Python's nvidia
#                            packages; prints the environment to export (CUDNN_ROOT, NCCL_ROOT, LD_LIBRARY_PATH).
# Then tests/gpu/run.sh --prebuilt BUILD_DIR runs the tests without configuring or building the compiler.
set -euo pipefail
mode=${1:-}

# The packages whose files must travel: owners of every library the build's programs, mpirun/orted and MPI's plugins
# load (Debian registers some under /lib, which /usr/lib merges), less the base system every Linux has, plus what the
# bundle builds compile against.
packages_needed() {
  local build=$1
  {
    find "$build" -type f -perm -u+x ! -name '*.so*' -exec sh -c 'file -b "$1" | grep -q ELF && echo "$1"' _ {} \;
    echo /usr/bin/orterun /usr/bin/orted
    ls /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so
  } | xargs ldd 2>/dev/null | awk '/=> \//{print $3}' | sort -u | xargs readlink -f | sort -u |
    while read -r f; do dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null; done | cut -d: -f1 | sort -u |
    grep -vxE 'libc6|libstdc\+\+6|libgcc-s1|zlib1g|libudev1|libuuid1|libcap2|libzstd1|liblzma5|libsystemd0' || true
  printf '%s\n' openmpi-bin openmpi-common libopenmpi-dev libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread \
    libdnnl-dev
}

case $mode in
pack)
  build=$(cd "$2" && pwd)
  mkdir -p "$3" "$build/gpu_models"
  out=$(cd "$3" && pwd)
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  # The LSTM and Transformer run.sh times, exported by Debian's torch (the GPU machine's may differ or be missing).
  /usr/bin/python3 "$src/tests/cuda/export_models.py" "$src" "$build/gpu_models" > /dev/null 2>&1
  # tests/gpu/bench_vs_torch.sh's real-size models, as graphs whose weights fill_weights.py writes where they run.
  /usr/bin/python3 "$src/models/zoo/generate.py" --family resnet --variant 50 --batch 64 --weights none \
    -o "$build/gpu_models/resnet50.onnx" > /dev/null 2>&1
  /usr/bin/python3 "$src/models/zoo/generate.py" --family transformer --variant bert-base --batch 32 --weights none \
    -o "$build/gpu_models/bert.onnx" > /dev/null 2>&1
  /usr/bin/python3 "$src/models/zoo/generate.py" --family decoder --variant gpt2-small --batch 16 --weights none \
    -o "$build/gpu_models/gpt2.onnx" > /dev/null 2>&1
  # The compiler's static libraries stay behind; the runtime's are what the bundle builds link. Debug information
  # stays behind too (a RelWithDebInfo tree is gigabytes of it; the transfer to a GPU machine is limited).
  stage=$(mktemp -d)
  tar -C / -cf - --exclude='*.o' --exclude='*.o.d' --exclude='.ninja_*' --exclude='*.a' \
    --exclude='CMakeFiles/[0-9]*' "${build#/}" | tar -C "$stage" -xf -
  (cd / && tar -cf - "${build#/}"/runtime/libcleave_rt_*.a) | tar -C "$stage" -xf -
  # The unit-test and fuzz-replay programs stay behind too: a GPU run runs only the gpu. and cuda. tests.
  find "$stage${build}/tests" -maxdepth 2 -type f -perm -u+x \( -name 'test_*' -o -name 'replay_*' \) -delete
  find "$stage" -type f \( -perm -u+x -o -name '*.a' \) -exec sh -c \
    'file -b "$1" | grep -qE "^(ELF|current ar archive)" && strip --strip-debug "$1"' _ {} \;
  tar -C "$stage" -czf "$out/build.tar.gz" "${build#/}"
  rm -rf "$stage"
  mapfile -t pkgs < <(packages_needed "$build" | sort -u)
  echo "pack: ${#pkgs[@]} packages: ${pkgs[*]}" >&2
  dpkg -L "${pkgs[@]}" | grep -vE '^/usr/share/(doc|man|lintian)/|^/\.$' | sort -u |
    while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "${f#/}"; done > "$out/files.txt"
  # Alternatives links point into /etc/alternatives, which the unpacking side lacks: record their final targets.
  grep -v '\.a$' "$out/files.txt" | tar -C / -czf "$out/system.tar.gz" -T -
  rm "$out/files.txt"
  {
    echo "src $src"
    echo "build $build"
    find /usr -lname '/etc/alternatives/*' 2>/dev/null | grep -E 'mpi|orte|blas|lapack' | grep -v /man/ |
      while read -r l; do echo "link $l $(readlink -f "$l")"; done
  } > "$out/paths.txt"
  ls -l "$out" >&2
  ;;
unpack)
  out=$2 src_here=$(cd "$3" && pwd)
  src=$(awk '$1 == "src" {print $2}' "$out/paths.txt")
  build=$(awk '$1 == "build" {print $2}' "$out/paths.txt")
  tar -C / -xzf "$out/system.tar.gz" --skip-old-files
  awk '$1 == "link" {print $2, $3}' "$out/paths.txt" | while read -r l t; do
    [ -e "$l" ] || [ -L "$l" ] || { mkdir -p "$(dirname "$l")" && ln -s "$t" "$l"; }
  done
  ldconfig
  if [ "$src" != "$src_here" ]; then
    [ -e "$src" ] && { echo "unpack: $src exists and is not this source tree" >&2; exit 1; }
    mkdir -p "$(dirname "$src")"
    ln -s "$src_here" "$src"
  fi
  tar -C / -xzf "$out/build.tar.gz"
  # cuDNN and NCCL: the toolkit's, else the pip wheels' (which lack the unversioned .so links find_library needs).
  libpath=""
  if [ ! -e /usr/local/cuda/include/cudnn.h ] || [ ! -e /usr/local/cuda/include/nccl.h ]; then
    nv=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])')
    root=/opt/cleave-cuda-libs
    mkdir -p $root/include $root/lib
    for p in cudnn nccl cublas cuda_runtime; do
      [ -d "$nv/$p" ] || continue
      ln -sf "$nv/$p"/include/* $root/include/ 2>/dev/null || true
      for l in "$nv/$p"/lib/lib*.so*; do
        ln -sf "$l" $root/lib/
        base=$(basename "$l")
        ln -sf "$l" "$root/lib/${base%%.so*}.so"
      done
    done
    libpath=$root/lib
    echo "export CUDNN_ROOT=$root NCCL_ROOT=$root"
  fi
  echo "export LD_LIBRARY_PATH=${libpath}${libpath:+:}/usr/local/cuda/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  echo "export CLEAVE_PREBUILT_BUILD=$build"
  ;;
*)
  echo "usage: prebuilt.sh pack BUILD_DIR OUT_DIR | unpack OUT_DIR SRC_DIR" >&2
  exit 2
  ;;
esac
