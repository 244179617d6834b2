#!/usr/bin/env bash
# Builds the instrumented build (test/fuzz/build_instrumented.sh: the
# importer's libFuzzer targets under ASan+UBSan) and fuzzes each target,
# merak-fuzz-onnx (binary models) and merak-fuzz-onnxtxt (ONNX text), for
# MINUTES minutes (default 10), one after the other. The corpus each run
# grows is kept under $DIR/fuzz-corpus/ for the next run; a crash stops that
# target and names the saved input (see docs/user-guide.md, "Fuzzing and
# sanitizers", for what to do with it).
#
#   scripts/fuzz.sh [MINUTES]
# MERAK_FUZZ_BUILD_DIR (default build-fuzz), MERAK_BUILD_JOBS (ninja -j).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
DIR=${MERAK_FUZZ_BUILD_DIR:-build-fuzz}
test/fuzz/build_instrumented.sh "$DIR"
rc=0
for kind in onnx onnxtxt; do
  mkdir -p "$DIR/fuzz-corpus/$kind"
  nice /usr/bin/python3 test/fuzz/fuzz_check.py --fuzzer "$DIR/bin/merak-fuzz-$kind" \
    --kind "$kind" --workdir "$DIR/fuzz/$kind" --corpus "$DIR/fuzz-corpus/$kind" \
    --seconds $((MINUTES * 60)) || rc=1
done
exit $rc
