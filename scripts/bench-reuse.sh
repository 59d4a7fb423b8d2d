#!/usr/bin/env bash
# Measures environment reuse: launch time from an earlier commit's environment against a cold
# launch of the same instance, and bytes on disk per instance with and without what images share.
#
#   scripts/bench-reuse.sh [eco] [DIR]
#   scripts/bench-reuse.sh config PIPELINE_TOML [DIR]
#
#   eco     kiln-testkit's Rust, Node and C fixture repositories, each launched at the four
#           commits after its first (its task with the base commit and date moved; default)
#   config  a new `kiln run` of your own pipeline, e.g. several commits of a real repository
#           (`scripts/devset.py run TASKS --reuse --verify-reuse 1 ...` makes such runs of
#           benchmark task files; `scripts/bench-reuse.py RUN_DIR` then prints the same figures)
#   DIR     working directory (default: a new temporary directory, removed at the end)
#
# The run launches with `reuse = true` and `verify_reuse = 1` (config mode: in a copy): every
# reused instance is launched cold as well, in the same process, right after, so the two times
# compare like for like. `scripts/bench-reuse.py` then prints, per reused instance, the cold and
# the reused launch seconds and their ratio, whether the baselines agreed, the image sizes, and
# the bytes all environments take above their base images with shared layers counted once,
# against each holding all it adds.
#
# Needs: a running Docker engine with the base images, cargo, python3 with pyarrow.
# Environment: PYTHON (default python3), KILN (path of a built kiln binary; default: built with cargo --release),
# CONCURRENCY (kiln's items at once, default 1, so that times do not include waiting for the CPU).
set -euo pipefail
CONCURRENCY=${CONCURRENCY:-1}
PYTHON=${PYTHON:-python3}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

MODE=${1:-eco}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    echo "usage: $0 [eco] [DIR] | $0 config PIPELINE_TOML [DIR]" >&2
    exit 2
}
case $MODE in
eco) WORK=${2:-} ;;
config)
    [[ -n ${2:-} && -f ${2:-} ]] || usage
    SOURCE=$(realpath "$2")
    WORK=${3:-}
    ;;
*) usage ;;
esac

REMOVE=()
trap 'rm -rf "${REMOVE[@]}"' EXIT
if [[ -z $WORK ]]; then
    WORK=$(mktemp -d /tmp/kiln-bench-reuse.XXXXXX)
    REMOVE+=("$WORK")
fi
mkdir -p "$WORK"

if [[ -z ${KILN:-} ]]; then
    (cd "$ROOT" && cargo build --release -q -p kiln-cli)
    KILN=${CARGO_TARGET_DIR:-$ROOT/target}/release/kiln
fi

# Sets `reuse = true` and `verify_reuse = 1` in the launch stage of the config $1, written to $2
# (beside $1, so that its relative paths still hold).
with_reuse() {
    "$PYTHON" - "$1" "$2" <<'EOF'
import re, sys

lines = open(sys.argv[1]).read().splitlines()
out, table, launch = [], None, set()
# The launch stages: tables [stages.NAME] whose kind is "launch".
for line in lines:
    header = re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
    if header:
        table = header.group(1).strip()
    elif table and re.match(r'\s*kind\s*=\s*"launch"', line):
        launch.add(table)
if not launch:
    sys.exit(f"bench-reuse: {sys.argv[1]} has no launch stage")
table = None
for line in lines:
    header = re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
    if header:
        table = header.group(1).strip()
        out.append(line)
        if table in launch:
            out += ["reuse = true", "verify_reuse = 1"]
        continue
    if table in launch and re.match(r"\s*(reuse|verify_reuse)\s*=", line):
        continue
    out.append(line)
open(sys.argv[2], "w").write("\n".join(out) + "\n")
EOF
}

case $MODE in
eco)
    DIR=$WORK/eco
    rm -rf "$DIR"
    (cd "$ROOT" && cargo run -q -p kiln-testkit --example write-ecosystems -- "$DIR" >/dev/null)
    # Each fixture's task at every commit after its first, oldest first: the same patches, the
    # base commit and its date moved.
    "$PYTHON" - "$DIR" <<'EOF'
import json, subprocess, sys
from pathlib import Path

dir = Path(sys.argv[1])
tasks = [json.loads(line) for line in (dir / "tasks.jsonl").read_text().splitlines()]
with open(dir / "reuse-tasks.jsonl", "w") as out:
    for task in tasks:
        if task["repo"].split("/")[1] not in ("runlength", "durations", "ringbuf"):
            continue
        log = subprocess.run(
            ["git", "-C", str(dir / "repos" / task["repo"]), "log", "--first-parent",
             "--reverse", "--format=%H %cI"],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()
        for n, (commit, date) in enumerate((line.split() for line in log[1:]), start=1):
            moved = dict(task, base_commit=commit, created_at=date,
                         instance_id=f"{task['instance_id']}0{n}")
            out.write(json.dumps(moved) + "\n")
EOF
    {
        printf '[dataset]\nname = "eco-bench-reuse"\nroot = "datasets"\n\n'
        if [[ -f $CA_BUNDLE ]]; then printf '[docker]\nca_bundle = "%s"\n\n' "$CA_BUNDLE"; fi
        cat <<'EOF'
[sources.tasks]
kind = "ingest"
path = "reuse-tasks.jsonl"
clone_url = "{config_dir}/repos/{owner}/{name}"

[stages.launch]
kind = "launch"
inputs = ["tasks"]
command_timeout = "15m"
test_timeout = "5m"
reuse = true
verify_reuse = 1
EOF
    } >"$DIR/pipeline.toml"
    CONFIG=$DIR/pipeline.toml
    ;;
config)
    CONFIG=$(dirname "$SOURCE")/.bench-reuse.$(basename "$SOURCE")
    REMOVE+=("$CONFIG")
    with_reuse "$SOURCE" "$CONFIG"
    ;;
esac

# Progress stays quiet but for notes (a wait for disk room, leftovers removed).
"$KILN" --json run --new --concurrency "$CONCURRENCY" --config "$CONFIG" >"$WORK/report.json" \
    2> >(grep --line-buffered -E '"event":"(note|error)"' >&2) || true
RUN_DIR=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_dir"])' "$WORK/report.json")
echo "run: $RUN_DIR" >&2
echo >&2
"$PYTHON" "$ROOT/scripts/bench-reuse.py" "$RUN_DIR"
