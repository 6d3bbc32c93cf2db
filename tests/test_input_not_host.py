"""The user's input is never a host's fault (issue 44): what gloo cannot run is refused before a rank
starts (exit 2, one line), and sizes whose buffers no rank can allocate end the run as the user's
input (exit 2) with the advice to lower -e; both read as "Drain vm" before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _sweep(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netbench", "sweep", "-b", "1K", "-e", "1K", "-n", "2",
                           "-w", "1", "--out", str(tmp_path / "run"), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("args", "words"), [
    (("-d", "int8", "-o", "avg"), "-o avg on integer data (int8) is not supported by gloo"),
    (("-d", "int32", "-o", "avg", "-k", "all_reduce"), "-o avg on integer data (int32)"),
    (("-d", "uint32",), "dtype uint32 is not supported by gloo"),
])
def test_what_gloo_cannot_run_is_refused_up_front(tmp_path, args, words):
    proc = _sweep(tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing measured, nothing judged


def test_avg_on_integers_is_fine_where_nothing_reduces(tmp_path):
    proc = _sweep(tmp_path, "-d", "int8", "-o", "avg", "-k", "all_gather")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


def test_sizes_no_rank_can_allocate_are_the_users_not_the_hosts(tmp_path):
    proc = _sweep(tmp_path, "-b", "512T", "-e", "512T", "-w", "0")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Drain" not in proc.stdout and "BuffersTooLarge: cannot allocate" in proc.stdout  # nobody drained
    findings = json.loads((tmp_path / "run" / "findings.json").read_text())
    assert not [f for f in findings["findings"] if f["rule"] == "host_failing"]
    [error] = [f for f in findings["findings"] if f["rule"] == "error"]
    assert error["action"].startswith("Lower -e")
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [f["kind"] for f in run["faults"]] == ["memory"] and run["faults"][0]["host"] is None
