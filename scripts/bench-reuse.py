"""Figures of environment reuse in one kiln run, from its launch rows and the engine.

    python3 scripts/bench-reuse.py RUN_DIR

RUN_DIR is a run made with `[stages.launch] reuse = true` and `verify_reuse = 1` (so that every
reused instance was also launched cold, in the same run: `reuse_check` holds both times), for
example `scripts/devset.py run TASKS --reuse --verify-reuse 1 ...` on tasks with several commits
of one repository. Prints, per reused instance: its source, the cold and the reused launch times
and their ratio, whether the baselines agreed; and per environment image of the run: its size and
the bytes it holds that no other image shares (`docker system df -v`), and for each reused one
the bytes its own layer adds against what its source (a cold launch) adds to its base image;
last, the bytes all the run's environments take above their base images, what they share
(system layers, a source under a reused image) counted once, per instance, against each holding
all it adds. Works on runs without reuse too (the last figure then shows what system layers
share). Needs pyarrow and the Docker CLI.
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

    shared_bytes(rows)


BASE_TAG = re.compile(r"kiln/[^:]+:.+-[0-9a-f]{8}")


def inspect(ref):
    """(id, parent id, size, tags) of a local image, or None."""
    out = subprocess.run(
        ["docker", "image", "inspect", "--format",
         "{{.Id}} {{.Parent}}|{{.Size}}|{{json .RepoTags}}", ref],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        return None
    ids, size_, tags = out.stdout.strip().split("|", 2)
    own, _, parent = ids.partition(" ")
    return own, parent.strip(), int(size_), json.loads(tags) or []


def shared_bytes(rows):
    """Bytes on disk the run's environments take above their base images: each image's own
    layer (its size less its parent's) counted once, so that what environments share (a
    system layer, a source's image under a reused one) counts once; against the same
    environments each holding all they add to their base image."""
    layers, alone, envs = {}, 0, 0
    for r in rows:
        ref = r.get("image_digest")
        image = inspect(ref) if ref else None
        if not image:
            continue
        envs += 1
        chain = []
        while image and not any(BASE_TAG.fullmatch(t) for t in image[3]):
            parent = inspect(image[1]) if image[1] else None
            chain.append((image[0], image[2] - (parent[2] if parent else 0),
                          any(t.startswith("kiln/layer:") for t in image[3])))
            image = parent
        alone += sum(own for _, own, _ in chain)
        for image_id, own, is_layer in chain:
            layers[image_id] = (own, is_layer)
    if not envs:
        return
    system = sum(own for own, is_layer in layers.values() if is_layer)
    total = sum(own for own, _ in layers.values())
    print(f"\n{envs} environment(s): {total / 1e6:.0f} MB on disk above their base images "
          f"({system / 1e6:.0f} MB of it in system layers), against {alone / 1e6:.0f} MB "
          f"unshared: {total / envs / 1e6:.0f} against {alone / envs / 1e6:.0f} MB per instance "
          f"({total / alone:.2f})")


if __name__ == "__main__":
    main()
