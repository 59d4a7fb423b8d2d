#!/usr/bin/env bash
# Runs the built-in demo: four fixture Python projects through every stage (ingest, filter,
# split, launch, validate, export) on the local Docker engine. No GitHub token or LM key needed.
# Starts a Docker engine if none answers and creates the Debian base image if missing.
#
#   scripts/demo.sh [--dir DIR] [--repeats N]     (arguments go to `kiln demo`)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/docker-engine.sh start
bash scripts/base-images.sh bookworm
# The first build compiles kiln and its dependencies (about 8 to 10 minutes on 2 cores); later
# ones take seconds. Cargo's progress goes to stderr.
echo "demo: building kiln with cargo (the first build takes about 10 minutes on 2 cores), then running \`kiln demo\`" >&2
cargo run --locked -p kiln-cli -- demo "$@"
