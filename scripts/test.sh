#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (lit,
# ONNX backend node tests, torch exports) under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD=${MERAK_BUILD_DIR:-build}
cd "$BUILD"
ctest --output-on-failure -j2
