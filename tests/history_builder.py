"""Small fleet histories for the report's and preflight's history tests: a few nightly runs of one
fabric (``netbench.sim.nightly``), named and dated as a test needs them."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from netbench.history.store import HistoryStore
from netbench.sim.nightly import Event, History, write_history

FIRMWARE_OLD, FIRMWARE_NEW = "28.39.1002", "28.41.1000"
ROLLOUT = tuple(f"node{i:04d}" for i in range(3, 8))  # 5 of 20: enough for the Fisher test to name it
ROLLOUT_NIGHT = 5


def nightly(store: Path, nodes: int = 20, nights: int = 10, events: list[Event] | None = None,
            history: type[History] = History) -> History:
    """``nights`` nights of ``nodes`` nodes ending the night before today, into ``store``; by default
    a NIC firmware rollout on night 5 that costs each of its 5 nodes 12%."""
    if events is None:
        events = [Event("tied", ROLLOUT_NIGHT, ROLLOUT, 0.12, "nic_firmware", FIRMWARE_NEW)]
    today = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    h = history(nodes=nodes, nights=nights, noise=0.03, shape="normal", seed=4, events=events,
                start=today - timedelta(days=nights))
    write_history(h, HistoryStore(store))
    return h


def netbench(*args: str, store: Path | str = "off") -> subprocess.CompletedProcess[str]:
    env = os.environ | {"NETBENCH_HISTORY": str(store)}
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def simulated_run(out: Path, nodes: int = 20, *faults: str) -> Path:
    """A simulated sweep of the history's fabric (every pair at 1G, one leaf), not added anywhere."""
    args = ["simulate", "--nodes", str(nodes), "--leaves", "1", "--pattern", "pairwise", "--pair-sizes", "1G",
            "--confirm-budget", "0", "--no-history", "--out", str(out)]
    for f in faults:
        args += ["--fault", f]
    res = netbench(*args)
    assert res.returncode in (0, 1, 2) and (out / "findings.json").is_file(), res.stderr[-3000:]
    return out
