#!/usr/bin/env bash
# Runs kiln's whole test suite, on a fresh Debian machine as root or on a developer's machine:
# starts a Docker engine if none answers (and stops it again at the end), makes sure the Debian
# base image exists, installs the host tools some tests call (git, python3, docker-registry,
# chromium, the Python clients' virtualenv), then runs `cargo test`.
#
#   scripts/test.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "test.sh: $*" >&2; }

# Host tools the tests call: git (fixture repositories), python3 with venv and pip (the
# fixtures' expectations are re-checked with a real pytest on the host), pyarrow (release
# shards must be readable and filterable by pyarrow, as Hugging Face `datasets` reads them),
# the official openai client (the fake LM endpoint must answer what real clients expect).
# Debian's docker-registry (images are pushed to a registry on loopback) and chromium (the run
# report is rendered headless).
need_apt=()
command -v git >/dev/null || need_apt+=(git)
command -v docker-registry >/dev/null || need_apt+=(docker-registry)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
if ((${#need_apt[@]})); then
    log "installing ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
if ! python3 -c 'import pyarrow' 2>/dev/null; then
    log "installing pyarrow"
    python3 -m pip install --quiet pyarrow 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages pyarrow
fi
if ! python3 -c 'import openai' 2>/dev/null; then
    log "installing openai"
    python3 -m pip install --quiet openai 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages openai
fi

# The official Python clients the release checks run (swebench, datasets, huggingface_hub,
# pandas), in one virtualenv made before the tests so that they do not race to make it.
bash scripts/python-env.sh >/dev/null

# GitHub's own published artifacts (its GraphQL schema, its OpenAPI description, octokit's
# recorded exchanges) from the npm registry: the fake GitHub and kiln's crawl are checked
# against them.
KILN_NODE_MODULES=$(bash scripts/node-deps.sh)
export KILN_NODE_MODULES

# An engine that answers already (the developer's own, or one an earlier `start` left running)
# is left running at the end; only one started here is stopped.
if docker info >/dev/null 2>&1; then
    log "using the Docker engine that answers already"
else
    # The pid file lives in a directory of this invocation, so only this run's `stop` can stop
    # the engine this run started.
    KILN_DOCKERD_STATE=$(mktemp -d -t kiln-dockerd.XXXXXX)
    export KILN_DOCKERD_STATE
    bash scripts/docker-engine.sh start
    trap 'bash scripts/docker-engine.sh stop; rm -rf "$KILN_DOCKERD_STATE"' EXIT
fi
bash scripts/base-images.sh bookworm trixie bullseye

start=$(date +%s)
# --no-fail-fast: one failing test binary does not hide the results of the others.
cargo test --workspace --locked --no-fail-fast "$@"
log "cargo test took $(($(date +%s) - start)) s"
