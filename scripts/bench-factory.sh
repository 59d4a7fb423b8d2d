#!/usr/bin/env bash
# The factory's cost: CPU per validated task and where it goes, from a cold engine cache.
#
#   scripts/bench-factory.sh demo [--repeats N]
#   scripts/bench-factory.sh TASKS --mirrors DIR [--reuse] [--repeats N] [--concurrency N] [--only ID ...]
#
#   demo    the built-in demo's fixtures: a quick run
#   TASKS   a task file of real instances (the devset, for example) cloned from local mirrors
#           laid out as DIR/<owner>/<name>, with the config scripts/devset.py writes
#
# Starts a Docker engine of its own (data root, bridge and cgroup parent of its own, nothing
# cached but the Debian base images copied from the default engine), runs kiln once on it, and
# prints per instance and in total: wall time, CPU seconds of kiln and of every container (the
# engine's cgroup accounting), the share of CPU per phase, and last `validated per core-hour: X`.
# See scripts/bench-factory.py for what each figure counts.
#
# Needs root, dockerd (scripts/docker-engine.sh installs it), cargo, python3.
# Environment: KILN (a built kiln binary; default: built here with cargo --release).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bash scripts/docker-engine.sh start
bash scripts/base-images.sh bookworm
if [[ -z ${KILN:-} ]]; then
    echo "bench-factory: building kiln (release)" >&2
    cargo build --release --locked -p kiln-cli >&2
    KILN=${CARGO_TARGET_DIR:-target}/release/kiln
fi
PY=python3
if ! python3 -c 'import pyarrow' 2>/dev/null; then
    PY=$(bash scripts/python-env.sh)
fi
exec "$PY" scripts/bench-factory.py --kiln "$KILN" "$@"
