"""CSV of result rows for spreadsheets and quick scripts (pandas users: ``netbench.load_results``).

Columns are ResultRow's fields in contract order, then any other keys the rows carry (sorted).
Lists (``hosts``, ``rank_time_us``) are joined with ``;`` so a cell stays one value for a
spreadsheet; ``extra`` and other dicts are JSON. None is an empty cell. Values are not altered to
defuse spreadsheet formulas (a host named ``=cmd`` stays ``=cmd``): open untrusted CSV as text.
"""

from __future__ import annotations

import csv as _csv
import dataclasses
import io
import json
from typing import Any

from netbench.common.rows import ResultRow

_FIELDS = [f.name for f in dataclasses.fields(ResultRow)]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(_cell(v) for v in value)
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
    writer.writerow(columns)
    for r in dicts:
        writer.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()
