#!/usr/bin/env bash
# Measures a split run against the same run unsplit, on one machine: kiln-testkit's ecosystem
# fixtures (Rust, Node, Go, C, Java, Python) through every stage, once as one `kiln run` and
# once as N shards started together (`kiln run --shard I/N`), merged and exported
# (`kiln merge --export`). A first, unmeasured run builds the base images, so both measured runs
# find them. Prints both wall times, their ratio, the plan's estimate per shard, and whether the
# two releases hold the same instances with the same FAIL_TO_PASS and PASS_TO_PASS.
#
#   scripts/bench-shards.sh [SHARDS] [DIR]      # SHARDS default 4
#
# Needs: a running Docker engine with the base images, cargo, python3 with pyarrow.
# Environment: KILN (a built kiln binary; default: built with cargo --release).
set -euo pipefail
SHARDS=${1:-4}
WORK=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z $WORK ]]; then
    WORK=$(mktemp -d /tmp/kiln-bench-shards.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
if [[ -z ${KILN:-} ]]; then
    (cd "$ROOT" && cargo build --release -q -p kiln-cli)
    KILN=${CARGO_TARGET_DIR:-$ROOT/target}/release/kiln
fi
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

fixtures() { # DIR DATASET: the fixtures and a config of their own dataset name
    local dir=$1 dataset=$2
    rm -rf "$dir"
    (cd "$ROOT" && cargo run -q -p kiln-testkit --example write-ecosystems -- "$dir" >/dev/null)
    {
        printf '[dataset]\nname = "%s"\nroot = "datasets"\n\n' "$dataset"
        if [[ -f $CA_BUNDLE ]]; then printf '[docker]\nca_bundle = "%s"\n\n' "$CA_BUNDLE"; fi
        cat <<'EOF'
[sources.tasks]
kind = "ingest"
path = "tasks.jsonl"
clone_url = "{config_dir}/repos/{owner}/{name}"

[stages.launch]
kind = "launch"
inputs = ["tasks"]

[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]
repeats = 1

[stages.export]
kind = "export"
inputs = ["tasks", "launch", "validate"]
tag = "bench"
EOF
    } >"$dir/pipeline.toml"
}

now() { date +%s.%N; }

echo "bench-shards: warming the base images (not measured)" >&2
fixtures "$WORK/warm" warm
"$KILN" --quiet run --config "$WORK/warm/pipeline.toml" >/dev/null 2>"$WORK/warm.log" || true

fixtures "$WORK/whole" whole
echo "bench-shards: one run" >&2
start=$(now)
"$KILN" --quiet run --config "$WORK/whole/pipeline.toml" >/dev/null 2>"$WORK/whole.log"
whole=$(python3 -c "print($(now) - $start)")

fixtures "$WORK/split" split
echo "bench-shards: $SHARDS shards at once, then the merge" >&2
start=$(now)
pids=()
for ((i = 0; i < SHARDS; i++)); do
    "$KILN" --quiet run --config "$WORK/split/pipeline.toml" --shard "$i/$SHARDS" \
        >/dev/null 2>"$WORK/shard-$i.log" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
shards_done=$(python3 -c "print($(now) - $start)")
"$KILN" --quiet merge --config "$WORK/split/pipeline.toml" --shards "$SHARDS" --export \
    >/dev/null 2>"$WORK/merge.log"
split=$(python3 -c "print($(now) - $start)")

python3 - "$WORK" "$SHARDS" "$whole" "$shards_done" "$split" <<'EOF'
import glob, json, sys
import pyarrow.parquet as pq

work, shards, whole, shards_done, split = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])

def release(dataset):
    rows = {}
    for path in glob.glob(f"{work}/{dataset}/datasets/{dataset}/releases/bench/data/*.parquet"):
        for row in pq.read_table(path).to_pylist():
            rows[row["instance_id"]] = (row["FAIL_TO_PASS"], row["PASS_TO_PASS"])
    return rows

a, b = release("whole"), release("split")
plan = sorted(glob.glob(f"{work}/split/datasets/split/shards/of-{shards}/plan-*.json"))
print(f"one run              {whole:8.1f} s")
print(f"{shards} shards (at once)  {shards_done:8.1f} s   {shards_done / whole:5.2f} x one run")
print(f"shards + merge/export {split:7.1f} s   {split / whole:5.2f} x one run")
if plan:
    for s in json.load(open(plan[0]))["shards"]:
        print(f"  shard {s['index']}: {s['repositories']} repositories, {s['items']} items, "
              f"planned {s['estimated_seconds']:.0f} s")
same = a == b
print(f"releases: {len(a)} and {len(b)} instances, {'the same' if same else 'DIFFERENT'} "
      "instances and lists")
sys.exit(0 if same else 1)
EOF
