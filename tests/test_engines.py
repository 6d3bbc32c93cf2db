"""Engines: NCCL called directly (nccl4py) or through torch's process group; one-rank runs.

The native engine itself needs a GPU (the last test, skipped elsewhere; measured on the lent H200,
benchmarks/README.md). Here: the engine choice, what CPU users pay for it (nothing), how the
analysis reads a run with both engines, and what a one-rank run says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from netbench.collectives.native import engines_for
from netbench.reports.context import AnalysisContext
from netbench.reports.engine import run_rules


def _netbench(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "netbench", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_cpu_ranks_use_torch_and_never_import_the_binding():
    before = {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")}
    assert engines_for("auto", "cpu") == ["torch"]
    assert engines_for("both", "cpu") == ["torch"]
    assert {m for m in sys.modules if m == "nccl" or m.startswith("nccl.")} == before


def test_engine_nccl_with_gloo_is_one_line_and_exit_2(tmp_path: Path):
    r = _netbench(
        "sweep", "-p", "2", "--backend", "gloo", "--engine", "nccl", "-e", "1K", "--out", str(tmp_path / "r")
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "netbench: error: --engine nccl needs GPUs (NCCL); gloo runs through torch"
    ]


def test_one_rank_says_nothing_crossed_a_link(tmp_path: Path):
    out = tmp_path / "run"
    r = _netbench(
        *("sweep", "-p", "1", "--backend", "gloo", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"),
        *("--out", str(out)),
    )
    assert r.returncode == 0, r.stderr
    assert "large-message busbw" not in r.stdout  # no busbw summary of a run that crossed nothing
    assert "# one rank: nothing crossed a link" in r.stdout
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows and {row["engine"] for row in rows} == {"torch"} and {row["ranks"] for row in rows} == {1}
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert [f["rule"] for f in findings] == ["single_rank"]
    assert findings[0]["severity"] == "info"


def _row(engine: str, coll: str, nbytes: int, in_place: bool, time_us: float) -> dict:
    return {
        "run_id": "r", "collective": coll, "backend": "nccl", "pattern": "world", "hosts": ["a", "b"],
        "ranks": 2, "round": None, "bytes": nbytes, "count": nbytes // 4, "dtype": "float", "op": "sum",
        "in_place": in_place, "iters": 20, "warmup": 5, "time_us": time_us, "time_us_min": time_us,
        "time_us_max": time_us, "rank_time_us": [time_us, time_us], "algbw_GBps": nbytes / 1e3 / time_us,
        "busbw_GBps": nbytes / 1e3 / time_us, "wrong": 0, "status": "ok", "error": None, "group": "world",
        "engine": engine, "cuda_graph": False,
    }


def test_both_engines_are_compared_and_one_is_judged():
    sizes = [8, 1024, 1 << 20, 64 << 20]
    rows = []
    for nbytes in sizes:
        big = nbytes > (1 << 20)
        rows.append(_row("nccl", "all_reduce", nbytes, False, 300.0 if big else 6.0))
        # torch: 10 us more per small operation; the same at 64 MiB (there the data decides)
        rows.append(_row("torch", "all_reduce", nbytes, False, 300.0 if big else 16.0))
    ctx = AnalysisContext.from_data(rows, [], {"hosts": {}}, {})
    assert ctx.judged_engine == "nccl"
    assert set(ctx.ok_rows["engine"]) == {"nccl"} and len(ctx.ok_rows) == len(sizes)
    assert len(ctx.all_ok_rows) == 2 * len(sizes)
    found = {f.rule: f for f in run_rules(ctx)}
    assert set(found) == {"engine_overhead"}
    ev = found["engine_overhead"].evidence["by_collective"]
    assert ev == [
        {
            "collective": "all_reduce",
            "in_place": False,
            "sizes": 3,  # 8 B, 1 KiB, 1 MiB: the small ones
            "nccl_us_median": 6.0,
            "torch_us_median": 16.0,
            "torch_extra_us_median": 10.0,
        }
    ]
    assert "adds 10 us per operation" in found["engine_overhead"].title


def test_rows_from_before_engines_count_as_torch():
    row = _row("torch", "all_reduce", 1024, False, 10.0)
    del row["engine"]
    ctx = AnalysisContext.from_data([row], [], {"hosts": {}}, {})
    assert ctx.judged_engine == "torch" and len(ctx.ok_rows) == 1


def test_native_engine_on_a_gpu(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (measured on the lent H200: benchmarks/README.md)")
    pytest.importorskip("nccl.bindings.nccl", reason="needs nccl4py (pip install 'netbench[nccl]')")
    out = tmp_path / "run"
    colls = "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,sendrecv"
    r = _netbench("sweep", "--engine", "both", "-c", colls, "-e", "1M", "-f", "16", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "destroy_process_group" not in r.stdout + r.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {row["engine"] for row in rows} == {"nccl", "torch"}
    assert all(row["status"] == "ok" and row["wrong"] == 0 for row in rows)
    assert {row["collective"] for row in rows if row["engine"] == "nccl"} == set(colls.split(","))


def test_report_shows_the_engines_side_by_side_per_size():
    from netbench.reports.html import render_html

    rows = [_row(engine, "all_reduce", 1024, False, t) for engine, t in (("nccl", 6.0), ("torch", 16.5))]
    ctx = AnalysisContext.from_data(rows, [], {"hosts": {}}, {})
    page = render_html(ctx, run_rules(ctx), plotlyjs="cdn")
    assert "Engines side by side" in page and "judges the nccl rows" in page
    assert "<tr><td>1K</td><td>6.00</td><td>16.50</td><td>+10.50</td><td>2.75</td></tr>" in page
    one = AnalysisContext.from_data(rows[:1], [], {"hosts": {}}, {})
    assert "Engines side by side" not in render_html(one, run_rules(one), plotlyjs="cdn")
