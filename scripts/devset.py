#!/usr/bin/env python3
"""Runs kiln on a task file of real instances from local mirrors and prints one table.

    scripts/devset.py run TASKS.jsonl --mirrors DIR [--work DIR] [--kiln BIN] [--only ID ...]
                          [--repeats N] [--concurrency N] [--timeout 60m] [--no-cutoff]
    scripts/devset.py table RUN_DIR [--markdown]

`run` writes a pipeline config beside the work directory (an ingest source over TASKS, clone
URLs into the mirrors laid out as DIR/<owner>/<name>, launch, validate and export), runs it with
a fresh run, and prints the table of that run; `scripts/swebench-check.sh` then checks the
release under <work>/datasets/<dataset>/releases/ with the SWE-bench harness. `table` prints the table of an existing run.

One row per instance: language, built, validated, FAIL_TO_PASS count, agreement with the
published FAIL_TO_PASS (as strings / by meaning), the SWE-bench harness parser that reads the
runs as kiln did (`none` when no parser does), the failure class, the repairs launch used,
the launch's wall time and the time of the commands it ran (setup and baseline tests), and the
validation wall time; then the rates. Agreement comes from kiln's own
validation columns; for runs of a kiln that did not record them yet, the script compares the
lists itself (marked with *), by the same rules.

The task file and mirrors are the user's (a published benchmark's records, for example); nothing
here knows any instance.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

try:
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover
    sys.exit("devset.py: needs pyarrow (python3 -m pip install pyarrow)")


def read_table(stage_dir):
    manifest = json.loads((stage_dir / "manifest.json").read_text())
    rows = []
    for part in manifest["parts"]:
        rows.extend(pq.read_table(stage_dir / part).to_pylist())
    return rows


SEPARATORS = ["::", ".", "/", " ", "#", " > ", " \u203a ", ":", "$"]


def without_line(name):
    m = re.search(r" \(line \d+\)$", name)
    return name[: m.start()] if m else name


def extends(long, short):
    if not short or len(long) <= len(short):
        return False
    before = long.endswith(short) and any(long[: len(long) - len(short)].endswith(s) for s in SEPARATORS)
    after = long.startswith(short) and (
        any(long[len(short):].startswith(s) for s in SEPARATORS) or long[len(short):].startswith("[")
    )
    return before or after


def canonical(name):
    for separator in ["::", " \u203a ", " > ", ".", "/", "#", "$"]:
        name = name.replace(separator, " ")
    return " ".join(name.split())


def same_by_meaning(published, ours):
    p, o = without_line(published.strip()), without_line(ours.strip())
    if p == o or extends(o, p) or extends(p, o):
        return True
    cp, co = canonical(p), canonical(o)
    if cp and (cp == co or extends(co, cp) or extends(cp, co)):
        return True
    i = p.rfind("[")
    return i >= 0 and "]" not in p[i:] and o.startswith(p)


def relation(all_given, all_ours, any_common):
    if all_given and all_ours:
        return "exact"
    if all_given:
        return "superset"
    if all_ours:
        return "subset"
    return "overlap" if any_common else "disjoint"


def agreement(given, ours):
    """(as strings, by meaning) of kiln's list against the published one, or None."""
    if not given:
        return None
    if not ours:
        return ("disjoint", "disjoint")
    g, o = set(given), set(ours)
    common = len(g & o)
    exact = relation(common == len(g), common == len(o), common > 0)
    missing = [x for x in g if not any(same_by_meaning(x, y) for y in o)]
    extra = [y for y in o if not any(same_by_meaning(x, y) for x in g)]
    meaning = relation(not missing, not extra, len(missing) < len(g))
    return (exact, meaning)


