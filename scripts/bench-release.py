"""The Python side of kiln-store's release benchmark (`cargo bench -p kiln-store --bench release`).

    python bench-release.py write ROWS.jsonl OUT_DIR PER_SHARD
    python bench-release.py dedupe RELEASES_DIR FRESH_KEYS.jsonl

`write`: loads the rows into Python dicts (not timed), resets the process's peak RSS, then times
pyarrow building tables of PER_SHARD rows with kiln's schema and writing them as
`OUT_DIR/data/test-NNNNN-of-NNNNN.parquet` with zstd level 1, as kiln writes them. Prints the
seconds, the peak RSS above the loaded rows in KiB, and the CPU seconds.

`dedupe`: times pandas reading the key columns of every release's `test` shards and applying
kiln's three rules to the fresh keys (same instance id; same repository and pull request
number, null numbers never matching; a pull request repeated within the fresh rows, the first
by instance id kept). Prints the seconds and the rows kept.
"""

import json
import os
import sys
import time
from pathlib import Path


def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def write(rows_path, out, per_shard):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(rows_path) as f:
        rows = [json.loads(line) for line in f]
    s, ls = pa.string(), pa.list_(pa.string())
    fields = {
        "pull_number": s, "version": s, "dockerfile": s, "FAIL_TO_PASS": ls, "PASS_TO_PASS": ls,
        "setup_commands": ls, "rebuild_commands": ls, "rebuild_cmds": ls, "test_cmds": ls,
        "issue_numbers": ls, "commit_urls": ls, "launch_seconds": pa.float64(), "validate_seconds": pa.float64(),
    }
    schema = pa.schema([(name, fields.get(name, s)) for name in rows[0].keys()])
    data = Path(out) / "data"
    data.mkdir(parents=True, exist_ok=True)
    before = status("VmRSS:")
    Path("/proc/self/clear_refs").write_text("5")
    started, cpu = time.perf_counter(), sum(os.times()[:2])
    shards = (len(rows) + per_shard - 1) // per_shard
    for i in range(shards):
        table = pa.Table.from_pylist(rows[i * per_shard:(i + 1) * per_shard], schema=schema)
        pq.write_table(table, data / f"test-{i:05d}-of-{shards:05d}.parquet", compression="zstd", compression_level=1)
    seconds = time.perf_counter() - started
    cpu = sum(os.times()[:2]) - cpu
    print(seconds, max(status("VmHWM:") - before, 0), cpu)


def dedupe(releases, keys_path):
    import pandas as pd

    fresh = pd.read_json(keys_path, lines=True, dtype={"pull_number": "string", "instance_id": "string", "repo": "string"})
    started = time.perf_counter()
    shards = sorted(Path(releases).glob("*/data/test-*.parquet"))
    published = pd.concat(
        [pd.read_parquet(shard, columns=["instance_id", "repo", "pull_number"]) for shard in shards],
        ignore_index=True,
    )
    dropped = fresh["instance_id"].isin(published["instance_id"])
    with_pull = published.dropna(subset=["pull_number"])[["repo", "pull_number"]].drop_duplicates()
    by_pull = fresh.merge(with_pull, on=["repo", "pull_number"], how="left", indicator=True)["_merge"].eq("both")
    dropped |= by_pull.to_numpy() & fresh["pull_number"].notna().to_numpy()
    rest = fresh[~dropped & fresh["pull_number"].notna()].sort_values("instance_id")
    repeated = rest.index[rest.duplicated(subset=["repo", "pull_number"], keep="first")]
    dropped.loc[repeated] = True
    seconds = time.perf_counter() - started
    print(seconds, int((~dropped).sum()))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "dedupe":
        dedupe(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
