"""``--format jsonl``: the rows as results.jsonl, one JSON object a line, for scripts that read the
older layout (a run directory now keeps its rows as results.parquet, ``reports.rowstore``). Each
line is what the run writes in a part's tail, the ``ResultRow``'s fields in their order."""

from __future__ import annotations

from collections.abc import Iterator

from netbench.reports.export.base import Exporter, ExportFile, RunData

from netbench.common.jsontext import dumps


def export(data: RunData) -> list[ExportFile]:
    count = data.row_count
    return [ExportFile("results.jsonl", _lines(data), f"{count} row(s)")] if count else []


def _lines(data: RunData) -> Iterator[str]:
    """The lines a batch of rows at a time, made as the file is written (25 M rows at 4,096 nodes)."""
    for rows in data.row_batches():
        yield "".join(dumps(r, default=str) + "\n" for r in rows)


EXPORTER = Exporter(
    name="jsonl",
    files="results.jsonl",
    help="Every result row as a JSON line (the older run directory's results.jsonl), for scripts.",
    example="netbench export latest --format jsonl --out rows/",
    render=export,
)
