"""End to end on real test hosts (namespaces, sshd): one host's InfiniBand tree is a copy of a real
capture (leptonai/gpud's H100, with counters) that its SSH sessions read through NETBENCH_IB_SYSFS;
a counter rises on one of its ports while the sweep runs, and the report names that port."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.netns

TREE = Path(__file__).parent / "data" / "sysfs-infiniband" / "leptonai-gpud__sys-class-infiniband-h100.0"


def _wait_before_snapshot(proc: subprocess.Popen, path: Path, host: str, limit: float = 120) -> None:
    deadline = time.time() + limit
    while time.time() < deadline:
        if path.exists() and any(json.loads(x).get("phase") == "before" and json.loads(x).get("host") == host
                                 for x in path.read_text().splitlines() if x.strip()):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError(f"no before snapshot of {host} after {limit} s")


def test_a_counter_rising_during_the_sweep_is_a_finding_on_that_port(netns_factory, tmp_path: Path) -> None:
    net = netns_factory(["q0", "q1"])
    tree = tmp_path / "sys-class-infiniband"
    shutil.copytree(TREE, tree)
    net.set_session_env("q1", {"NETBENCH_IB_SYSFS": str(tree)})
    out = tmp_path / "run"
    proc = subprocess.Popen([*net.netbench_argv(tmp_path), "--out", str(out), "--pair-sizes", "64K,256K",
                             "-b", "1K", "-e", "64K", "-n", "5", "-w", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_before_snapshot(proc, out / "counters.jsonl", "q1")
    symbol = tree / "mlx5_7/ports/1/counters/symbol_error"
    symbol.write_text(f"{int(symbol.read_text()) + 12}\n")  # what a failing cable does mid-run
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode in (0, 1), stderr

    snaps = [json.loads(x) for x in (out / "counters.jsonl").read_text().splitlines()]
    assert sorted((s["phase"], s["host"]) for s in snaps) == [("after", "q0"), ("after", "q1"),
                                                              ("before", "q0"), ("before", "q1")]
    findings = json.loads((out / "findings.json").read_text())["findings"]
    port = [f for f in findings if f["rule"] in ("port_errors", "link_flap")]
    assert len(port) == 1, port
    assert port[0]["subject"] == "q1" and port[0]["evidence"]["port"] == "mlx5_7/1"
    assert port[0]["evidence"]["errors"] == {"symbol_error": 12}
    assert "q1 mlx5_7/1: error counters rose during the run: symbol_error +12" in stdout
    # the other host has no NIC rate: the headline says so instead of a percentage
    assert "ceiling unknown: q0: no NIC rate" in stdout
