#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (lit,
# ONNX backend node tests, torch exports) under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --venv
scripts/build.sh
BUILD=${MERAK_BUILD_DIR:-build}
cd "$BUILD"
# ctest lists skipped tests (GPU tests without a GPU) after its summary; the
# last line repeats the counts in the plain "N passed, N failed" form.
set +e
ctest --output-on-failure -j2 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
set -e
summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' ctest.log | tail -1)
if [ -n "$summary" ]; then
  failed=$(echo "$summary" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+)/\1/')
  total=$(echo "$summary" | sed -E 's/.* tests failed out of ([0-9]+)/\1/')
  skipped=$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)$' ctest.log || true)
  echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
fi
exit "$rc"
