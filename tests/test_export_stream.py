"""``netbench export --format jsonl`` streams the rows (issue 48): they are read a batch at a time and
written as they are made, so its memory is a batch's, not the run's (a 4,096-node run's 25 M rows as
records would be ~140 GB). Same lines, same order as every row read whole; a part that breaks off
part-way is named where it broke. Figures: benchmarks/README.md, "export --format jsonl"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from netbench.reports.rowstore import iter_rows
from rowfiles import simulated_run

from netbench.cli import cli
from netbench.common.rundir import RunDir


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """96 nodes: more rows than a batch of the command's (``rowstore.ROW_BATCH``)."""
    return simulated_run(tmp_path_factory.mktemp("sim") / "run", nodes=96)


def test_the_rows_come_a_bounded_batch_at_a_time_in_load_order(simulated: Path) -> None:
    run = RunDir.open(simulated)
    whole = run.load_rows()
    batches = list(iter_rows(run, batch=100))
    assert len(batches) > 2 and all(len(b.records) <= 100 for b in batches)
    assert [r for b in batches for r in b.records] == whole.records
    assert not [u for b in batches for u in b.unreadable] and not whole.unreadable


def test_a_part_cut_short_keeps_what_was_read_and_names_where(simulated: Path, tmp_path: Path) -> None:
    """A part whose bytes end early (a disk that failed under it) gives what it could and one
    unreadable entry naming the part, never an exception."""
    part = sorted((simulated / "results.parquet").glob("part-*.parquet"))[-1]
    cut = tmp_path / "run"
    (cut / "results.parquet").mkdir(parents=True)
    for p in (simulated / "results.parquet").iterdir():
        data = p.read_bytes()
        (cut / "results.parquet" / p.name).write_bytes(data[: len(data) // 2] if p == part else data)
    got = list(iter_rows(RunDir.open(cut), batch=100))
    bad = [u for b in got for u in b.unreadable]
    assert len(bad) == 1 and bad[0].file.endswith(part.name) and "not a Parquet part" in bad[0].reason


def test_export_jsonl_writes_every_row_in_order_from_batches(simulated: Path, tmp_path: Path) -> None:
    """More rows than a batch: the file is the rows read whole, line for line, and the command's line
    counts them."""
    from netbench.reports.rowstore import ROW_BATCH

    rows = RunDir.open(simulated).load_rows().records
    assert len(rows) > ROW_BATCH
    argv = ["export", str(simulated), "--format", "jsonl", "--out", str(tmp_path / "x")]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 0, res.output
    lines = (tmp_path / "x" / "results.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == json.loads(json.dumps(rows, default=str))
    assert f"results.jsonl: {len(rows)} row(s)" in res.output
