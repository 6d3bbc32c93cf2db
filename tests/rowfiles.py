"""A run directory's rows as tests read them, of either layout (issue 48): results.parquet's parts
and the tail of the part being filled (a run still measuring has its rows there, a line each as
they come), or an older run's results.jsonl; the rows the run directory's reader keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netbench.common.rundir import RunDir


def rows_of(out: str | Path) -> list[dict[str, Any]]:
    return RunDir(Path(out), "").load_rows().records


def has_rows(out: str | Path) -> bool:
    return bool(RunDir(Path(out), "").row_files())
