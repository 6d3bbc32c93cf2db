"""nccl-tests' "# Avg bus bandwidth" line, one a collective (issue 47, point 7): a run of two
collectives gives each its own mean, named after the value, so a script that greps it gets each
collective's number and not a blend; one collective's line is nccl-tests' own, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rowfiles import rows_of

AVG = "# Avg bus bandwidth    : "
QUICK = ["-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1", "--no-report"]


def sweep(out: Path, collectives: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    argv = [sys.executable, "-m", "netbench", "sweep", "-k", collectives, *QUICK, "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=240,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})  # gloo ranks on this machine
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    rows = rows_of(out)
    return res, rows


def mean_busbw(rows: list[dict], collective: str) -> float:
    got = [r["busbw_GBps"] for r in rows if r["collective"] == collective and r["status"] == "ok"]
    assert got
    return sum(got) / len(got)


def test_two_collectives_get_one_average_each(tmp_path: Path) -> None:
    res, rows = sweep(tmp_path / "run", "all_reduce,all_gather")
    lines = [ln for ln in res.stdout.splitlines() if "Avg bus bandwidth" in ln]
    assert [ln.split()[-1] for ln in lines] == ["all_reduce", "all_gather"], lines
    for ln in lines:
        assert ln.startswith(AVG)
        fields = ln.split()
        # the value is where nccl-tests has it (awk's $6), the collective where it puts OK/FAILED
        assert float(fields[5]) == pytest.approx(mean_busbw(rows, fields[6]), rel=1e-5)
    # nccl-tests' importer reads each line's value as nccl-tests' own
    from netbench.importers.nccl_tests.table import AVG_RE

    assert [float(AVG_RE.search(ln)["bw"]) for ln in lines] == [float(ln.split()[5]) for ln in lines]


def test_one_collective_line_is_nccl_tests_own(tmp_path: Path) -> None:
    res, rows = sweep(tmp_path / "run", "all_reduce")
    lines = [ln for ln in res.stdout.split("\n") if "Avg bus bandwidth" in ln]
    assert lines == [f"{AVG}{mean_busbw(rows, 'all_reduce'):g} "]
