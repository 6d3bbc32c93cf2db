"""Benchmark: `netbench report` (analysis + HTML) on simulated fleets of 1,024 nodes x 3 sizes and up.

Goals (issue 12, part 4): 1,024 nodes x 3 sizes in <= 30 s and <= 1 GB peak RSS; 4,096 nodes x 1
size in <= 120 s and <= 4 GB; the HTML <= 25 MB at any size. The run directory is written by
``netbench simulate`` (the real plan, the real row format), then ``netbench report RUN`` runs in a
child process, measured from outside: wall time, CPU time (user + system, every thread) and peak
RSS from ``wait4``, the size of report.html. On a shared machine wall time depends on the others'
load, so the load average is printed beside it and CPU time is the figure that does not.

    python benchmarks/bench_scale.py --nodes 1024 --leaves 32 --pair-sizes 64M,256M,1G [--run DIR] [--keep]
        [--fault node:node2049=0.6]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from child_cost import measured

NETBENCH = [sys.executable, "-m", "netbench"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--leaves", type=int, default=32)
    ap.add_argument("--pair-sizes", default="64M,256M,1G")
    ap.add_argument("--oversubscription", default="2")
    ap.add_argument("--run", help="use this run directory (simulated into it when it has no results.jsonl)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    ap.add_argument("--fault", action="append", default=[], help="planted in the simulation (--fault)")
    args = ap.parse_args()
    run = Path(args.run) if args.run else Path(tempfile.mkdtemp(prefix="nb-scale-")) / "run"
    try:
        if not (run / "results.jsonl").exists():
            sim = measured([
                *NETBENCH, "simulate", "--nodes", str(args.nodes), "--leaves", str(args.leaves),
                "--oversubscription", args.oversubscription, "--pair-sizes", args.pair_sizes,
                "--out", str(run), "--no-report", *(x for f in args.fault for x in ("--fault", f)),
            ])
            if sim["rc"] != 0:
                sys.exit(f"simulate failed ({sim['rc']}): {sim['stderr']}")
            print(
                f"simulate: wall {sim['wall']:.0f} s, CPU {sim['cpu']:.0f} s, peak RSS {sim['rss_mb']:.0f} MB"
            )
        rows = sum(1 for _ in (run / "results.jsonl").open("rb"))
        mb = (run / "results.jsonl").stat().st_size / 1e6
        load = os.getloadavg()[0]
        rep = measured([*NETBENCH, "report", str(run), "--format", "json"])
        html = (run / "report.html").stat().st_size / 1e6 if (run / "report.html").exists() else float("nan")
        print("| nodes | pair sizes | rows | results.jsonl MB | load avg (2 cores) | wall s | CPU s | "
              "peak RSS MB | report.html MB | exit |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(
            f"| {args.nodes} | {args.pair_sizes} | {rows} | {mb:.0f} | {load:.1f} | {rep['wall']:.1f} | "
            f"{rep['cpu']:.1f} | {rep['rss_mb']:.0f} | {html:.1f} | {rep['rc']} |"
        )
        if rep["rc"] not in (0, 1, 2):
            print(rep["stderr"])
    finally:
        if not args.run and not args.keep:
            shutil.rmtree(run.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
