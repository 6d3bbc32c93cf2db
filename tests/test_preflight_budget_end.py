"""Preflight whose budget is too small (issue 45, case 11): it exits 3 with one line, and run.json
records its end (``failed``, with why) instead of staying ``running`` as if killed; `netbench report`
on it then says the run ended early, never PASS. On the simulated fabric: the real preflight stages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("budget, why", [
    ("1", "budget 1 s is too small: the inventory took"),  # before the quick pass
    ("10", "budget 10 s is too small for the quick pass"),  # its phases did not fit
])
def test_a_budget_too_small_ends_run_json(tmp_path: Path, budget: str, why: str) -> None:
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "4", "--preflight",
                          "--budget", budget, "--out", str(out)], capture_output=True, text=True, timeout=300)
    errors = [line for line in res.stderr.splitlines() if line.startswith("netbench:")]  # the rest: '#' notes
    assert res.returncode == 3 and len(errors) == 1, res.stderr
    assert errors[0].startswith(f"netbench: error: {why}"), res.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["error"].startswith(why) and run["ended"], run
    report = subprocess.run([sys.executable, "-m", "netbench", "report", str(out), "--no-html"],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode != 0 and "run_incomplete" in report.stdout and why in report.stdout, report
