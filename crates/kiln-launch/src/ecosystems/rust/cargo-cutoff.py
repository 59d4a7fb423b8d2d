#!/usr/bin/env python3
"""Pins a freshly generated Cargo.lock to crates published before a date.

Usage: cargo-cutoff.py CUTOFF [--self-test]

Cargo resolves to the newest versions that satisfy the manifests and cannot resolve "as of" a
date. Run after `cargo generate-lockfile` in the project root, this reads the crates.io sparse
index (whose entries carry each version's `pubtime`), finds every locked crates.io package
published after CUTOFF (RFC 3339), and moves it to the newest semver-compatible version published
on or before CUTOFF:

1. all at once, by rewriting their versions and checksums in Cargo.lock and letting cargo
   re-resolve with the edited lock as its preference (`cargo metadata`);
2. then one by one with `cargo update -p NAME@VERSION --precise OLDER` for what is still late,
   repeated while it makes progress (a downgrade can be blocked by a late crate that a later
   downgrade removes).

A crate with no compatible version before CUTOFF (one that did not exist yet, or that a
manifest requires at a newer version) is left as resolved and listed. The exit status is 0
when the lock was processed, 1 when the index or cargo could not be used at all.
"""

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.request

INDEX = os.environ.get("KILN_CRATES_INDEX", "https://index.crates.io").rstrip("/")
REGISTRY_SOURCES = (
    "registry+https://github.com/rust-lang/crates.io-index",
    "sparse+https://index.crates.io/",
)
VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$")


def utc(text):
    """An RFC 3339 time as `YYYY-MM-DDTHH:MM:SSZ`, the form of the index's `pubtime`."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(message):
    print(f"[kiln] {message}", flush=True)


def parse_version(text):
    """(major, minor, patch, pre) or None; `pre` is '' for a release."""
    m = VERSION.match(text)
    if not m:
        return None
    return int(m[1]), int(m[2]), int(m[3]), m[4] or ""


def sort_key(version):
    major, minor, patch, pre = version
    # A release sorts after its pre-releases.
    return (major, minor, patch, pre == "", pre)


def compatible(a, b):
    """Cargo's caret compatibility: same major, or same minor below 1.0, or same patch below 0.1."""
    if a[0] != b[0]:
        return False
    if a[0] > 0:
        return True
    if a[1] != b[1]:
        return False
    return a[1] > 0 or a[2] == b[2]


def index_path(name):
    name = name.lower()
    if len(name) <= 2:
        return f"{len(name)}/{name}"
    if len(name) == 3:
        return f"3/{name[0]}/{name}"
    return f"{name[:2]}/{name[2:4]}/{name}"


def fetch_index(name):
    """{version: entry} of one crate, from the sparse index."""
    url = f"{INDEX}/{index_path(name)}"
    last = None
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                text = response.read().decode()
            return {e["vers"]: e for e in map(json.loads, filter(None, text.splitlines()))}
        except Exception as e:  # noqa: BLE001 - retried, then reported
            last = e
    raise RuntimeError(f"cannot read the crates.io index for {name} at {url}: {last}")


def older_candidates(entries, locked, cutoff):
    """Versions published on or before `cutoff`, compatible with `locked`, newest first."""
    want = parse_version(locked)
    found = []
    for vers, entry in entries.items():
        v = parse_version(vers)
        pub = entry.get("pubtime")
        if v is None or pub is None or pub > cutoff or entry.get("yanked"):
            continue
        if v[3] and not want[3]:
            continue
        if compatible(v, want) and sort_key(v) < sort_key(want):
            found.append((sort_key(v), vers))
    return [vers for _, vers in sorted(found, reverse=True)]


def late_packages(lock, index, cutoff):
    """(name, version) of locked crates.io packages published after `cutoff`."""
    late = []
    for package in lock.get("package", []):
        if not package.get("source", "").startswith(REGISTRY_SOURCES):
            continue
        entry = index.get(package["name"], {}).get(package["version"])
        if entry and entry.get("pubtime") and entry["pubtime"] > cutoff:
            late.append((package["name"], package["version"]))
    return late


def read_lock():
    with open("Cargo.lock", "rb") as f:
        return tomllib.load(f)


