#!/usr/bin/env bash
# Measures what kiln's launch stage costs over running the same commands by hand.
#
#   scripts/bench-launch.sh [demo|eco] [DIR]
#   scripts/bench-launch.sh config PIPELINE_TOML [DIR]
#
#   demo    `kiln demo` (the four Python fixtures; default)
#   eco     `kiln run` on kiln-testkit's ecosystem fixtures (Rust, Node, Go, C, Java)
#   config  a new `kiln run` of your own pipeline (real repositories); its ingest source's
#           clone_url must be a local path (after `{config_dir}`, `{owner}`, `{name}`) so the
#           raw side can clone from it too
#   DIR     working directory (default: a new temporary directory, removed at the end)
#
# For every instance that launch built, the script re-runs the recorded setup commands and test
# command directly: `docker create` from the same base image, `docker cp` of a fresh clone of
# the fixture repository at base_commit into /testbed, `docker start -a`, timed from create to
# exit. It prints, per instance, kiln's launch wall seconds (the launch row's total_seconds,
# less the time spent building a missing base image, which the raw side does not pay), the raw
# seconds, and their ratio, then the overall ratio (sum over sum); the last column is
# the part of kiln's time spent in those same commands (setup_seconds + test_seconds).
#
# Needs: a running Docker engine with the base images, cargo, git, python3 with pyarrow.
# Environment: KILN (path of a built kiln binary; default: built with cargo --release),
# CONCURRENCY (kiln's items at once, default 1: the raw commands run one instance at a time, so
# kiln does too, or its per-instance times would include waiting for the CPU).
set -euo pipefail
CONCURRENCY=${CONCURRENCY:-1}

MODE=${1:-demo}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    echo "usage: $0 [demo|eco] [DIR] | $0 config PIPELINE_TOML [DIR]" >&2
    exit 2
}
case $MODE in
demo | eco) WORK=${2:-} ;;
config)
    [[ -n ${2:-} && -f ${2:-} ]] || usage
    CONFIG=$(realpath "$2")
    WORK=${3:-}
    ;;
*) usage ;;
esac

if [[ -z $WORK ]]; then
    WORK=$(mktemp -d /tmp/kiln-bench.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

if [[ -z ${KILN:-} ]]; then
    (cd "$ROOT" && cargo build --release -q -p kiln-cli)
    KILN=${CARGO_TARGET_DIR:-$ROOT/target}/release/kiln
fi

CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

# 1. The kiln run.
case $MODE in
demo)
    DIR=$WORK/demo
    # `kiln demo` writes the fixtures and their config (and runs them at the config's
    # concurrency); the measured run is a second one of its own dataset at $CONCURRENCY. A
    # mismatch with the demo's expectations still leaves a run to measure.
    "$KILN" --quiet --json demo --repeats 1 --dir "$DIR" >/dev/null || true
    sed -i 's/^name = "demo"$/name = "demo-bench"/' "$DIR/pipeline.toml"
    "$KILN" --quiet --json run --concurrency "$CONCURRENCY" --config "$DIR/pipeline.toml" >"$WORK/report.json" || true
    ;;
eco)
    DIR=$WORK/eco
    rm -rf "$DIR"
    (cd "$ROOT" && cargo run -q -p kiln-testkit --example write-ecosystems -- "$DIR" >/dev/null)
    {
        printf '[dataset]\nname = "eco-bench"\nroot = "datasets"\n\n'
        if [[ -f $CA_BUNDLE ]]; then printf '[docker]\nca_bundle = "%s"\n\n' "$CA_BUNDLE"; fi
        cat <<'EOF'
[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
clone_url = "{config_dir}/repos/{owner}/{name}"

[stages.filter]
kind = "filter"
inputs = ["tasks"]

[stages.split]
kind = "split"
inputs = ["tasks", "filter"]

[stages.launch]
kind = "launch"
inputs = ["tasks", "filter", "split"]
command_timeout = "15m"
test_timeout = "5m"

[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]
repeats = 1
test_timeout = "5m"

[stages.export]
kind = "export"
inputs = ["tasks", "split", "launch", "validate"]
EOF
    } >"$DIR/pipeline.toml"
    "$KILN" --quiet --json run --concurrency "$CONCURRENCY" --config "$DIR/pipeline.toml" >"$WORK/report.json" || true
    ;;
config)
    "$KILN" --quiet --json run --new --concurrency "$CONCURRENCY" --config "$CONFIG" >"$WORK/report.json" || true
    ;;
esac
CONFIG=${CONFIG:-$DIR/pipeline.toml}

RUN_DIR=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_dir"])' "$WORK/report.json")
echo "run: $RUN_DIR" >&2

# 2. The launch rows of the run, one JSON object per built instance.
python3 - "$RUN_DIR/launch" >"$WORK/built.jsonl" <<'EOF'
import json, sys, pathlib
import pyarrow.parquet as pq

