#!/usr/bin/env bash
# Installs the npm packages of GitHub's own published artifacts that the fake GitHub is checked
# against (GitHub's GraphQL schema, its OpenAPI description, octokit's recorded exchanges), and
# the libraries that read them, into one directory, and prints that directory.
#
#   scripts/node-deps.sh            -> prints the directory (KILN_NODE_MODULES for the tests)
#
# Environment: KILN_NODE_MODULES  where to install (default /var/cache/kiln-ci/node)
set -euo pipefail
DIR=${KILN_NODE_MODULES:-/var/cache/kiln-ci/node}
log() { echo "node-deps: $*" >&2; }
# Versions are pinned so that a new schema release cannot change a test result unnoticed.
PACKAGES=(
    "@octokit/graphql-schema@15.26.1"
    "@octokit/openapi@23.0.2"
    "@octokit/fixtures@23.1.2"
    "graphql@16.15.0"
    "ajv@8.20.0"
    "ajv-formats@3.0.1"
)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    log "installing nodejs and npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
mkdir -p "$DIR"
stamp="$DIR/.installed"
want="${PACKAGES[*]}"
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    log "installing ${PACKAGES[*]} into $DIR"
    (cd "$DIR" && { [[ -f package.json ]] || echo '{"private": true}' >package.json; } &&
        npm install --no-audit --no-fund --silent "${PACKAGES[@]}" >&2)
    echo "$want" >"$stamp"
fi
echo "$DIR"