def load_index(lock, index):
    names = {
        p["name"]
        for p in lock.get("package", [])
        if p.get("source", "").startswith(REGISTRY_SOURCES) and p["name"] not in index
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for name, entries in zip(names, pool.map(fetch_index, names)):
            index[name] = entries


def rewrite_lock(text, moves, index):
    """Cargo.lock text with each (name, old) in `moves` set to its new version and checksum."""
    out = []
    blocks = text.split("\n[[package]]\n")
    for i, block in enumerate(blocks):
        name = re.search(r'^name = "([^"]+)"$', block, re.M)
        version = re.search(r'^version = "([^"]+)"$', block, re.M)
        key = (name[1], version[1]) if name and version else None
        if i > 0 and key in moves:
            new = moves[key]
            block = block.replace(f'version = "{key[1]}"', f'version = "{new}"', 1)
            cksum = index[key[0]][new].get("cksum")
            if cksum:
                block = re.sub(r'^checksum = "[0-9a-f]+"$', f'checksum = "{cksum}"', block, flags=re.M)
        out.append(block)
    return "\n[[package]]\n".join(out)


def cargo(*args):
    return subprocess.run(["cargo", *args], capture_output=True, text=True)


def main(cutoff):
    index = {}
    lock = read_lock()
    total = sum(1 for p in lock.get("package", []) if p.get("source", "").startswith(REGISTRY_SOURCES))
    load_index(lock, index)
    late = late_packages(lock, index, cutoff)
    log(f"cut-off {cutoff}: {total} crates.io packages locked, {len(late)} published after it")
    if not late:
        return 0

    # 1. Everything at once: the edited lock is cargo's preference when it resolves again.
    moves = {}
    for name, version in late:
        candidates = older_candidates(index[name], version, cutoff)
        if candidates:
            moves[(name, version)] = candidates[0]
    with open("Cargo.lock") as f:
        original = f.read()
    with open("Cargo.lock", "w") as f:
        f.write(rewrite_lock(original, moves, index))
    result = cargo("metadata", "--format-version", "1", "--quiet")
    if result.returncode != 0:
        log("the edited Cargo.lock did not resolve; going one crate at a time")
        log(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "(no message)")
        with open("Cargo.lock", "w") as f:
            f.write(original)

    # 2. One at a time, while that makes progress.
    failures = {}
    for _ in range(8):
        lock = read_lock()
        load_index(lock, index)
        late = late_packages(lock, index, cutoff)
        progress = False
        for name, version in late:
            for candidate in older_candidates(index[name], version, cutoff)[:3]:
                result = cargo("update", "--quiet", "-p", f"{name}@{version}", "--precise", candidate)
                if result.returncode == 0:
                    progress = True
                    failures.pop(name, None)
                    break
                lines = result.stderr.strip().splitlines()
                failures[name] = lines[-1] if lines else "cargo update failed"
            else:
                failures.setdefault(name, "no compatible version published before the cut-off")
        if not progress:
            break

    lock = read_lock()
    load_index(lock, index)
    late = late_packages(lock, index, cutoff)
    before = {(p["name"], p["version"]) for p in tomllib.loads(original).get("package", [])}
    after = {(p["name"], p["version"]) for p in lock.get("package", [])}
    moved = sorted(before - after)
    log(f"{len(moved)} locked versions moved to releases before the cut-off, {len(late)} left newer")
    for name, version in late:
        log(f"  left newer: {name} {version} ({failures.get(name, 'required by the manifests')})")
    return 0


def self_test():
    assert compatible(parse_version("1.2.3"), parse_version("1.9.0"))
    assert not compatible(parse_version("0.2.3"), parse_version("0.3.0"))
    assert compatible(parse_version("0.2.3"), parse_version("0.2.9"))
    assert not compatible(parse_version("0.0.3"), parse_version("0.0.4"))
    assert sort_key(parse_version("1.0.0-rc.1")) < sort_key(parse_version("1.0.0"))
    assert utc("2024-06-01T14:00:00+02:00") == "2024-06-01T12:00:00Z"
    assert utc("2024-06-01T12:00:00Z") == "2024-06-01T12:00:00Z"
    assert index_path("a") == "1/a" and index_path("ab") == "2/ab"
    assert index_path("Syn") == "3/s/syn" and index_path("serde") == "se/rd/serde"
    entries = {
        "1.0.0": {"vers": "1.0.0", "pubtime": "2020-01-01T00:00:00Z"},
        "1.1.0": {"vers": "1.1.0", "pubtime": "2021-01-01T00:00:00Z", "yanked": True},
        "1.2.0-beta": {"vers": "1.2.0-beta", "pubtime": "2021-02-01T00:00:00Z"},
        "1.2.0": {"vers": "1.2.0", "pubtime": "2021-06-01T00:00:00Z"},
        "2.0.0": {"vers": "2.0.0", "pubtime": "2021-07-01T00:00:00Z"},
        "1.3.0": {"vers": "1.3.0", "pubtime": "2022-01-01T00:00:00Z"},
    }
    assert older_candidates(entries, "1.3.0", "2021-12-31T00:00:00Z") == ["1.2.0", "1.0.0"]
    assert older_candidates(entries, "1.3.0", "2019-01-01T00:00:00Z") == []
    lock = (
        'version = 3\n\n[[package]]\nname = "a"\nversion = "1.3.0"\n'
        'source = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "ff"\n'
        '\n[[package]]\nname = "b"\nversion = "1.3.0"\n'
    )
    entries["1.2.0"]["cksum"] = "ab"
    out = rewrite_lock(lock, {("a", "1.3.0"): "1.2.0"}, {"a": entries})
    assert 'name = "a"\nversion = "1.2.0"' in out and 'checksum = "ab"' in out, out
    assert 'name = "b"\nversion = "1.3.0"' in out, out
    late = late_packages(tomllib.loads(out), {"a": entries}, "2021-12-31T00:00:00Z")
    assert late == [], late
    print("self-test passed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    if len(sys.argv) != 2 or not re.match(r"^\d{4}-\d\d-\d\dT", sys.argv[1]):
        sys.exit("usage: cargo-cutoff.py CUTOFF (RFC 3339, e.g. 2024-06-01T00:00:00Z) | --self-test")
    try:
        sys.exit(main(utc(sys.argv[1])))
    except (ValueError, RuntimeError, OSError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"[kiln] cargo cut-off failed: {e}")
