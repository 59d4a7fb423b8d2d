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
cargo run --quiet --locked -p kiln-cli -- demo "$@"
