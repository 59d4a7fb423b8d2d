"""Checks a kiln release with the official SWE-bench harness and Hugging Face `datasets`.

    python swebench-check.py RELEASE_DIR [--work DIR] [--timeout SECONDS]

RELEASE_DIR is `datasets/<name>/releases/<tag>/` (README.md with YAML `configs`, `data/*.parquet`).
The environment images the rows name must be present on the local Docker engine.

For every split the card declares: `datasets.load_dataset` and pandas must read the rows the card's
statistics table counts; every column of the row shape the `swebench` package publishes
(`swebench.types.SWEbenchInstance`), and every column its harness reads (`image`, `eval_script`,
`log_parser`, `eval_type`), must be there with SWE-bench's type (a string; the test lists JSON text
that `json.loads` turns into a list of strings), and `version` and `license` filled in every row. For every shard, `python -m swebench.harness.run_evaluation` runs over the
rows kiln marks as harness-ready (`harness_note` empty) three times:
  - gold patches: every row must be resolved;
  - a no-op patch (adds a file no test reads): no row may be resolved, and every row must complete
    (the harness ran the tests and graded them as failing, without the fix);
  - empty patches: no row may be resolved.
Prints one line per check and exits 1 if any fails. Needs `swebench`, `datasets` and `pandas`
(scripts/swebench-check.sh makes a virtualenv with them).
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import datasets
import pandas as pd
from swebench.types import SWEbenchInstance

from checks import check, failures, finish

# Columns the harness reads besides the published row shape (`swebench.harness.utils.make_test_spec`).
HARNESS_COLUMNS = {"image": str, "eval_script": str, "log_parser": str, "eval_type": str}

NOOP_PATCH = """diff --git a/.kiln-noop b/.kiln-noop
new file mode 100644
--- /dev/null
+++ b/.kiln-noop
@@ -0,0 +1 @@
+no change
"""


def card_splits(release):
    """(split, data_files pattern, rows) from the card's front matter and statistics table."""
    card = (release / "README.md").read_text()
    front = card.split("---\n")[1]
    paths = dict(re.findall(r"- split: (\w+)\n\s+path: (\S+)", front))
    counts = dict(re.findall(r"^\| (\w+) \| (\d+) \|$", card, re.M))
    return [(split, pattern, int(counts.get(split, -1))) for split, pattern in paths.items()]


def check_features(split, loaded):
    """The columns and types of SWE-bench's rows, checked column by column; test lists decode."""
    expected = {**SWEbenchInstance.__annotations__, **HARNESS_COLUMNS}
    for column, kind in expected.items():
        feature = loaded.features.get(column)
        dtype = getattr(feature, "dtype", None)
        want = {str: "string"}.get(kind, str(kind))
        check(dtype == want, f"{split}: column {column} is {dtype or feature}, SWE-bench's is {want}")
    wrong = []
    for row in loaded:
        for column in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_PASS_UNGRADED", "PASS_TO_PASS_UNGRADED"):
            if column not in row:
                continue
            ids = json.loads(row[column])
            if not (isinstance(ids, list) and all(isinstance(i, str) for i in ids)):
                wrong.append(f"{row['instance_id']}: {column} is not a JSON list of strings")
        wrong += [f"{row['instance_id']}: {c} is empty" for c in ("version", "license") if not row.get(c)]
    check(not wrong, f"{split}: every row's test lists decode, version and license are filled" + "".join(f"\n     {w}" for w in wrong))


