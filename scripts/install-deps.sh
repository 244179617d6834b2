#!/usr/bin/env bash
# Installs the Debian packages merak needs to build and test. Idempotent:
# quiet and fast when everything is present. Needs root (or sudo).
set -euo pipefail

PKGS=(
  cmake ninja-build ccache git libgtest-dev g++
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22 libclang-rt-22-dev
  libonnx-dev protobuf-compiler libprotobuf-dev libonnx-testdata
  openmpi-bin libopenmpi-dev libopenblas-dev libomp-22-dev procps time
  python3-onnx python3-numpy python3-torch python3-torchvision
  pybind11-dev python3-dev nlohmann-json3-dev libcli11-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
