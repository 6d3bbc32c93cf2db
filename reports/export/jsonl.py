"""``--format jsonl``: the rows as results.jsonl, one JSON object a line, for scripts that read the
older layout (a run directory now keeps its rows as results.parquet, ``reports.rowstore``). Each
line is what the run writes in a part's tail, the ``ResultRow``'s fields in their order."""

from __future__ import annotations

from netbench.reports.export.base import Exporter, ExportFile, RunData

from netbench.common.jsontext import dumps


def export(data: RunData) -> list[ExportFile]:
    rows = data.rows
    text = "".join(dumps(r, default=str) + "\n" for r in rows)
    return [ExportFile("results.jsonl", text, f"{len(rows)} row(s)")] if rows else []


EXPORTER = Exporter(
    name="jsonl",
    files="results.jsonl",
    help="Every result row as a JSON line (the older run directory's results.jsonl), for scripts.",
    example="netbench export latest --format jsonl --out rows/",
    render=export,
)
