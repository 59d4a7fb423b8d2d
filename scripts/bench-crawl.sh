#!/usr/bin/env bash
# Crawl benchmark: a synthetic month of merged pull requests served by the fake GitHub, crawled
# by the release kiln binary, twice (the second crawl of the same window, in a new run of the
# same dataset, must skip what the first one found).
#
#   scripts/bench-crawl.sh [REPOS] [PULLS_PER_REPO] [DIR]     (default: 50 200, a temp dir)
#
# Prints, per crawl: candidates, wall seconds, candidates per second, API requests (kiln's
# count and the fake's), requests per candidate, GraphQL points and kiln's peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
REPOS=${1:-50}
PULLS=${2:-200}
WORK=${3:-$(mktemp -d)}
mkdir -p "$WORK"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/kiln-ci/target}
log() { echo "bench-crawl: $*" >&2; }

log "building release binaries (kiln, fake-github)"
cargo build --release --quiet -p kiln-cli
cargo build --release --quiet -p kiln-testkit --example fake-github
KILN=$CARGO_TARGET_DIR/release/kiln
FAKE=$CARGO_TARGET_DIR/release/examples/fake-github

rm -rf "$WORK/synthetic" "$WORK/datasets"
log "writing $REPOS repositories x $PULLS pull requests and starting the fake GitHub"
# The fake runs until its standard input closes; a fifo holds it open.
mkfifo "$WORK/fake.stdin"
"$FAKE" "$WORK/synthetic" "$REPOS" "$PULLS" <"$WORK/fake.stdin" >"$WORK/fake.out" &
FAKE_PID=$!
exec 3>"$WORK/fake.stdin"
cleanup() { exec 3>&- 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; rm -f "$WORK/fake.stdin"; }
trap cleanup EXIT
for _ in $(seq 1 600); do [[ -s $WORK/fake.out ]] && break; sleep 0.2; done
INFO=$(head -1 "$WORK/fake.out")

python3 - "$INFO" "$WORK/pipeline.toml" <<'EOF'
import json, sys
info = json.loads(sys.argv[1])
with open(sys.argv[2], "w") as f:
    f.write(f'''[dataset]
name = "bench"
root = "datasets"

[sources.github]
kind = "crawl"
api_url = "{info["url"]}"
repos = {json.dumps(info["repos"])}
month = "2024-09"
token_env = ["KILN_BENCH_TOKEN"]
clone_url = "{info["clone_url"]}"
concurrency = 4
requests_in_flight = 4
''')
print(f'bench-crawl: fixtures written in {info["write_seconds"]:.1f} s', file=sys.stderr)
EOF
export KILN_BENCH_TOKEN
KILN_BENCH_TOKEN=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["token"])' "$INFO")

crawl() {
    local label=$1 extra=$2
    local start end
    start=$(date +%s.%N)
    /usr/bin/time -f '%M' -o "$WORK/rss.$label" "$KILN" --quiet --json --config "$WORK/pipeline.toml" run $extra >"$WORK/run.$label.json"
    end=$(date +%s.%N)
    python3 - "$label" "$WORK" "$start" "$end" <<'EOF'
import glob, json, os, sys
label, work, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
run = json.load(open(f"{work}/run.{label}.json"))
manifest = json.load(open(os.path.join(run["run_dir"], "github", "manifest.json")))
stats = manifest["stats"]
rss_kib = int(open(f"{work}/rss.{label}").read().split()[-1])
seconds = end - start
rows = int(stats.get("rows_written", 0))
requests = int(stats.get("requests", 0))
print(f"{label:>7}: {rows} candidate rows in {seconds:.1f} s = {rows / seconds if seconds else 0:.0f} candidates/s; "
      f"{requests} API requests ({requests / rows if rows else 0:.4f} per candidate); "
      f"{int(stats.get('graphql.points', 0))} GraphQL points; peak RSS {rss_kib / 1024:.0f} MiB")
print(f"{label:>7}  requests by kind: " + ", ".join(f"{k}={int(v)}" for k, v in sorted(stats.items())
      if k.startswith(("graphql.", "rest.", "http.")) and k != "graphql.points"))
EOF
}

crawl first ""
crawl second "--new"
exec 3>&-
wait "$FAKE_PID" || true
python3 - "$WORK/fake.out" <<'EOF'
import json, sys
answered = json.loads(open(sys.argv[1]).read().splitlines()[1])
print(f"fake GitHub answered {answered['requests']} requests in both crawls: {answered['by_kind']}")
EOF
