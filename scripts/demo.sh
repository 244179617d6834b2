#!/usr/bin/env bash
# The main job on the bundled default model: installs what is missing,
# builds, exports the default GPT-2-style model from PyTorch, imports it
# with merak-compile, and checks the imported program's forward pass with
# merak-run against PyTorch's output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD=${MERAK_BUILD_DIR:-build}
WORK="$BUILD/demo"
mkdir -p "$WORK"
/usr/bin/python3 examples/gpt/export_demo.py "$WORK"
"$BUILD/bin/merak-compile" "$WORK/model.onnx" --compile-to=import -o "$WORK/model.mlir"
echo "demo: imported $(grep -c 'merak.param @' "$WORK/model.mlir") parameters into $WORK/model.mlir"
"$BUILD/bin/merak-run" "$WORK/model.mlir" --test-data "$WORK" --rtol 1e-5 --atol 1e-6
echo "demo: merak-run output matches PyTorch"
