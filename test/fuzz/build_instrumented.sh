#!/usr/bin/env bash
# Configures (once) and builds the instrumented build directory (default
# build-fuzz): the importer's libFuzzer targets (MERAK_ENABLE_FUZZERS) and
# the runtime with its gtests under ASan+UBSan (MERAK_RUNTIME_SANITIZE).
# Only the targets those need are built (the importer, the dialect, the
# evaluator; the runtime archives and tests), not the whole compiler.
#   test/fuzz/build_instrumented.sh [DIR]
# MERAK_BUILD_JOBS sets ninja's -j (default: ninja's own).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$src/build-fuzz}
if [ ! -f "$dir/build.ninja" ]; then
  mkdir -p "$dir"
  cmake -G Ninja -S "$src" -B "$dir" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DCMAKE_C_FLAGS_RELEASE=-O1 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DMERAK_ENABLE_FUZZERS=ON -DMERAK_RUNTIME_SANITIZE=ON \
    -DMERAK_ENABLE_CUDA=OFF >"$dir/configure.log" 2>&1 \
    || { cat "$dir/configure.log"; rm -f "$dir/build.ninja"; exit 1; }
fi
nice ninja -C "$dir" ${MERAK_BUILD_JOBS:+-j"$MERAK_BUILD_JOBS"} \
  merak-fuzz-onnx merak-fuzz-onnxtxt \
  merak_runtime_cpu merak_runtime_main merak_runtime_tests \
  merak_fake_train merak_fake_train_bad_manifest merak_comm_test
