"""Issue 48: the analysis holds a run's plain pair rows (ok, nothing wrong: all but a few of a large
fleet's rows) as PairRows' columns, a few tens of bytes a row, never as a frame of every field; what
it judges is the same as judging the whole frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from netbench.reports.context import AnalysisContext, rows_frame
from netbench.reports.engine import load_context, row_counts, run_rules
from netbench.reports.rowtable import read_files_frame

from netbench.common.rundir import RunDir

BYTES_A_PAIR_ROW = 40
"""What a pair row may cost the analysis at most: its hosts, round, size, busbw, status, load, hop
class, engine and collective as numbers (the frame cost 220 B a row, twice that while built)."""


def simulate(out: Path, *args: str) -> Path:
    proc = subprocess.run([sys.executable, "-m", "netbench", "simulate", "--nodes", "8", "--out", str(out),
                           "--confirm-budget", "0", *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1, 2), proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def held_bytes(ctx: AnalysisContext) -> tuple[int, int]:
    """(bytes of the frame the analysis holds, bytes of its pair columns)."""
    p = ctx.pairs
    columns = (p.a, p.b, p.round, p.nbytes, p.busbw, p.ok, p.load, p.hop, p.engine, p.collective)
    return int(ctx.rest.memory_usage(deep=True).sum()), sum(c.nbytes for c in columns)


def every_row(run: Path) -> pd.DataFrame:
    """Every row of ``run`` as one frame: column by column where the reader vouches for them, else
    line by line."""
    rd = RunDir.open(run)
    frame = read_files_frame(rd.row_files())
    return rows_frame(frame if frame is not None else rd.load_rows().records)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("pairmem")
    return (simulate(base / "one", "--pair-sizes", "64M"),
            simulate(base / "four", "--pair-sizes", "16M,64M,256M,1G"))


def test_the_frame_does_not_grow_with_the_pair_rows(runs: tuple[Path, Path]) -> None:
    """Four times the pair rows: the frame the analysis holds is the same (the ring's rows), each
    pair row costs a few tens of bytes in its columns, and every row is still counted."""
    one, four = (load_context(r) for r in runs)
    assert one.pairs.plain == len(one.pairs) == 8 * 7 // 2
    assert four.pairs.plain == len(four.pairs) == 4 * 8 * 7 // 2
    assert not (one.rest["pattern"] == "pair").any() and not (four.rest["pattern"] == "pair").any()
    frame_one, cols_one = held_bytes(one)
    frame_four, cols_four = held_bytes(four)
    assert frame_four == frame_one
    assert cols_four <= BYTES_A_PAIR_ROW * len(four.pairs)
    for ctx, run in zip((one, four), runs, strict=True):
        whole = every_row(run)
        assert ctx.row_count == len(whole)
        assert row_counts(ctx) == (len(whole), 0)


def test_judging_the_split_is_judging_every_row(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """The findings of a run read column by column (its plain pair rows only as columns) are those
    of the same rows given whole as a frame, with a failed host's rows among them."""
    failed = simulate(tmp_path / "gpu", "--fault", "gpu:node0003", "--pair-sizes", "64M,1G")
    for run in (*runs, failed):
        loaded = load_context(run)
        whole = every_row(run)
        given = AnalysisContext.from_data(whole, env=loaded.env, run=loaded.run, topology=loaded.topology,
                                          counters=loaded.counters, arrivals=loaded.arrivals)
        given.run_dir, given.doubts, given.unreadable = loaded.run_dir, loaded.doubts, loaded.unreadable
        got = [(f.rule, f.subject, f.severity, f.title) for f in run_rules(loaded)]
        assert got == [(f.rule, f.subject, f.severity, f.title) for f in run_rules(given)]
        assert row_counts(loaded) == row_counts(given)
    assert len(load_context(failed).rest) > 0  # the failed pair rows are in the frame, with why
