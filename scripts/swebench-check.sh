#!/usr/bin/env bash
# Checks a kiln release with the official SWE-bench harness (`swebench` 5.0.2 from PyPI) and
# Hugging Face `datasets`: gold patches resolve every harness-ready row, no-op and empty patches
# resolve none, and `datasets` and pandas read every split with the card's counts. The rows'
# environment images must be on the local Docker engine (the run that made the release built them).
#
#   scripts/swebench-check.sh RELEASE_DIR [--work DIR] [--timeout SECONDS]
#
# The virtualenv is made once at $KILN_SWEBENCH_VENV (default /var/cache/kiln-ci/swebench-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${KILN_SWEBENCH_VENV:-/var/cache/kiln-ci/swebench-venv}
PACKAGES=(swebench==5.0.2 datasets==5.2.0 pandas==3.1.1)
if ! "$VENV/bin/python" -c 'import swebench, datasets, pandas' 2>/dev/null; then
    echo "swebench-check: installing ${PACKAGES[*]} into $VENV" >&2
    python3 -m venv --clear "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet "${PACKAGES[@]}"
fi
exec "$VENV/bin/python" scripts/swebench-check.py "$@"