def quality(val):
    """The row's quality signals (identical runs per side of the repeats, solution leak,
    difficulty, tests collected); "-" for a row without runs or from a kiln before them."""
    if not val or "identical_runs_before" not in val or not val.get("run_statuses"):
        return ["-"] * 4
    repeats = val.get("repeats") or 0
    runs = f"{val['identical_runs_before']}/{repeats}, {val['identical_runs_after']}/{repeats}"
    leak = "leak" if val.get("solution_leak") else "none"
    difficulty = val.get("difficulty") or "-"
    share = val.get("tests_collected")
    if share is None:
        collected = "-" if "tests_collected" not in val else "n/a"
    else:
        collected = f"{round(share * val['tests_defined'])}/{val['tests_defined']}"
    return [runs, leak, difficulty, collected]


def table(run_dir, markdown=False):
    run_dir = Path(run_dir)
    stages = {p.name: p for p in run_dir.iterdir() if (p / "manifest.json").exists()}
    candidates = {r["instance_id"]: r for r in read_table(stages["tasks"])} if "tasks" in stages else {}
    launches = {r["instance_id"]: r for r in read_table(stages["launch"])} if "launch" in stages else {}
    validations = {r["instance_id"]: r for r in read_table(stages["validate"])} if "validate" in stages else {}
    header = ["instance", "language", "built", "validated", "F2P", "published F2P", "agreement", "harness parser", "identical runs", "leak", "difficulty", "collected", "failure", "repairs", "launch s", "commands s", "validate s"]
    lines = []
    totals = {"n": 0, "built": 0, "validated": 0, "compared": 0, "exact": 0, "meaning": 0}
    for iid in sorted(candidates):
        cand = candidates[iid]
        if cand.get("status") != "ok":
            continue
        totals["n"] += 1
        env = launches.get(iid) or {}
        val = validations.get(iid) or {}
        built = env.get("status") == "built"
        validated = val.get("status") == "validated"
        totals["built"] += built
        totals["validated"] += validated
        given = cand.get("given_fail_to_pass") or []
        ours = val.get("FAIL_TO_PASS") or []
        if "agreement" in val and val.get("agreement"):
            agree = (val["agreement"], val["agreement_by_meaning"])
            mark = ""
        else:
            agree = agreement(given, ours) if val else None
            mark = "*" if agree else ""
        if agree:
            totals["compared"] += 1
            totals["exact"] += agree[0] == "exact"
            totals["meaning"] += agree[1] == "exact"
        failure = val.get("failure_class") or env.get("failure_class") or ""
        if failure and not built:
            failure = f"launch: {failure}"
        elif failure:
            failure = f"validate: {failure}"
        repairs = ", ".join(r.split(":")[0] for r in (env.get("repairs") or []))
        lines.append([
            iid,
            env.get("language", cand.get("language") or ""),
            "yes" if built else "no",
            "yes" if validated else ("no" if val else "-"),
            str(len(ours)) if val else "-",
            str(len(given)),
            f"{agree[0]}/{agree[1]}{mark}" if agree else "-",
            (val.get("log_parser") or "none") if validated else "-",
            *quality(val),
            failure,
            repairs,
            f"{env.get('total_seconds', 0):.0f}" if env else "-",
            # What the launch's own commands took (setup and the baseline tests), against
            # which the launch's wall time shows kiln's overhead.
            f"{(env.get('setup_seconds') or 0) + (env.get('test_seconds') or 0):.0f}" if env else "-",
            f"{val.get('total_seconds', 0):.0f}" if val else "-",
        ])
    n = max(totals["n"], 1)
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(x.replace("|", "\\|") for x in line) + " |")
    else:
        widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(x.ljust(w) for x, w in zip(line, widths)))
    compared = max(totals["compared"], 1)
    print(
        f"\n{totals['n']} instances: built {totals['built']} ({100 * totals['built'] / n:.0f} %), "
        f"validated {totals['validated']} ({100 * totals['validated'] / n:.0f} %); "
        f"of {totals['compared']} compared with the published FAIL_TO_PASS: exact {totals['exact']} "
        f"({100 * totals['exact'] / compared:.0f} %), exact by meaning {totals['meaning']} "
        f"({100 * totals['meaning'] / compared:.0f} %)"
    )


