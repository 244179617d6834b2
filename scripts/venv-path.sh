#!/usr/bin/env bash
# Prints the directory of the project's Python venv: a cache directory
# outside the clone (CI clones afresh), keyed by the pins' hash.
set -euo pipefail
cd "$(dirname "$0")/.."
hash=$(sha256sum scripts/python-requirements.txt | cut -c1-12)
echo "${MERAK_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/merak}/venv-$hash"