def harness(shard, predictions, run_id, ids, work, timeout):
    """Runs the harness over `ids` of `shard`; returns its report."""
    command = [
        sys.executable, "-m", "swebench.harness.run_evaluation",
        "--dataset_name", str(shard),
        "--predictions_path", predictions,
        "--run_id", run_id,
        "--max_workers", "1",
        "--timeout", str(timeout),
        "--report_dir", str(work),
        "--instance_ids", *ids,
    ]
    raced_once = False
    for _ in range(3):
        result = subprocess.run(command, cwd=work, capture_output=True, text=True)
        # The harness's final report lists every image and every container of the engine and
        # then inspects each one; one that another process removes in between (a parallel test,
        # `kiln gc`) fails that step although every instance ran. The instances' reports are
        # kept, so a rerun only reports.
        raced = ("ImageNotFound" in result.stderr and "in list_images" in result.stderr) or (
            "NotFound" in result.stderr and "client.containers.list(" in result.stderr
        )
        raced_once = raced_once or raced
        if result.returncode == 0 or not raced:
            break
        print(f"{run_id}: an image or container vanished while the harness listed them; reporting again", file=sys.stderr)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n", file=sys.stderr)
        check(False, f"{run_id}: run_evaluation exits {result.returncode}")
        return {}
    model = "gold" if predictions == "gold" else "kiln-check"
    report = json.loads((work / f"{model}.{run_id}.json").read_text())
    # An instance the same race cut off mid-evaluation is an error of the harness's, not a
    # verdict: those are evaluated once more under a run id of their own.
    errored = sorted(set(report.get("error_ids", [])) & set(ids))
    if raced_once and errored and not run_id.endswith("-again"):
        print(f"{run_id}: evaluating {errored} again after the race", file=sys.stderr)
        again = harness(shard, predictions, f"{run_id}-again", errored, work, timeout)
        for key in ("resolved_ids", "unresolved_ids", "completed_ids"):
            report[key] = sorted(set(report.get(key, [])) | set(again.get(key, [])))
        report["error_ids"] = sorted(set(again.get("error_ids", [])))
    return report


def predictions(path, ids, patch):
    with open(path, "w") as f:
        for i in ids:
            f.write(json.dumps({"instance_id": i, "model_name_or_path": "kiln-check", "model_patch": patch}) + "\n")
    return str(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("release", type=Path)
    parser.add_argument("--work", type=Path, help="directory for the harness's logs and reports (default: a temporary one)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per instance (default 1800)")
    args = parser.parse_args()
    release = args.release.resolve()
    work = args.work or Path(tempfile.mkdtemp(prefix="kiln-swebench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work: {work}")

    splits = card_splits(release)
    check(bool(splits), f"the card of {release} declares splits")
    for split, pattern, expected in splits:
        loaded = datasets.load_dataset("parquet", data_files=str(release / pattern), split="train")
        check(len(loaded) == expected, f"{split}: datasets loads {len(loaded)} rows, the card says {expected}")
        files = sorted(release.glob(pattern))
        frame = pd.concat([pd.read_parquet(f) for f in files]) if files else pd.DataFrame()
        check(len(frame) == expected, f"{split}: pandas reads {len(frame)} rows from {len(files)} shards")
        check_features(split, loaded)

        for n, shard in enumerate(files):
            rows = pd.read_parquet(shard)
            ready = rows[rows["harness_note"] == ""]
            for _, row in rows[rows["harness_note"] != ""].iterrows():
                print(f"     {row.instance_id}: not harness-ready: {row.harness_note}")
            ids = list(ready["instance_id"])
            if not ids:
                check(False, f"{shard.name}: no harness-ready row")
                continue
            tag = f"{split}{n}"
            gold = harness(shard, "gold", f"kiln-gold-{tag}", ids, work, args.timeout)
            resolved = set(gold.get("resolved_ids", []))
            missing = ", ".join(sorted(set(ids) - resolved))
            check(not missing, f"{shard.name}: gold resolves {len(resolved)} of {len(ids)}" + (f" (not: {missing})" if missing else ""))
            for instance in sorted(set(ids) - resolved):
                # What the harness logged of it, to tell a verdict from a harness error.
                for log in sorted(work.glob(f"logs/run_evaluation/kiln-gold-{tag}*/gold/{instance}/run_instance.log")):
                    tail = log.read_text(errors="replace").splitlines()[-25:]
                    print(f"     {log}:\n" + "\n".join(f"       {line}" for line in tail), file=sys.stderr)
            noop = harness(shard, predictions(work / f"noop-{tag}.jsonl", ids, NOOP_PATCH), f"kiln-noop-{tag}", ids, work, args.timeout)
            check(
                not noop.get("resolved_ids") and sorted(noop.get("completed_ids", [])) == sorted(ids),
                f"{shard.name}: a no-op patch resolves {len(noop.get('resolved_ids', []))} of {len(ids)} "
                f"({len(noop.get('completed_ids', []))} completed)",
            )
            empty = harness(shard, predictions(work / f"empty-{tag}.jsonl", ids, ""), f"kiln-empty-{tag}", ids, work, args.timeout)
            check(not empty.get("resolved_ids"), f"{shard.name}: empty patches resolve {len(empty.get('resolved_ids', []))} of {len(ids)}")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
    finish()


if __name__ == "__main__":
    main()
