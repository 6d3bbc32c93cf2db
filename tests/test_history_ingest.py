"""``netbench history add`` (issue 49) keeps what the run's own report kept: it fits the pair model
alone (``reports.analyses.pair_analysis``, no headline reading every row again) and builds the
tables by index in Arrow, and a run added afterwards must read as the run that added itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from netbench.history.store import HistoryStore


def netbench(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NETBENCH_HISTORY": str(store)}
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_a_run_added_later_reads_as_the_run_that_added_itself(tmp_path: Path) -> None:
    """16 nodes on 2 leaves, a slow node and a slow uplink (the refit without its pairs): the run's
    report adds it to one store, ``history add`` to another; every figure is the same."""
    out = tmp_path / "run"
    res = netbench("simulate", "--nodes", "16", "--leaves", "2", "--pair-sizes", "1G", "--confirm-budget",
                   "0", "--fault", "node:node0005=0.8", "--fault", "uplink:leaf02=0.5", "--seed", "3",
                   "--out", str(out), store=tmp_path / "own")
    assert res.returncode == 2 and "node0005" in res.stdout, res.stderr  # 2: fail
    added = netbench("history", "add", str(out), store=tmp_path / "later")
    assert added.returncode == 0 and "added run" in added.stdout, added.stderr
    own, later = HistoryStore(tmp_path / "own"), HistoryStore(tmp_path / "later")
    for name in ("nodes", "links", "switches", "fleet"):
        a, b = own.table(name), later.table(name)
        assert a.num_rows > 0 and a.equals(b), name
    switches = later.table("switches").to_pylist()
    assert {s["switch"] for s in switches} == {"leaf01", "leaf02"} and all(s["pairs"] == 64 for s in switches)
    nodes = {n["host"]: n for n in later.table("nodes").to_pylist()}
    assert nodes["node0005"]["effect"] < -0.15 and abs(nodes["node0001"]["effect"]) < 0.05
