"""Figures of environment reuse in one kiln run, from its launch rows and the engine.

    python3 scripts/bench-reuse.py RUN_DIR

RUN_DIR is a run made with `[stages.launch] reuse = true` and `verify_reuse = 1` (so that every
reused instance was also launched cold, in the same run: `reuse_check` holds both times), for
example `scripts/devset.py run TASKS --reuse --verify-reuse 1 ...` on tasks with several commits
of one repository. Prints, per reused instance: its source, the cold and the reused launch times
and their ratio, whether the baselines agreed; per environment image of the run: its size and
the bytes it adds to the image it started from (its base image, or its source's environment),
and for each reused one that against what the cold launch its chain starts from adds; last,
the bytes all the run's environments take above their base images, what they share (system
layers, a source under a reused image) counted once, per instance, against each holding all it
adds. Works on runs without reuse too (the last figure then shows what system layers
share). Needs pyarrow and the Docker CLI.
"""

import glob
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = Path(sys.argv[1])
    rows = []
    for part in sorted(glob.glob(str(run / "launch" / "*.parquet"))):
        rows.extend(pq.read_table(part).to_pylist())
    if not rows:
        sys.exit(f"bench-reuse: no launch rows under {run}")
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

    # What each environment adds to the image it started from: a cold one to its base image
    # (with the system layer, if any), a reused one to its source's environment.
    def under(r):
        source = by_instance.get(r.get("reused_from") or "")
        return inspect(source["image_digest"] if source else r["base_image"])

    print("\nimage of                   started from               size MB  adds MB")
    added = {}
    for r in rows:
        image = inspect(r.get("image_digest") or "")
        if not image:
            continue
        start = under(r)
        added[r["instance_id"]] = image[2] - start[2] if start else None
        print(f"{r['instance_id']:<26} {(r.get('reused_from') or 'cold'):<26} "
              f"{image[2] / 1e6:>7.0f}  {(added[r['instance_id']] or 0) / 1e6:>7.0f}")
    # A reused environment against the cold one its chain starts from.
    for r in rows:
        root = by_instance.get(r.get("reused_from") or "")
        while root and root.get("reused_from") in by_instance:
            root = by_instance[root["reused_from"]]
        mine, cold = added.get(r["instance_id"]), added.get((root or {}).get("instance_id"))
        if root and not root.get("reused_from") and mine is not None and cold:
            print(f"{r['instance_id']}: adds {mine / 1e6:.0f} MB against {cold / 1e6:.0f} MB the "
                  f"cold {root['instance_id']} adds to its base image ({mine / cold:.2f})")

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