def write_config(args):
    """Writes the pipeline config of a `run` into the work directory; returns its path."""
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    mirrors = Path(args.mirrors).resolve()
    tasks = Path(args.tasks).resolve()
    ca = "/etc/ssl/certs/ca-certificates.crt"
    docker = f'[docker]\nca_bundle = "{ca}"\nmemory = "{args.memory}"\n' if os.path.exists(ca) else f'[docker]\nmemory = "{args.memory}"\n'
    only = f"instances = {json.dumps(args.only)}\n" if args.only else ""
    config = f"""# Written by scripts/devset.py.
[dataset]
name = "{args.dataset}"
root = "datasets"

{docker}
[sources.tasks]
kind = "ingest"
path = "{tasks}"
clone_url = "{mirrors}/{{owner}}/{{name}}"
{only}
[stages.launch]
kind = "launch"
inputs = ["tasks"]
concurrency = {args.concurrency}
command_timeout = "{args.timeout}"
test_timeout = "{args.timeout}"
date_cutoff = {"false" if args.no_cutoff else "true"}
reuse = {"true" if args.reuse else "false"}
verify_reuse = {args.verify_reuse}
test_scope = "{args.test_scope}"

[stages.validate]
kind = "validate"
inputs = ["tasks", "launch"]
repeats = {args.repeats}
concurrency = {args.concurrency}
test_timeout = "{args.timeout}"
full_suite_every = {args.full_suite_every}

[stages.export]
kind = "export"
inputs = ["tasks", "launch", "validate"]
{'formats = ["parquet", "harbor"]' if args.harbor else ""}
"""
    path = work / "pipeline.toml"
    path.write_text(config)
    return path


def run(args):
    path = write_config(args)
    started = time.time()
    result = subprocess.run(
        [args.kiln, "--json", "--config", str(path), "run", "--new"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        sys.exit(f"devset.py: kiln exited {result.returncode} without a report")
    print(f"run {report['run_dir']} ({time.time() - started:.0f} s, exit {result.returncode})\n")
    table(report["run_dir"], args.markdown)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run kiln on a task file and print the table")
    r.add_argument("tasks")
    r.add_argument("--mirrors", required=True, help="directory of mirrors, <owner>/<name> inside")
    r.add_argument("--work", default="devset-work", help="where the config and datasets go")
    r.add_argument("--kiln", default="kiln", help="the kiln binary")
    r.add_argument("--dataset", default="devset")
    r.add_argument("--only", nargs="*", default=[], help="only these instance ids")
    r.add_argument("--reuse", action="store_true", help="launch with reuse = true (an instance starts from an ancestor commit's environment)")
    r.add_argument("--verify-reuse", type=int, default=0, metavar="N", help="with --reuse: launch every Nth reused instance cold too and compare")
    r.add_argument("--test-scope", choices=["auto", "touched", "all"], default="auto", help="[stages.launch] test_scope: which tests the recorded command runs")
    r.add_argument("--harbor", action="store_true", help="also export the release as Harbor tasks (formats = [\"parquet\", \"harbor\"]), for scripts/harbor-check.sh")
    r.add_argument("--repeats", type=int, default=2)
    r.add_argument("--full-suite-every", type=int, default=10, help="[stages.validate] full_suite_every: where test_scope narrowed the tests, 1 validated row in N also runs the whole suite (1: every row, 0: none)")
    r.add_argument("--concurrency", type=int, default=1)
    r.add_argument("--timeout", default="60m")
    r.add_argument("--memory", default="8g")
    r.add_argument("--no-cutoff", action="store_true", help="resolve unpinned dependencies as of today")
    r.add_argument("--markdown", action="store_true")
    t = sub.add_parser("table", help="print the table of an existing run")
    t.add_argument("run_dir")
    t.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    else:
        table(args.run_dir, args.markdown)


if __name__ == "__main__":
    main()
