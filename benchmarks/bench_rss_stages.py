"""Where a netbench command's memory goes, stage by stage (issue 48): runs ``netbench ARGS...`` in
this process with a thread that reads VmRSS (``/proc/self/status``) every 0.2 s and writes a line
when it passes its peak by 25 MB, or every 3 s, with the main thread's innermost netbench frames.

    python benchmarks/bench_rss_stages.py simulate --nodes 2048 --no-history --out /tmp/n2048

The lines go to ``$RSS_LOG`` (default ``rss-stages.log``); ``/usr/bin/time -v`` around it gives the
peak as the kernel counted it (the sampler sees most of it, not a spike between two reads)."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import IO

STEP_S = 0.2
RISE_MB = 25
EVERY_S = 3.0


def _rss_mb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def _stack(thread_id: int) -> str:
    frames = traceback.extract_stack(sys._current_frames().get(thread_id))
    ours = [f"{f.filename.rsplit('/', 2)[-2]}/{f.filename.rsplit('/', 1)[-1]}:{f.lineno}:{f.name}"
            for f in frames if "netbench" in f.filename or "/reports/" in f.filename]
    return " < ".join(reversed(ours[-6:]))


def _sample(log: IO[str], main_id: int, t0: float) -> None:
    peak, said = 0, 0.0
    while True:
        now, mb = time.monotonic() - t0, _rss_mb()
        if mb > peak + RISE_MB or now - said > EVERY_S:
            log.write(f"{now:7.1f}s {mb:6d}MB peak={max(peak, mb)} | {_stack(main_id)}\n")
            log.flush()
            said = now
        peak = max(peak, mb)
        time.sleep(STEP_S)


def main() -> None:
    log = open(os.environ.get("RSS_LOG", "rss-stages.log"), "w")  # noqa: SIM115 - open while the command runs
    args = (log, threading.main_thread().ident, time.monotonic())
    threading.Thread(target=_sample, args=args, daemon=True).start()
    from netbench.cli import main as netbench

    sys.argv = ["netbench", *sys.argv[1:]]
    netbench()


if __name__ == "__main__":
    main()
