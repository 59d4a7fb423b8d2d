#!/usr/bin/env python3
"""The factory's cost: CPU per validated task, and where it goes. Run through
scripts/bench-factory.sh, which builds kiln and finds a Python with pyarrow.

    bench-factory.py demo [--kiln BIN] [--work DIR] [--repeats N]
    bench-factory.py TASKS --mirrors DIR [--reuse] [--kiln BIN] [--work DIR] [--repeats N]
                     [--concurrency N] [--only ID ...] [--timeout 60m]

`demo` runs `kiln demo` (the built-in fixtures); TASKS runs a task file of real instances from
local mirrors, with the config `scripts/devset.py run` writes (a benchmark's records, the
devset for example).

Each run starts from a cold engine cache: a Docker engine of its own (its own data root, exec
root, bridge and cgroup parent) with nothing but the Debian base images, copied from the
default engine when it has them (making them is the OS's work, not kiln's; without them kiln
makes them with debootstrap and that counts). Then it prints, per instance and in total: wall
time; CPU seconds of kiln (its process and its children: git, tar, debootstrap) and of every
container (the engine's cgroup accounting of the containers under the bench engine's cgroup
parent, builds included, and the CPU time of its dockerd and containerd); validated tasks per
core-hour (validated instances over CPU hours); and the share of CPU in: kiln on the host
(clone, checkout, packing, patches applied on the host, parsing), image builds and other
containers (base images, system layers, Dockerfile checks: the containers' total less what the
rows account for), setup, compile, baseline tests, validation builds and validation test runs
(the rows' cpu_* columns, which kiln reads from the same cgroup accounting after every
command).

The last line reads `validated per core-hour: X`.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import devset  # noqa: E402  (the config writer and the table reader)

BRIDGE = "kilnbench0"
BRIDGE_ADDR = "172.30.232.1/24"
BASES = ["debian:bookworm", "debian:bullseye", "debian:trixie"]

ROW_PHASES = [
    ("setup", "launch", "cpu_setup_seconds"),
    ("compile", "launch", "cpu_compile_seconds"),
    ("baseline tests", "launch", "cpu_baseline_seconds"),
    ("validation builds", "validate", "cpu_build_seconds"),
    ("validation test runs", "validate", "cpu_test_seconds"),
]


def log(message):
    print(f"bench-factory: {message}", file=sys.stderr, flush=True)


def sh(args, **kwargs):
    return subprocess.run(args, check=False, **kwargs)


class Engine:
    """A Docker engine of the bench's own: nothing cached, its containers under one cgroup."""

    def __init__(self, root):
        self.root = root
        self.host = f"unix://{root / 'docker.sock'}"
        self.parent = f"kiln-bench-{os.getpid()}"
        self.process = None

    def start(self):
        self.root.mkdir(parents=True, exist_ok=True)
        sh(["ip", "link", "del", BRIDGE], stderr=subprocess.DEVNULL)
        for args in (["link", "add", BRIDGE, "type", "bridge"], ["addr", "add", BRIDGE_ADDR, "dev", BRIDGE], ["link", "set", BRIDGE, "up"]):
            if sh(["ip", *args]).returncode != 0:
                sys.exit(f"bench-factory: ip {' '.join(args)} failed (needs root)")
        out = open(self.root / "dockerd.log", "ab")
        self.process = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "dockerd.pid"),
             "--bridge", BRIDGE, "--storage-driver", "overlay2", "--cgroup-parent", self.parent],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
        deadline = time.time() + 60
        while sh(["docker", "-H", self.host, "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            if time.time() > deadline or self.process.poll() is not None:
                sys.exit(f"bench-factory: the bench engine did not start; see {self.root / 'dockerd.log'}")
            time.sleep(0.3)

    def load_bases(self):
        """The Debian bases from the default engine, where it has them."""
        present = [b for b in BASES if sh(["docker", "image", "inspect", b], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0]
        if not present:
            log("the default engine has no Debian base image; kiln makes them (debootstrap), and that counts")
            return
        save = subprocess.Popen(["docker", "save", *present], stdout=subprocess.PIPE)
        sh(["docker", "-H", self.host, "load", "-q"], stdin=save.stdout, stdout=subprocess.DEVNULL)
        save.wait()
        log(f"copied {' '.join(present)} from the default engine")

    def daemons_cpu(self):
        """CPU seconds of dockerd and the containerd it started (their waited-for children too)."""
        pids = [self.process.pid] if self.process else []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                ppid = stat.rsplit(")", 1)[1].split()[1]
                if self.process and ppid == str(self.process.pid) and "(containerd)" in stat:
                    pids.append(int(entry.name))
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # utime, stime, cutime, cstime (fields 14-17 of stat; 12-15 after the name).
            total += sum(int(f) for f in fields[11:15]) / tick
        return total

    def containers_cpu(self):
        """CPU seconds of every container the engine ran, from the cgroup parent's total: the
        kernel adds a task's time to every ancestor as it charges it, so removed containers
        stay counted."""
        v1 = Path("/sys/fs/cgroup/cpuacct") / self.parent / "cpuacct.usage"
        if v1.exists():
            return int(v1.read_text()) / 1e9
        v2 = Path("/sys/fs/cgroup") / self.parent / "cpu.stat"
        if v2.exists():
            for line in v2.read_text().splitlines():
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
        return 0.0

    def stop(self):
        if self.process:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        sh(["ip", "link", "del", BRIDGE], stderr=subprocess.DEVNULL)
        for base in (Path("/sys/fs/cgroup"), *Path("/sys/fs/cgroup").glob("*")):
            cgroup = base / self.parent
            if cgroup.is_dir():
                for child in sorted(cgroup.glob("*/"), reverse=True):
                    try:
                        child.rmdir()
                    except OSError:
                        pass
                try:
                    cgroup.rmdir()
                except OSError:
                    pass


def run_kiln(args, engine, work):
    """Runs kiln once; returns (its JSON report, wall seconds, CPU seconds of kiln and its
    children)."""
    env = dict(os.environ, DOCKER_HOST=engine.host)
    if args.tasks == "demo":
        command = [args.kiln, "--json", "demo", "--dir", str(work / "demo"), "--repeats", str(args.repeats)]
    else:
        config = devset.write_config(argparse.Namespace(
            work=str(work), mirrors=args.mirrors, tasks=args.tasks, dataset="bench", only=args.only,
            reuse=args.reuse, verify_reuse=0, test_scope="auto", repeats=args.repeats,
            concurrency=args.concurrency, timeout=args.timeout, memory=args.memory, no_cutoff=False,
        ))
        command = [args.kiln, "--json", "--config", str(config), "run", "--new"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    log(f"running {' '.join(command)}")
    # Progress goes to a log: the run's events are JSON lines on stderr.
    with open(work / "kiln.log", "w") as progress:
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=progress, text=True)
    wall = time.time() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        sys.exit(f"bench-factory: kiln exited {done.returncode} without a report")
    if done.returncode != 0:
        log(f"kiln exited {done.returncode}; the figures cover what it did")
    return report, wall, cpu


def rows(run_dir, stage):
    path = Path(run_dir) / stage
    if not (path / "manifest.json").exists():
        return {}
    return {r["instance_id"]: r for r in devset.read_table(path)}


def report_figures(run_dir, wall, kiln_cpu, containers_cpu, daemons_cpu):
    launches = rows(run_dir, "launch")
    validations = rows(run_dir, "validate")
    ids = sorted(set(launches) | set(validations))
    header = ["instance", "outcome", "launch s", "validate s", "setup", "compile", "baseline", "v-build", "v-tests", "CPU s"]
    table = []
    sums = {name: 0.0 for name, _, _ in ROW_PHASES}
    validated = 0
    for iid in ids:
        env, val = launches.get(iid, {}), validations.get(iid, {})
        outcome = val.get("status") or (f"launch {env.get('status')}" if env else "-")
        validated += val.get("status") == "validated"
        cells = []
        for name, stage, column in ROW_PHASES:
            row = env if stage == "launch" else val
            # A kiln before the cpu_* columns (schema 13) gives totals only.
            value = row.get(column)
            sums[name] += value or 0.0
            cells.append(value)
        shown = [("-" if c is None else f"{c:.1f}") for c in cells]
        table.append([iid, outcome, f"{env.get('total_seconds', 0):.0f}", f"{val.get('total_seconds', 0):.0f}" if val else "-",
                      *shown, f"{sum(c or 0.0 for c in cells):.1f}"])
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    accounted = sum(sums.values())
    builds = max(containers_cpu - accounted, 0.0)
    total = kiln_cpu + containers_cpu + daemons_cpu
    print(f"\n{len(ids)} instances, {validated} validated; wall {wall:.0f} s; CPU {total:.0f} s "
          f"(kiln {kiln_cpu:.0f} s, containers {containers_cpu:.0f} s, engine daemons {daemons_cpu:.0f} s)")
    if containers_cpu + 0.5 < accounted:
        print(f"note: the rows account for {accounted:.0f} s, more than the cgroup's {containers_cpu:.0f} s")
    shares = [("kiln on the host", kiln_cpu), ("image builds and other containers", builds),
              *sums.items(), ("engine daemons", daemons_cpu)]
    for name, seconds in shares:
        print(f"  {name:<34} {seconds:9.1f} s  {100 * seconds / total if total else 0:5.1f} %")
    per_core_hour = validated / (total / 3600) if total else 0.0
    print(f"validated per core-hour: {per_core_hour:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", help="`demo`, or a task file (JSON lines or Parquet)")
    parser.add_argument("--mirrors", help="with a task file: directory of mirrors, <owner>/<name> inside")
    parser.add_argument("--reuse", action="store_true", help="with a task file: launch with reuse = true")
    parser.add_argument("--kiln", default="kiln", help="the kiln binary")
    parser.add_argument("--work", help="working directory (default: a new one under /var/tmp, removed at the end)")
    parser.add_argument("--repeats", type=int, default=3, help="validation runs per side (default 3)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", default="60m")
    parser.add_argument("--memory", default="8g")
    parser.add_argument("--only", nargs="*", default=[], help="only these instance ids")
    parser.add_argument("--keep", action="store_true", help="keep the working directory and the engine's data")
    args = parser.parse_args()
    if args.tasks == "demo" and (args.mirrors or args.reuse or args.only):
        parser.error("demo takes none of --mirrors, --reuse, --only (its fixtures are one instance per repository)")
    if args.tasks != "demo":
        if not args.mirrors:
            parser.error("a task file needs --mirrors")
        if not Path(args.tasks).is_file():
            parser.error(f"no task file at {args.tasks}")
    if os.geteuid() != 0:
        parser.error("needs root: it starts a Docker engine of its own")
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="kb-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    engine = Engine(work / "engine")
    try:
        engine.start()
        engine.load_bases()
        containers_before, daemons_before = engine.containers_cpu(), engine.daemons_cpu()
        report, wall, kiln_cpu = run_kiln(args, engine, work)
        containers = engine.containers_cpu() - containers_before
        daemons = engine.daemons_cpu() - daemons_before
        report_figures(report["run_dir"], wall, kiln_cpu, containers, daemons)
    finally:
        engine.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
