#!/usr/bin/env bash
# Makes (once) the virtualenv of the official Python clients kiln's checks run, and prints its
# python: the SWE-bench harness (swebench 5.0.2), Hugging Face `datasets` and `huggingface_hub`,
# pandas, and kubernetes-validate (the Kubernetes API's published schemas, for the jobs `kiln
# deploy k8s` writes), all from PyPI, at the versions the checks were written against.
#
#   PY=$(bash scripts/python-env.sh)
#
# The virtualenv is at $KILN_PYTHON_VENV (default /var/cache/kiln-ci/python-venv). Concurrent
# callers wait for the one that builds it.
set -euo pipefail

VENV=${KILN_PYTHON_VENV:-/var/cache/kiln-ci/python-venv}
PACKAGES=(swebench==5.0.2 datasets==5.2.0 pandas==3.1.1 huggingface_hub==2.4.0 kubernetes-validate==1.37.0)
IMPORTS='import swebench, datasets, pandas, huggingface_hub, kubernetes_validate; assert huggingface_hub.__version__ == "2.4.0"'

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if ! "$VENV/bin/python" -c "$IMPORTS" 2>/dev/null; then
    echo "python-env: installing ${PACKAGES[*]} into $VENV" >&2
    # A working virtualenv only gets what it lacks; a broken or missing one is made anew.
    if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        python3 -m venv --clear "$VENV" >&2
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    fi
    "$VENV/bin/python" -m pip install --quiet "${PACKAGES[@]}" >&2
fi
echo "$VENV/bin/python"
