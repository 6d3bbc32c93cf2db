"""What the fleet history costs a report and a preflight (issue 49): report.html's history section
(``HistoryStage.section``: this run's tables, the headline series, the environment changes, the node
changes with their attribution, each finding's past) and preflight's comparison with each node's last
good run (``HistoryStage.last_good``), on a simulated nightly history of ``--nodes`` nodes and
``--nights`` nights (``netbench.sim.nightly``, its events from the seed), the run being the night
after the last, with ``--slow`` of its nodes 30% slow so the report has findings to tell.

    python benchmarks/bench_history_report.py --nodes 256 --nights 90
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules

from netbench.history.hook import HistoryStage
from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, environment, night_rows, plan_events, write_history


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--nights", type=int, default=90)
    ap.add_argument("--slow", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", type=Path, help="keep (or reuse) the store here")
    a = ap.parse_args()
    h = History(nodes=a.nodes, nights=a.nights, noise=0.05, shape="normal", seed=a.seed)
    h.events = plan_events(h)
    root = a.store or Path(tempfile.mkdtemp()) / "store"
    t0 = time.perf_counter()
    if not HistoryStore(root).exists():
        write_history(h, HistoryStore(root))
        print(f"store: {a.nights} nights of {a.nodes} nodes written in {time.perf_counter() - t0:.1f} s")
    tonight = History(nodes=a.nodes, nights=a.nights + 1, noise=h.noise, shape=h.shape, seed=h.seed,
                      events=[*h.events, Event("untied", a.nights, tuple(h.hosts[:a.slow]), 0.3)],
                      start=h.start)
    when = h.start + timedelta(days=a.nights)
    ctx = AnalysisContext.from_data(
        night_rows(tonight, a.nights, np.random.default_rng(a.seed + 1)),
        env={"hosts": environment(tonight, a.nights)},
        topology={host: tonight.leaf(i) for i, host in enumerate(tonight.hosts)},
        run={"run_id": f"{when:%Y%m%dT%H%M%SZ}-bench", "started": when.isoformat(), "command": "simulate"},
    )
    findings = run_rules(ctx)
    stage = HistoryStage(str(root), adds=False)
    t0 = time.perf_counter()
    section = stage.section(ctx, findings)
    t_section = time.perf_counter() - t0
    t0 = time.perf_counter()
    ctx.last_good = found = stage.last_good(ctx)
    t_last = time.perf_counter() - t0
    said = [f for f in run_rules(ctx) if f.rule == "slower_than_last_good"]
    assert section is not None
    print(f"section: {t_section:.2f} s ({len(section.series)} series, {len(section.marks)} marks, "
          f"{len(section.past)} findings' pasts); last good runs: {t_last:.2f} s ({len(found)} nodes, "
          f"{len(said)} findings); peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} "
          "MB")


if __name__ == "__main__":
    main()
