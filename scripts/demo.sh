#!/usr/bin/env bash
# The main job on the bundled default model: installs what is missing,
# builds, exports the default GPT-2-style model from PyTorch, imports it
# with merak-compile, checks the imported program's forward pass with
# merak-run against PyTorch's output, then compiles the training step and
# runs 10 steps of it on the bundled corpus (the compiled ./train program
# arrives with code generation).
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
# The training step (next-token cross-entropy, autodiff, AdamW), run for 10
# steps on one batch of the corpus by the reference evaluator: the loss falls.
"$BUILD/bin/merak-compile" "$WORK/model.onnx" --compile-to=training \
  --frozen '*.attn.bias' --optimizer adamw --opt lr=3e-3 -o "$WORK/train.mlir"
"$BUILD/bin/merak-run" "$WORK/train.mlir" --entry train_step \
  --input "$WORK/input_ids.npy" --input "$WORK/labels.npy" --steps 10
