"""Issue 48: the re-test loop's rows at scale. The confirm step starts from the pair rows its analysis
read (``GrowingRows.take``) instead of reading every part of the sweep again, and holds them in the
reader's narrow columns: at 4,096 nodes the second read held 73 B a row beside the analysis' 30 B
and took the whole `netbench simulate` to 5.8 GB."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from netbench.reports.context import AnalysisContext
from netbench.reports.pairrows import GrowingRows, PairRows
from rowfiles import simulated_run

from netbench.common.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]

_WATCH = textwrap.dedent("""
    import sys
    def hook(event, args):
        if event == "open" and "results.parquet" in str(args[0]):
            sys.stdout.write(f"OPENED {args[1]} {args[0]}\\n")
    sys.addaudithook(hook)
    from netbench.__main__ import main
    sys.argv = ["netbench"] + sys.argv[1:]
    main()
""")


def _watched(*argv: str) -> list[str]:
    env = dict(os.environ, NETBENCH_HISTORY="off")
    proc = subprocess.run([sys.executable, "-c", _WATCH, *argv], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=env)
    assert proc.returncode in (0, 1, 2), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.splitlines()


def _reads(lines: list[str]) -> Counter[str]:
    """The opens of a part for reading (a part is written under a temporary name, then renamed)."""
    opened = [x.split(" ", 2)[1:] for x in lines if x.startswith("OPENED ")]
    return Counter(path for mode, path in opened if mode in ("None", "r", "rb") and ".tmp-" not in path)


def test_the_confirm_step_reads_the_sweeps_rows_once(tmp_path):
    """Between "# re-tests within" and the confirm step's last line, each part of the sweep is read
    as often as one analysis reads it (``netbench report``), not once more by the re-test loop."""
    out = tmp_path / "run"
    lines = _watched("simulate", "--nodes", "16", "--fault", "node:node0005=0.7", "--no-report",
                     "--out", str(out))
    start = next(i for i, x in enumerate(lines) if x.startswith("# re-tests within"))
    end = next(i for i, x in enumerate(lines) if x.startswith("# confirm:") and "fabric time" in x)
    assert any(x.startswith("# re-test ") for x in lines[start:end])  # a launch ran: its rows were read
    temporary = [x.split(" ", 2)[2] for x in lines[:start] if x.startswith("OPENED") and ".tmp-" in x]
    sweep = {str(Path(p).parent / Path(p).name[1:].split(".tmp-")[0]) for p in temporary}
    assert sweep
    once = _reads(_watched("report", str(out), "--no-html", "--format", "json"))
    confirm = _reads(lines[start:end])
    assert {p: confirm[p] for p in sweep} == {p: once[p] for p in sweep}
    assert all(once[p] for p in sweep)


@pytest.fixture(scope="module")
def run16(tmp_path_factory) -> Path:
    return simulated_run(tmp_path_factory.mktemp("grow") / "run", nodes=16)


def _columns(rows: PairRows) -> tuple:
    busbw = [None if v != v else v for v in rows.busbw.tolist()]
    return (rows.pairs(), rows.round.tolist(), rows.nbytes.tolist(), busbw, rows.ok.tolist(),
            rows.load.tolist(), [rows.classes[c] for c in rows.hop.tolist()], len(rows.failed))


def _analysed_copy(run16: Path, tmp_path: Path) -> tuple[Path, GrowingRows, Any, AnalysisContext]:
    """A copy of the run, its growing rows, the row files before, and its analysis."""
    run = tmp_path / "run"
    shutil.copytree(run16, run)
    grow = GrowingRows(RunDir.open(run))
    before = grow.files_now()
    return run, grow, before, AnalysisContext.load(run)


def test_rows_taken_from_the_analysis_are_its_columns_and_grow_as_a_fresh_read(run16, tmp_path):
    run, grow, before, ctx = _analysed_copy(run16, tmp_path)
    grow.take(ctx.pairs, ctx.row_count, before)
    rows = grow()
    assert np.shares_memory(rows.busbw, ctx.pairs.busbw) and grow() is rows  # not read, not copied
    parts = sorted((run / "results.parquet").glob("part-*.parquet"))
    shutil.copy(parts[0], run / "results.parquet" / "part-000099.parquet")  # a later launch's part
    grown = grow()
    assert len(grown) > len(rows)
    assert _columns(grown) == _columns(GrowingRows(RunDir.open(run))())
    assert grown.a.dtype == np.int32 and grown.hop.dtype == np.int8  # the reader's narrow columns
    assert not np.shares_memory(grown.busbw, ctx.pairs.busbw) and _columns(ctx.pairs) == _columns(rows)


def test_rows_that_changed_after_the_analysis_read_them_are_read_again(run16, tmp_path):
    run, grow, before, ctx = _analysed_copy(run16, tmp_path)
    part = sorted((run / "results.parquet").glob("part-*.parquet"))[0]
    shutil.copy(part, run / "results.parquet" / "part-000099.parquet")  # written after the analysis read
    grow.take(ctx.pairs, ctx.row_count, before)
    rows = grow()
    assert not np.shares_memory(rows.busbw, ctx.pairs.busbw)
    assert len(rows) > len(ctx.pairs)
    assert _columns(rows) == _columns(GrowingRows(RunDir.open(run))())


def test_joined_rows_renumber_hosts_and_codes_as_met():
    one = PairRows.from_records([
        {"pattern": "pair", "hosts": ["h1", "h2"], "status": "ok", "round": 1, "bytes": 8, "busbw_GBps": 1.0,
         "hop_class": "leaf"},
    ])
    two = PairRows.from_records([
        {"pattern": "pair", "hosts": ["h3", "h1"], "status": "error", "error": "x", "round": 2, "bytes": 8,
         "busbw_GBps": None, "hop_class": "spine"},
        {"pattern": "pair", "hosts": ["h2", "h3"], "status": "ok", "round": 2, "bytes": 8, "busbw_GBps": 2.0},
    ])
    both = PairRows.joined([PairRows.empty(), one, two])
    assert both.pairs() == [("h1", "h2"), ("h3", "h1"), ("h2", "h3")]
    assert [both.classes[c] if c >= 0 else None for c in both.hop.tolist()] == ["leaf", "spine", None]
    assert list(both.failed) == [1] and both.failed[1].why == "error: x"
    assert PairRows.joined([one]) is one and len(PairRows.joined([])) == 0


def test_a_subset_keeps_the_rows_in_order_and_its_failed_rows_renumbered():
    rows = PairRows.from_records([
        {"pattern": "pair", "hosts": [f"h{i}", f"h{i + 1}"], "status": "ok" if i % 3 else "error",
         "error": f"e{i}", "round": i, "bytes": 8 << (i % 2), "busbw_GBps": float(i)}
        for i in range(9)
    ])
    keep = rows.nbytes == 16
    some = rows.subset(keep | ~rows.ok)
    assert some.round.tolist() == [0, 1, 3, 5, 6, 7]
    failed = {int(some.round[i]): f.why for i, f in some.failed.items()}
    assert failed == {0: "error: e0", 3: "error: e3", 6: "error: e6"}
    assert some.names == rows.names and some.pairs()[1] == ("h1", "h2")
