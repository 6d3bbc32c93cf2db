"""``import nccl-tests --no-report``: the headline busbw as the report would print it, from the rows
that decide it. The headline of a run is the mean busbw of its ``TOP_SIZES`` largest sizes (ok rows
with a busbw) and the count of wrong elements of all its ok rows (``reports.ceilings``); so those
rows, and the ones with wrong elements, give the same headline as all of them. ``keep`` holds them
for the run directory just written: reading a 50 MB log's 800k rows back took 6 s of the import's
25; any other run directory is read back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from netbench.importers.nccl_tests.model import NcclTest

#: the runs whose headline ``--no-report`` prints (the report has every one)
MAX_HEADLINES = 10

#: the deciding rows of the run directory last written (as ResultRow dicts), by its path
_KEPT: dict[Path, list[dict[str, Any]]] = {}


def deciding(test: NcclTest) -> list[dict[str, Any]]:
    """The parsed rows of ``test`` its headline depends on (see the module's docstring)."""
    from netbench.reports.ceilings import TOP_SIZES

    ok = [r for r in test.rows if r["time_us"] is not None and r["busbw_GBps"] is not None]
    top = set(sorted({r["bytes"] for r in ok})[-TOP_SIZES:])
    return [r for r in ok if r["bytes"] in top or r.get("wrong")]


def keep(path: Path, tests: list[NcclTest], rows: Callable[[NcclTest, str], Iterator[Any]]) -> None:
    """Hold the deciding rows of the run just written at ``path`` (``rows(test, group)``: its
    ResultRows, as written), in place of any kept before."""
    _KEPT.clear()
    _KEPT[path] = [vars(row) for k, t in enumerate(tests, 1) for row in rows(t, f"log{k}")]


def headline_busbw(path: Path) -> list[str]:
    """The headline busbw lines, the first ``MAX_HEADLINES`` runs' and a count of the rest; from
    the rows kept for ``path``, else read back column by column."""
    from netbench.common.rundir import RunDir
    from netbench.reports.ceilings import TERMINAL_PATTERNS, headline_lines, headlines, references

    run = RunDir.open(path)
    rows: Any = _KEPT.pop(Path(path), None)
    if rows is None:
        from netbench.reports.rowtable import read_rows_frame

        frame = read_rows_frame(run.results_path)
        rows = frame if frame is not None else run.read_rows()
    heads = headlines(rows, run.read_inventory(), references(), TERMINAL_PATTERNS)
    shown = [h for h in heads if h.pattern in TERMINAL_PATTERNS]
    more = len(shown) - MAX_HEADLINES
    # one headline a run: a log of thousands of jobs shows the first ones and counts the rest
    return list(headline_lines(shown[:MAX_HEADLINES], TERMINAL_PATTERNS)) + (
        [f"# ... and {more} more run(s): `netbench report {path}`"] if more > 0 else [])
