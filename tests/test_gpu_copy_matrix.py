"""netbench.run.copy_matrix: the GPU copy-bandwidth matrix (``sweep --pattern copy-matrix``).

The row building and the matrix text are plain functions and are tested everywhere; measuring needs CUDA
GPUs and is skipped without them (it ran on an H200: benchmarks/gpu/results/).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rowfiles import rows_of

from netbench.common.errors import UsageError
from netbench.common.rows import ResultRow
from netbench.common.rundir import RunDir
from netbench.run.copy_matrix import (
    COPY_SIZES,
    copy_row,
    copy_sizes,
    format_matrix,
    matrix_of,
    measure_copy_matrix,
)
from netbench.run.options import MeasureOptions, ReportOptions

HAS_GPU = torch.cuda.is_available() and torch.cuda.device_count() > 0


def test_sizes_default_and_capped() -> None:
    assert copy_sizes(None) == COPY_SIZES
    assert copy_sizes(256 << 20) == [64 << 20, 256 << 20]
    assert copy_sizes(100 << 20) == [64 << 20, 100 << 20]  # the cap itself is measured
    assert copy_sizes(1 << 20) == [1 << 20]


def test_copy_row_is_a_result_row_with_bandwidth() -> None:
    row = copy_row("r1", "node1", 0, 3, 1 << 30, 2000.0, 20, 5, 0)
    assert ResultRow.from_dict(row).to_dict()["group"] == "gpu0->gpu3"  # the contract's fields, no others
    assert set(row) <= {f for f in ResultRow.__dataclass_fields__}
    assert row["collective"] == "copy" and row["pattern"] == "copy-matrix" and row["hosts"] == ["node1"]
    assert row["ranks"] == 1 and row["extra"] == {"src": 0, "dst": 3}
    assert row["algbw_GBps"] == pytest.approx((1 << 30) / 1e9 / 2e-3)
    assert row["busbw_GBps"] == row["algbw_GBps"]


def test_matrix_uses_largest_size_and_marks_missing_cells() -> None:
    rows = [copy_row("r", "h", i, j, s, t, 20, 5, 0)
            for s, t in ((64 << 20, 100.0), (1 << 30, 1000.0)) for i in range(2) for j in range(2)
            if (i, j) != (1, 0)]
    rows[-1]["algbw_GBps"] = 2100.0  # the diagonal cell gpu1->gpu1 at 1 GiB
    n, cells, top = matrix_of(rows)
    assert (n, top) == (2, 1 << 30)
    assert cells[(1, 1)] == 2100.0 and (1, 0) not in cells
    text = format_matrix(n, cells, top).splitlines()
    assert "1G" in text[0]
    assert text[1].split()[1:] == ["gpu0", "gpu1"]
    assert text[2].split()[1:] == ["gpu0", "1073.7", "1073.7"]
    assert text[3].split()[1:] == ["gpu1", "-", "2100.0"]


def test_failed_rows_are_left_out_of_the_matrix() -> None:
    bad = copy_row("r", "h", 0, 0, 1 << 30, 1.0, 20, 5, 0) | {"status": "error"}
    assert matrix_of([bad]) == (0, {}, 0)


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU error; this machine has a GPU")
def test_no_gpu_is_a_usage_error(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(UsageError, match="no CUDA GPU"):
        measure_copy_matrix(MeasureOptions(), RunDir.create(tmp_path / "run"), echo=lambda s: None)


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
def test_copy_matrix_on_local_gpus(tmp_path) -> None:  # noqa: ANN001
    out: list[str] = []
    rundir = RunDir.create(tmp_path / "run")
    rows = measure_copy_matrix(MeasureOptions(iters=3, warmup=1, max_bytes=64 << 20), rundir, echo=out.append)
    n = torch.cuda.device_count()
    assert len(rows) == n * n and all(r["wrong"] == 0 and r["algbw_GBps"] > 0 for r in rows)
    assert len(rundir.read_rows()) == n * n
    assert any("copy bandwidth GB/s" in line for line in out)


def _sweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "netbench", "sweep", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("extra", [["--hosts", __file__], ["--pattern", "intra"]])
def test_copy_matrix_runs_alone_on_this_machine(extra: list[str]) -> None:
    res = _sweep("--pattern", "copy-matrix", *extra)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    want = "--pattern copy-matrix measures this machine's GPUs alone: no --hosts, no other pattern"
    assert res.stderr.strip() == f"netbench: error: {want}"


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU error; this machine has a GPU")
def test_copy_matrix_without_gpus_is_one_line_exit_2(tmp_path: Path) -> None:
    res = _sweep("--pattern", "copy-matrix", "--out", str(tmp_path / "run"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no CUDA GPU" in res.stderr


def test_intra_on_one_machine_is_the_host_group_of_every_local_rank(tmp_path: Path) -> None:
    """``intra`` keeps meaning "the ranks of each host alone", on one machine too (never the matrix)."""
    out = tmp_path / "run"
    args = ["--pattern", "intra", "--backend", "gloo", "-p", "3", "-k", "all_reduce", "-b", "1K", "-e", "4K"]
    res = _sweep(*args, "-n", "2", "-w", "0", "--no-report", "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    rows = rows_of(out)
    assert {r["collective"] for r in rows} == {"all_reduce"}
    assert {(r["pattern"], r["group"], r["ranks"]) for r in rows} == {("intra", rows[0]["group"], 3)}
    assert rows[0]["group"].startswith("intra:")


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, cells: int, stop_after: int | None = None) -> None:
    """Two GPUs whose copies are recorded as measured (the rows a GPU gives), on any machine: the run
    around the measurement is what is tested; ``stop_after`` rows, then a Ctrl-C."""
    import netbench.run.copy_matrix as cm

    def measure(opts: MeasureOptions, rundir: RunDir, echo) -> list:  # noqa: ANN001
        rows = []
        with rundir.writer() as writer:
            for k in range(cells):
                if stop_after is not None and k == stop_after:
                    raise KeyboardInterrupt
                rows.append(copy_row(rundir.run_id, "h", k // 2, k % 2, 1 << 20, 50.0, 3, 1, 0))
                writer.write(rows[-1])
        return rows

    monkeypatch.setattr(cm, "visible_gpus", lambda: 2)
    monkeypatch.setattr(cm, "measure_copy_matrix", measure)


def test_the_copy_matrix_run_says_what_it_did(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """run.json ends as every launch's does (status, rows, the phase and its time), env.json is
    written, the closing lines are the engine's, and the outcome is the run's own."""
    from netbench.run.copy_matrix import run_copy_matrix
    from netbench.run.execute import exit_status

    _fake_gpus(monkeypatch, 4)
    said: list[str] = []
    rundir, outcome = run_copy_matrix(MeasureOptions(), ReportOptions(out=str(tmp_path / "run")), said.append)
    run = rundir.read_run()
    assert (outcome.status, outcome.rows) == ("completed", 4) and outcome.phases[0]["groups"] == 4
    assert run["status"] == "completed" and run["rows"] == 4 and run["rows_failed"] == 0
    assert run["phases"][0]["name"] == "copy-matrix" and run["world_size"] == 1
    import os

    assert rundir.load_env().data["hosts"][os.uname().nodename]["torch"] == torch.__version__
    assert "# Out of bounds values : 0 OK" in said and any("status completed" in s for s in said)
    assert exit_status(outcome, rundir, None, judged=False) == 0


def test_a_stopped_copy_matrix_is_recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from netbench.common.interrupts import Interrupted
    from netbench.run.copy_matrix import run_copy_matrix

    _fake_gpus(monkeypatch, 4, stop_after=3)
    said: list[str] = []
    with pytest.raises(Interrupted):
        run_copy_matrix(MeasureOptions(), ReportOptions(out=str(tmp_path / "run")), said.append)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "interrupted" and run["signal"] == "SIGINT" and run["rows"] == 3
    assert said[-1].startswith("# interrupted by SIGINT (measuring)")