def image_seconds(log):
    """The `base image` phase of the launch (building a missing image), from its log."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("# launch phases (s):"):
            for phase in line.split(":", 1)[1].split(","):
                name, _, secs = phase.strip().rpartition(" ")
                if name == "base image":
                    return float(secs)
    return 0.0

stage = pathlib.Path(sys.argv[1])
manifest = json.loads((stage / "manifest.json").read_text())
# Only the parts the manifest lists are committed rows (see ARCHITECTURE.md).
for part in manifest["parts"]:
    for row in pq.read_table(stage / part).to_pylist():
        if row["status"] != "built":
            continue
        print(json.dumps({k: row[k] for k in (
            "instance_id", "repo", "base_commit", "base_image", "setup_commands",
            "rebuild_commands", "test_command", "total_seconds", "setup_seconds", "test_seconds")}
            | {"image_seconds": image_seconds(stage.parent / row["log_dir"] / "launch.log")}))
EOF

# Where the raw side clones `owner/name` from: the ingest source's clone_url, expanded.
clone_source() {
    python3 - "$CONFIG" "$1" <<'EOF'
import pathlib, sys, tomllib
config, repo = pathlib.Path(sys.argv[1]), sys.argv[2]
sources = tomllib.loads(config.read_text()).get("sources", {})
url = next((s.get("clone_url") for s in sources.values() if s.get("clone_url")), None)
if url is None:
    sys.exit(f"{config}: no source has a clone_url to clone {repo} from")
owner, name = repo.split("/", 1)
print(url.replace("{config_dir}", str(config.parent)).replace("{owner}", owner)
      .replace("{name}", name).replace("{repo}", repo))
EOF
}

# 3. The same commands by hand, timed.
: >"$WORK/times.tsv"
while IFS= read -r row; do
    id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["instance_id"])' "$row")
    script=$(python3 -c '
import json, shlex, sys
row = json.loads(sys.argv[1])
# Each command runs as kiln runs it: its own `bash -c` with pipefail. The setup commands must
# all succeed; the test command may fail (its statuses are data), so its exit code is ignored.
run = lambda cmd: "bash -c " + shlex.quote("set -o pipefail\n" + cmd)
lines = ["cd /testbed"]
lines += [run(cmd) + " || { echo \"setup failed: $?\"; exit 1; }" for cmd in row["setup_commands"]]
lines += [run(row["test_command"]) + " >/tmp/bench-test.log 2>&1; echo \"test exit $?\""]
print("\n".join(lines))' "$row")
    fields=$(python3 -c '
import json, sys
row = json.loads(sys.argv[1])
print(row["repo"], row["base_commit"], row["base_image"],
      row["total_seconds"] - row["image_seconds"], row["setup_seconds"] + row["test_seconds"])' "$row")
    read -r repo base image kiln_seconds kiln_commands <<<"$fields"
    checkout=$WORK/checkouts/$id
    rm -rf "$checkout"
    git clone -q "$(clone_source "$repo")" "$checkout"
    git -C "$checkout" checkout -q "$base"
    start=$(date +%s.%N)
    cid=$(docker create --label kiln.bench=1 -e PIP_DISABLE_PIP_VERSION_CHECK=1 -w /testbed "$image" bash -c "$script")
    docker cp -q "$checkout/." "$cid:/testbed"
    if ! docker start -a "$cid" </dev/null >"$WORK/$id.raw.log" 2>&1; then
        echo "$id: the raw setup failed; see $WORK/$id.raw.log" >&2
    fi
    end=$(date +%s.%N)
    docker rm -f "$cid" >/dev/null
    printf '%s\t%s\t%s\t%s\n' "$id" "$kiln_seconds" "$(python3 -c "print($end - $start)")" "$kiln_commands" >>"$WORK/times.tsv"
done <"$WORK/built.jsonl"

# 4. The table.
python3 - "$WORK/times.tsv" <<'EOF'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
if not rows:
    sys.exit("no built instance to measure")
print(f"{'instance':<28} {'kiln launch s':>14} {'raw cmds s':>11} {'ratio':>6}   {'(kiln cmds s)':>13}")
kiln_total = raw_total = commands_total = 0.0
for instance, kiln, raw, commands in rows:
    kiln, raw, commands = float(kiln), float(raw), float(commands)
    kiln_total += kiln
    raw_total += raw
    commands_total += commands
    print(f"{instance:<28} {kiln:>14.1f} {raw:>11.1f} {kiln / raw:>6.2f}   {commands:>13.1f}")
print(f"{'overall':<28} {kiln_total:>14.1f} {raw_total:>11.1f} {kiln_total / raw_total:>6.2f}   {commands_total:>13.1f}")
print("kiln cmds s: the setup and baseline test commands alone, as timed inside kiln's launch")
EOF
