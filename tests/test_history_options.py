"""``--history DIR`` and ``--no-history`` on sweep and preflight as on simulate: one leaf of the
options tree (``ReportOptions.history``) that the run's history stage reads; the option wins over
``$NETBENCH_HISTORY``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from netbench.history.store import HistoryStore

QUICK = ["-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-k", "all_gather"]


def netbench(*args: str, env_store: Path | str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NETBENCH_HISTORY": str(env_store), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-m", "netbench", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def run_id(out: Path) -> str:
    return json.loads((out / "run.json").read_text())["run_id"]


def test_a_sweep_adds_itself_where_history_says_and_nowhere_with_no_history(tmp_path: Path) -> None:
    chosen, ambient = tmp_path / "chosen", tmp_path / "ambient"
    res = netbench("sweep", *QUICK, "--out", str(tmp_path / "a"), "--history", str(chosen), env_store=ambient)
    assert res.returncode == 0, res.stderr
    assert HistoryStore(chosen).run_ids() == [run_id(tmp_path / "a")] and not ambient.exists()
    res = netbench("sweep", *QUICK, "--out", str(tmp_path / "b"), "--no-history", env_store=ambient)
    assert res.returncode == 0 and "history" not in res.stderr, res.stderr
    assert not ambient.exists()
    res = netbench("sweep", *QUICK, "--out", str(tmp_path / "c"), env_store=ambient)  # the environment's
    assert res.returncode == 0 and HistoryStore(ambient).run_ids() == [run_id(tmp_path / "c")]


def test_a_preflight_adds_itself_where_history_says(tmp_path: Path) -> None:
    chosen, ambient = tmp_path / "chosen", tmp_path / "ambient"
    sim = ["simulate", "--nodes", "8", "--leaves", "2", "--preflight", "--budget", "60s"]
    res = netbench(*sim, "--out", str(tmp_path / "pf"), "--history", str(chosen), env_store=ambient)
    assert res.returncode == 0, res.stderr[-2000:]
    assert HistoryStore(chosen).run_ids() == [run_id(tmp_path / "pf")] and not ambient.exists()
    res = netbench(*sim, "--out", str(tmp_path / "pf2"), "--no-history", env_store=ambient)
    assert res.returncode == 0 and not ambient.exists()
