"""netbench's run as nccl-tests -J JSON (version 3, -I per-iteration keys), checked against the format
as nccl-tests' src/util.cu writes it, and read back by netbench's own nccl-tests importer.

(NVIDIA's tools/analyze_perf_json.py was run by hand on this output; CI reaches no GitHub.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from netbench.collectives.arrivals import PER_ITER_KEYS
from rowfiles import rows_of

from netbench.cli import cli

# src/util.cu writeResults / writePerIterReport (nccl-tests 2.19.6)
PLACEMENT_KEYS = {"time", "alg_bw", "bus_bw", "nwrong"}
RESULT_KEYS = {"size", "count", "type", "redop", "root"}
ITERS = 12


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("exp") / "run"
    res = subprocess.run([sys.executable, "-m", "netbench", "sweep", "-p", "3", "-k", "all_reduce",
                          "-b", "1K", "-e", "4K", "-f", "4", "-n", str(ITERS), "-w", "1", "--per-iter",
                          "--no-report", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return out


def test_export_has_nccl_tests_keys_and_shapes(run: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["export", str(run), "--out", str(tmp_path / "j")])
    assert res.exit_code == 0, res.output
    [path] = list((tmp_path / "j").iterdir())
    doc = json.loads(path.read_text())
    assert doc["version"] == 3 and doc["config"]["iterations"] == ITERS
    assert doc["config"]["per_iter_timing"] == "true"
    assert [r["size"] for r in doc["results"]] == [1024, 4096]
    for r in doc["results"]:
        assert RESULT_KEYS <= set(r)
        for place in ("out_of_place", "in_place"):
            assert set(r[place]) == PLACEMENT_KEYS
            it = r[f"{place}_per_iter"]
            assert list(it)[: len(PER_ITER_KEYS)] == list(PER_ITER_KEYS)
            assert len(it["times_us"]) == ITERS
            procs = it["per_process_max_times_us"]
            assert len(procs) == 3 and all(len(p) == ITERS for p in procs)  # a row per rank
            # as analyze_perf_json.py checks: times_us is the max over the process rows
            assert it["times_us"] == [max(p[i] for p in procs) for i in range(ITERS)]
            assert it["min_us"] == min(it["times_us"]) and it["max_us"] == max(it["times_us"])


def test_export_reads_back_through_the_nccl_tests_importer_with_the_per_iter_note(run: Path,
                                                                                   tmp_path: Path) -> None:
    CliRunner().invoke(cli, ["export", str(run), "--out", str(tmp_path / "j")])
    [path] = list((tmp_path / "j").iterdir())
    res = CliRunner().invoke(cli, ["import", "nccl-tests", str(path), "--out", str(tmp_path / "r"),
                                   "--no-report"])
    assert res.exit_code == 0, res.output
    assert "per-process maxima" in res.output and "cannot name it" in res.output
    rows = rows_of(tmp_path / "r")
    assert len(rows) == 4 and all(len(r["extra"]["per_iter"]["times_us"]) == ITERS for r in rows)
    imported = json.loads((tmp_path / "r" / "run.json").read_text())["imported"][0]
    assert imported["per_iter"].startswith("per-process maxima")


def test_export_of_a_missing_run_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "j")])
    assert res.exit_code == 2 and "Traceback" not in res.output
