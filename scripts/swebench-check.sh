#!/usr/bin/env bash
# Checks a kiln release with the official SWE-bench harness (`swebench` 5.0.2 from PyPI) and
# Hugging Face `datasets`: gold patches resolve every harness-ready row, no-op and empty patches
# resolve none, and `datasets` and pandas read every split with the card's counts. The rows'
# environment images must be on the local Docker engine (the run that made the release built them).
#
#   scripts/swebench-check.sh RELEASE_DIR [--work DIR] [--timeout SECONDS]
#
# The virtualenv is scripts/python-env.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=$(bash scripts/python-env.sh)
exec "$PYTHON" scripts/swebench-check.py "$@"
