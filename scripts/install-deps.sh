#!/usr/bin/env bash
# Installs the Debian packages merak needs to build and test, and with
# --venv the project's Python venv (scripts/python-requirements.txt, pinned;
# in the cache directory scripts/venv-path.sh prints). Idempotent: quiet and
# fast when everything is present. Needs root (or sudo) for the packages.
set -euo pipefail
cd "$(dirname "$0")/.."
WANT_VENV=0
[ "${1:-}" = "--venv" ] && WANT_VENV=1

# The venv is built once per pin set: a ".complete" marker is written last,
# so an interrupted install is redone, not trusted.
install_venv() {
  local venv
  venv=$(scripts/venv-path.sh)
  [ -f "$venv/.complete" ] && return 0
  echo "install-deps: building the Python venv $venv (torch 2.x and friends; several GB the first time)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-input \
    -r scripts/python-requirements.txt
  touch "$venv/.complete"
}

PKGS=(
  python3-venv python3-pip
  cmake ninja-build ccache git libgtest-dev g++
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 lld-22 libclang-rt-22-dev
  libonnx-dev protobuf-compiler libprotobuf-dev libonnx-testdata
  openmpi-bin libopenmpi-dev libopenblas-dev libdnnl-dev libomp-22-dev procps time iproute2
  python3-onnx python3-numpy python3-torch python3-torchvision
  pybind11-dev python3-dev nlohmann-json3-dev libcli11-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  [ "$WANT_VENV" = 1 ] && install_venv
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[ "$WANT_VENV" = 1 ] && install_venv
exit 0
