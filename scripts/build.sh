#!/usr/bin/env bash
# Configures (once) and builds merak into ${MERAK_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MERAK_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  # A configure that failed (say, before install-deps.sh brought the compiler)
  # leaves a cache without a platform; start that one afresh.
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
  cmake -G Ninja -S . -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld >/dev/null
fi
ninja -C "$BUILD"
