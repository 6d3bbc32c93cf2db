"""Straggler analysis at scale (issue 27): 1,024 ranks x 1,000 iterations x 20 sizes.

Each size's samples (arrival and completion of every rank at every iteration, on one clock) are
made in memory with one slow rank (+300 us, noise 20 us); then, timed together, what the analysis
does with them: ``common.arrivals.summarise`` (the bounded record; group rank 0 does the same per
point in a run), the records written to a real run directory's arrivals.jsonl and read back through
``AnalysisContext.load`` (every field checked), and the stragglers rule. Peak RSS of the process
(samples included) and wall time; the verdict must name the slow rank in every size.

    python benchmarks/bench_stragglers.py [--ranks 1024] [--iters 1000] [--sizes 20]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from netbench.collectives.arrivals import Stamps, summarise
from netbench.reports.context import AnalysisContext
from netbench.reports.rules import stragglers

from netbench.common.rundir import ARRIVALS_JSONL


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--sizes", type=int, default=20)
    ap.add_argument("--per-host", type=int, default=8)
    a = ap.parse_args()
    hosts = [f"n{i:04d}" for i in range(a.ranks // a.per_host)]
    slow = a.ranks // 3
    rng = np.random.default_rng(0)
    wall = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        (run / "results.jsonl").write_text("")
        (run / "run.json").write_text(json.dumps({"schema": "netbench.run/1", "status": "completed"}))
        with open(run / ARRIVALS_JSONL, "w") as fh:
            for s in range(a.sizes):
                start = np.arange(a.iters)[:, None] * 5_000.0
                arrive = start + rng.exponential(20.0, (a.iters, a.ranks))
                arrive[:, slow] += 300.0
                done = arrive.max(axis=1, keepdims=True) + 100.0
                st = Stamps(arrive, done, np.zeros(a.ranks), np.full(a.ranks, 10.0))
                t0 = time.perf_counter()
                rec = summarise(st, group="ring", pattern="ring", hosts=hosts, collective="all_reduce",
                                bytes=1 << (10 + s), in_place=False, engine="torch")
                fh.write(json.dumps(rec.to_dict()) + "\n")
                wall += time.perf_counter() - t0
                del arrive, done, st
        t0 = time.perf_counter()
        ctx = AnalysisContext.load(run)
        found = stragglers.check(ctx)
        wall += time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    named = [(f.rule, f.subject, f.evidence["straggler_rank"], f.evidence["sizes_named"]) for f in found]
    print(f"{a.ranks} ranks x {a.iters} iterations x {a.sizes} sizes: analysis {wall:.2f} s, "
          f"peak RSS {rss_mb:.0f} MB; findings {named}")
    assert named == [("straggler", hosts[slow // a.per_host], slow, a.sizes)], named


if __name__ == "__main__":
    main()
