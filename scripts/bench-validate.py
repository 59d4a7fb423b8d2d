#!/usr/bin/env python3
"""Validate overhead: kiln's validate wall time per instance against the same test runs done
directly with `docker run`, in the same script.

    python3 scripts/bench-validate.py RUN_DIR [--stage validate] [--launch launch] [--tasks tasks]

RUN_DIR is a finished run (for example the one `kiln demo` prints). For every instance the
validate stage ran, the script replays what validation does, without kiln: for each side
(`before` = test patch, `after` = test + gold patch) and each repeat, a fresh container from the
environment image with the network off, the patches applied with `git apply`, the rebuild
commands, and the test command. It prints kiln's wall seconds, the sum of the test commands as
kiln recorded them, the wall seconds of the direct replay, and the ratios. Needs pyarrow.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq


def rows(stage_dir: Path):
    manifest = json.loads((stage_dir / "manifest.json").read_text())
    out = []
    for part in manifest["parts"]:
        out.extend(pq.read_table(stage_dir / part).to_pylist())
    return {row["instance_id"]: row for row in out}


def replay(image, patches, rebuild, test_command):
    """One direct run; returns wall seconds of `docker run` (container start included)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = ["cd /testbed"]
        for i, text in enumerate(patches):
            if text.strip():
                Path(tmp, f"{i}.patch").write_text(text)
                script.append(f"git apply /patches/{i}.patch")
        script.extend(f"( {command} )" for command in rebuild)
        script.append(f"( {test_command} ) >/dev/null 2>&1; true")
        started = time.monotonic()
        subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "-v", f"{tmp}:/patches:ro",
             image, "bash", "-c", " && ".join(script)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        return time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--stage", default="validate")
    parser.add_argument("--launch", default="launch")
    parser.add_argument("--tasks", default="tasks")
    args = parser.parse_args()

    validations = rows(args.run_dir / args.stage)
    environments = rows(args.run_dir / args.launch)
    candidates = rows(args.run_dir / args.tasks)
    print(f"{'instance':<28} {'runs':>4} {'kiln wall':>10} {'kiln tests':>11} {'direct':>8} {'wall/tests':>11} {'wall/direct':>12}")
    totals = [0.0, 0.0, 0.0]
    for instance_id, validation in sorted(validations.items()):
        env = environments[instance_id]
        task = candidates[instance_id]
        repeats = validation["repeats"]
        direct = 0.0
        for _ in range(repeats):
            direct += replay(env["image"], [task["test_patch"]], env["rebuild_commands"], env["test_command"])
            direct += replay(env["image"], [task["test_patch"], task["patch"]], env["rebuild_commands"], env["test_command"])
        wall, tests = validation["total_seconds"], validation["test_seconds"]
        totals[0] += wall
        totals[1] += tests
        totals[2] += direct
        print(f"{instance_id:<28} {2 * repeats:>4} {wall:>9.2f}s {tests:>10.2f}s {direct:>7.2f}s {wall / tests:>11.2f} {wall / direct:>12.2f}")
    if totals[1] > 0 and totals[2] > 0:
        print(f"{'all':<28} {'':>4} {totals[0]:>9.2f}s {totals[1]:>10.2f}s {totals[2]:>7.2f}s "
              f"{totals[0] / totals[1]:>11.2f} {totals[0] / totals[2]:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
