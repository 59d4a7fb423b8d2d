"""Checks a kiln release's Harbor tasks with Harbor's own CLI; scripts/harbor-check.sh runs it in
the container where it installed Harbor (see there for what is checked and why).

    python harbor-check.py --tasks DIR --release-json FILE --work DIR --concurrency N --label K=V

Prints one line per check (checks.py) and the counts per agent and language; exits 1 when a check
fails.
"""

import argparse
import json
import subprocess
import time
import tomllib
from collections import Counter
from pathlib import Path

from checks import check, failures, finish

HARBOR = "/opt/harbor/bin/harbor"

# What each agent must score on every task: the oracle applies the gold patch, nop changes nothing.
EXPECTED = {"oracle": 1.0, "nop": 0.0}


def run(command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def overlay(work, label):
    """The compose overlay of every trial: no network (Harbor's own no-network mode needs Docker
    Hub), an init that stops `sleep infinity` at once, and this check's label."""
    key, value = label.split("=", 1)
    path = work / "offline.yaml"
    path.write_text(
        "services:\n  main:\n    network_mode: none\n    init: true\n"
        f"    labels:\n      {json.dumps(key)}: {json.dumps(value)}\n"
    )
    return path


def check_listing(tasks_dir, release_json):
    """The task directories are the tasks release.json lists; returns them with their task.toml."""
    manifest = json.loads(release_json.read_text())
    listed = sorted((manifest.get("harbor") or {}).get("tasks", []))
    found = sorted(d.name for d in tasks_dir.iterdir() if d.is_dir())
    check(listed == found and found, f"release.json lists {len(listed)} task(s), harbor/ holds {len(found)}")
    configs = {}
    for name in found:
        try:
            configs[name] = tomllib.loads((tasks_dir / name / "task.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            check(False, f"{name}/task.toml reads: {e}")
    left_out = (manifest.get("harbor") or {}).get("left_out", {})
    for name, reason in sorted(left_out.items()):
        print(f"     not a task: {name}: {reason}")
    return found, configs


def check_lint(tasks_dir, names):
    result = run([HARBOR, "lint", "--ignore", "shared-verifier", *[str(tasks_dir / n) for n in names]])
    check(result.returncode == 0, f"harbor lint --ignore shared-verifier passes on {len(names)} task(s)")
    if result.returncode != 0:
        print(result.stdout + result.stderr)


def check_images(configs):
    """Each task's image is on the engine with the id its row recorded."""
    wrong = []
    for name, config in sorted(configs.items()):
        image = config.get("environment", {}).get("docker_image", "")
        digest = config.get("metadata", {}).get("image_digest")
        found = run(["docker", "image", "inspect", "-f", "{{.Id}}", image])
        if found.returncode != 0:
            wrong.append(f"{name}: {image} is not on the engine")
        elif digest and found.stdout.strip() != digest:
            wrong.append(f"{name}: {image} is {found.stdout.strip()}, the row recorded {digest}")
    check(not wrong, f"{len(configs) - len(wrong)} of {len(configs)} task image(s) are on the engine as their rows recorded")
    for line in wrong:
        print(f"     {line}")


def trial_results(job_dir):
    """(task name, reward or None, exception type or None, trial dir) of every trial of a job."""
    results = []
    for path in sorted(job_dir.glob("*/result.json")):
        trial = json.loads(path.read_text())
        rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
        exception = (trial.get("exception_info") or {}).get("exception_type")
        results.append((trial.get("task_name"), rewards.get("reward"), exception, path.parent))
    return results


def tail(path, lines=15):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path.name} missing)"


def check_agent(agent, tasks_dir, names, configs, work, concurrency, compose):
    jobs = work / "jobs"
    job = f"{agent}-{time.strftime('%Y%m%d-%H%M%S')}"
    started = time.monotonic()
    result = run([
        HARBOR, "run", "-p", str(tasks_dir), "-a", agent, "-e", "docker",
        "-o", str(jobs), "--job-name", job, "-n", str(concurrency), "-k", "1",
        "--extra-docker-compose", str(compose), "-q", "-y",
    ])
    seconds = time.monotonic() - started
    (work / f"{job}.log").write_text(result.stdout + result.stderr)
    check(result.returncode == 0, f"harbor run -a {agent} exits 0 ({seconds:.0f} s)")
    if result.returncode != 0:
        print("\n".join((result.stdout + result.stderr).splitlines()[-20:]))
    results = trial_results(jobs / job)
    check(len(results) == len(names), f"{agent}: {len(results)} trial(s) for {len(names)} task(s)")
    want = EXPECTED[agent]
    good = sorted(name for name, reward, error, _ in results if reward == want and error is None)
    check(good == names, f"{agent}: reward {want:g} on {len(good)} of {len(names)} task(s)")
    for name, reward, error, trial in results:
        if reward != want or error is not None:
            print(f"     {name}: reward {reward}, exception {error}; verifier output:")
            print(tail(trial / "verifier" / "test-stdout.txt"))
    missing = sorted(set(names) - {name for name, *_ in results})
    for name in missing:
        print(f"     {name}: no trial (Harbor skipped the task)")
    languages = Counter(configs.get(n, {}).get("metadata", {}).get("language", "?") for n in names)
    good_languages = Counter(configs.get(n, {}).get("metadata", {}).get("language", "?") for n in good)
    print(f"     {agent} by language: " + ", ".join(
        f"{lang} {good_languages[lang]} of {count}" for lang, count in sorted(languages.items())
    ))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--release-json", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    names, configs = check_listing(args.tasks, args.release_json)
    if not names:
        finish()
    check_lint(args.tasks, names)
    check_images(configs)
    compose = overlay(args.work, args.label)
    for agent in EXPECTED:
        check_agent(agent, args.tasks, names, configs, args.work, args.concurrency, compose)
    finish()


if __name__ == "__main__":
    main()
