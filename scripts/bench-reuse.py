"""Figures of environment reuse in one kiln run, from its launch rows and the engine.

    python3 scripts/bench-reuse.py RUN_DIR

RUN_DIR is a run made with `[stages.launch] reuse = true` and `verify_reuse = 1` (so that every
reused instance was also launched cold, in the same run: `reuse_check` holds both times), for
example `scripts/devset.py run TASKS --reuse --verify-reuse 1 ...` on tasks with several commits
of one repository. Prints, per reused instance: its source, the cold and the reused launch times
and their ratio, whether the baselines agreed; and per environment image of the run: its size and
the bytes it holds that no other image shares (`docker system df -v`), and for each reused one
the bytes its own layer adds against what its source (a cold launch) adds to its base image. Needs pyarrow and the Docker CLI.
"""

import glob
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def size(text):
    """Bytes of a size as `docker system df` prints it (`931.5MB`)."""
    match = re.fullmatch(r"([\d.]+)\s*([kKMGT]?B)", text.strip())
    return float(match.group(1)) * UNITS[match.group(2)] if match else 0.0


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = Path(sys.argv[1])
    rows = []
    for part in sorted(glob.glob(str(run / "launch" / "*.parquet"))):
        rows.extend(pq.read_table(part).to_pylist())
    if not rows:
        sys.exit(f"bench-reuse: no launch rows under {run}")
    images = json.loads(
        subprocess.run(
            ["docker", "system", "df", "-v", "--format", "{{json .Images}}"],
            capture_output=True, text=True, check=True,
        ).stdout
    )
    by_id = {i["ID"]: i for i in images}
    by_instance = {r["instance_id"]: r for r in rows}

    print("reused instance            source                     cold s  reused s  ratio  baseline")
    ratios = []
    for r in rows:
        check = r.get("reuse_check") or ""
        times = re.search(r"cold launch ([\d.]+) s, reused ([\d.]+) s", check)
        if not r.get("reused_from") or not times:
            continue
        cold, reused = float(times.group(1)), float(times.group(2))
        ratios.append(reused / cold)
        print(f"{r['instance_id']:<26} {r['reused_from']:<26} {cold:>6.1f}  {reused:>8.1f}  "
              f"{reused / cold:>5.2f}  {check.split(' (')[0]}")
    if ratios:
        print(f"mean reused/cold: {sum(ratios) / len(ratios):.2f} over {len(ratios)} instance(s)")

    print("\nimage of                   started from               size MB  own MB")
    for r in rows:
        image = by_id.get(r.get("image_digest") or "")
        if not image:
            continue
        print(f"{r['instance_id']:<26} {(r.get('reused_from') or 'cold'):<26} "
              f"{size(image['Size']) / 1e6:>7.0f}  {size(image['UniqueSize']) / 1e6:>6.0f}")
    # A cold environment's own bytes are its image less its base image; a reused one's are the
    # layer it adds on its source's image.
    for r in rows:
        source = by_instance.get(r.get("reused_from") or "")
        mine = by_id.get(r.get("image_digest") or "")
        theirs = by_id.get((source or {}).get("image_digest") or "")
        if not (source and mine and theirs):
            continue
        base = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Size}}", source["base_image"]],
            capture_output=True, text=True,
        ).stdout.strip()
        cold_own = size(theirs["Size"]) - float(base or 0)
        if cold_own > 0:
            print(f"{r['instance_id']}: {size(mine['UniqueSize']) / 1e6:.0f} MB of its own against "
                  f"{cold_own / 1e6:.0f} MB a cold environment adds to its base image "
                  f"({size(mine['UniqueSize']) / cold_own:.2f})")

if __name__ == "__main__":
    main()
