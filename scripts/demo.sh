#!/usr/bin/env bash
# The main job on the bundled default model: installs what is missing,
# builds merak, compiles the bundled small GPT (examples/gpt/model.onnx,
# 0.8M parameters) into a training executable, turns the bundled corpus into
# a token file, and trains it with AdamW: progress on the terminal, a falling
# loss, metrics and checkpoints under build/demo/.
#
#   scripts/demo.sh [STEPS]      (default 1000, about 1.5 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-1000}
scripts/install-deps.sh
scripts/build.sh
BUILD=${MERAK_BUILD_DIR:-build}
WORK="$BUILD/demo"
mkdir -p "$WORK"

# Bytes of the corpus as uint16 tokens (the model's vocabulary is 128).
/usr/bin/python3 - examples/gpt/corpus.txt "$WORK/corpus.bin" <<'PY'
import sys
import numpy as np
data = np.frombuffer(open(sys.argv[1], "rb").read(), dtype=np.uint8)
(data % 128).astype(np.uint16).tofile(sys.argv[2])
print("demo: %d tokens in %s" % (data.size, sys.argv[2]))
PY

"$BUILD/bin/merak-compile" examples/gpt/model.onnx --compile-to=binary \
  --frozen '*.attn.bias' --optimizer adamw --opt lr=2e-3 --opt clip-norm=1.0 \
  --opt schedule=cosine --opt warmup-steps=20 --opt total-steps="$STEPS" --opt min-lr=2e-4 \
  -o "$WORK/train"

rm -rf "$WORK/checkpoints"
"$WORK/train" --data "$WORK/corpus.bin" --steps "$STEPS" --sampler random --seed 1 \
  --metrics "$WORK/metrics.jsonl" --checkpoint-dir "$WORK/checkpoints" \
  --checkpoint-every 250 --log-every 50

/usr/bin/python3 - "$WORK/metrics.jsonl" <<'PY'
import json, sys
m = [json.loads(line) for line in open(sys.argv[1])]
first, last = m[0]["loss"], sum(x["loss"] for x in m[-10:]) / min(10, len(m))
print("demo: loss %.3f at step 0 -> %.3f (mean of the last 10 steps)" % (first, last))
if not last < first:
    sys.exit("demo: the loss did not fall")
PY
cat <<NEXT
demo: done. Next:
  $WORK/train --help                            # the program's flags
  $WORK/train --data $WORK/corpus.bin --steps $((STEPS + 100)) --checkpoint-dir $WORK/checkpoints --resume
  $WORK/train --data $WORK/corpus.bin --steps 3 --trace $WORK/trace.json   # open in ui.perfetto.dev
  $BUILD/bin/merak-compile examples/gpt/model.onnx --compile-to=lower -o model.mlir   # the planned IR
  docs/user-guide.md                            # everything else
NEXT
