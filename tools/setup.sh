#!/usr/bin/env bash
# Installs every Debian package Cleave needs to build and test (DESIGN §8). Idempotent: packages already
# present are skipped, so a second run costs a dpkg query and nothing else.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libonnx-testdata python3-onnx
  libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libjemalloc-dev
  python3-torch python3-torchvision python3-numpy python3-sklearn
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present" >&2
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
