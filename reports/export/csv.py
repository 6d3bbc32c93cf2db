"""CSV of result rows for spreadsheets and quick scripts (pandas users: ``netbench.load_results``).

Columns are ResultRow's fields in contract order, then any other keys the rows carry (sorted).
Lists (``hosts``, ``rank_time_us``) are joined with ``;`` so a cell stays one value for a
spreadsheet; ``extra`` and other dicts are JSON. None is an empty cell.

Formula injection: a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return (a host named ``=HYPERLINK(...)``, an error message from a remote host) is prefixed with
``'``, so a spreadsheet shows it as text instead of evaluating it (OWASP's advice). Numbers stay
numbers: ``-1`` or ``-2.5e-3`` written as numbers, or text that is exactly a number, are left as
they are.
"""

from __future__ import annotations

import csv as _csv
import dataclasses
import io
import json
import re
from typing import Any

from netbench.reports.export.base import Exporter, ExportFile, RunData

from netbench.common.rows import ResultRow

_FIELDS = [f.name for f in dataclasses.fields(ResultRow)]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER_RE = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _safe(text: str) -> str:
    """``text`` as a spreadsheet will not evaluate it (see the module docstring). A lone CR becomes
    LF: the csv module quotes a cell with LF (our line end) but not one with only CR, which would
    then split the row for a reader."""
    if text.startswith(_FORMULA_START) and not _NUMBER_RE.match(text):
        text = "'" + text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _cell(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _safe(_text(value))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def rows_to_csv(rows: list[dict[str, Any]]) -> str:
    """The CSV text, header first, ``\\n`` line ends."""
    dicts = [r.to_dict() if hasattr(r, "to_dict") else r for r in rows]
    others = sorted({k for r in dicts for k in r} - set(_FIELDS))
    columns = _FIELDS + others
    buf = io.StringIO()
    writer = _csv.writer(buf, lineterminator="\n")
    writer.writerow([_safe(c) for c in columns])
    for r in dicts:
        writer.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def export(data: RunData) -> list[ExportFile]:
    rows = data.rows
    return [ExportFile("results.csv", rows_to_csv(rows), f"{len(rows)} row(s)")] if rows else []


EXPORTER = Exporter(
    name="csv",
    files="results.csv",
    help="Every result row, one a line, for spreadsheets (text that would be a formula is quoted).",
    example="netbench export latest --format csv --out sheets/",
    render=export,
)
