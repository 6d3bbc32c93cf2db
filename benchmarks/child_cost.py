"""What a benchmark's child process cost, measured from outside it (bench_scale.py, bench_import.py)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time


def measured(cmd: list[str]) -> dict[str, float | int | str]:
    """Run ``cmd``; its wall and CPU (user + sys, every thread) seconds, peak RSS (MB), exit status and
    the end of its stderr. The stderr goes to a file, not a pipe: a child that writes more than a pipe
    holds would block on it while this waits for the child."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        err.seek(max(0, err.tell() - 400))
        tail = err.read().decode(errors="replace")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1e3,  # Linux: kB
        "rc": os.waitstatus_to_exitcode(status),
        "stderr": tail,
    }
