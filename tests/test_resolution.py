"""A run too noisy to judge a node never reads as a clean PASS about it (issue 47, point 1): a node that
read far below its peers where the noise hid it is named ``not_cleared`` (warn, never drained), and a
run whose resolution is coarser than 0.7x says where it stops (``coarse_resolution``, info); with a
re-test budget the node not cleared is re-tested against known-good partners, which decides it. On the
real command line: ``netbench simulate`` (planner, analysis, verdict and exit status as a sweep's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ["--nodes", "6", "--noise", "0.3", "--pair-sizes", "1M"]


def simulate(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "simulate", *args, "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    return res, json.loads((out / "findings.json").read_text())["findings"]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_0_6x_node_hidden_by_heavy_noise_is_not_cleared_never_a_pass(tmp_path: Path, seed: int) -> None:
    res, findings = simulate(tmp_path, *HEAVY, "--fault", "node:node0005=0.6", "--seed", str(seed),
                             "--confirm-budget", "0")
    said = [f for f in findings if f["rule"] == "not_cleared"]
    assert [f["hosts"] for f in said] == [["node0005"]], findings
    assert said[0]["severity"] == "warn" and said[0]["evidence"]["nodes"]["node0005"] <= 0.7
    assert res.returncode == 1 and "\nWARN: " in res.stdout, res.stdout[-2000:]
    assert "Not cleared: node0005" in res.stdout and "Drain" not in res.stdout


@pytest.mark.parametrize("seed", [1, 2])
def test_with_a_budget_a_node_not_cleared_is_re_tested_and_confirmed(tmp_path: Path, seed: int) -> None:
    res, findings = simulate(tmp_path, *HEAVY, "--fault", "node:node0005=0.6", "--seed", str(seed))
    slow = [f for f in findings if f["rule"] == "slow_node" and f["severity"] == "fail"]
    assert [f["subject"] for f in slow] == ["node0005"], findings
    assert "re-test node0005: confirmed" in res.stdout and "Drain node0005." in res.stdout, res.stdout[-3000:]
    assert res.returncode == 2 and not [f for f in findings if f["rule"] == "not_cleared"]


def test_a_pass_under_heavy_noise_says_where_its_resolution_stops(tmp_path: Path) -> None:
    # the same 0.6x node, read at 0.87x by this draw: nothing names it, and the PASS says what it saw
    res, findings = simulate(tmp_path, *HEAVY, "--fault", "node:node0005=0.6", "--seed", "4",
                             "--confirm-budget", "0")
    coarse = [f for f in findings if f["rule"] == "coarse_resolution"]
    assert len(coarse) == 1 and coarse[0]["severity"] == "info", findings
    assert coarse[0]["evidence"]["seen_below_ratio"] < 0.7
    assert "Coarse resolution" in res.stdout


def test_ordinary_noise_says_neither(tmp_path: Path) -> None:
    res, findings = simulate(tmp_path, "--nodes", "6", "--seed", "4")
    assert not [f for f in findings if f["rule"] in ("not_cleared", "coarse_resolution")], findings
    assert res.returncode == 0, res.stdout[-2000:]
