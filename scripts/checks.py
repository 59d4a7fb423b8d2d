"""What the check scripts (hub-check.py, swebench-check.py) share: one line per check, and an exit
code that says whether any failed."""

import os
import sys

failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def finish():
    """Exits 1 if a check failed, else 0, without Python's finalization. pyarrow's thread pools
    can abort the interpreter while it shuts down ("terminate called without an active
    exception", apache/arrow#45214, huggingface/datasets#7357), which turned a run whose every
    check passed into a SIGABRT."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failures else 0)
