"""A run directory's rows as tests read them, of either layout (issue 48): results.parquet's parts
and the tail of the part being filled (a run still measuring has its rows there, a line each as
they come), or an older run's results.jsonl; the rows the run directory's reader keeps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from netbench.common.rundir import RunDir


def rows_of(out: str | Path) -> list[dict[str, Any]]:
    return RunDir(Path(out), "").load_rows().records


def has_rows(out: str | Path) -> bool:
    return bool(RunDir(Path(out), "").row_files())


def as_jsonl_layout(out: str | Path) -> Path:
    """Turn a run directory into the older layout (its rows as results.jsonl, no results.parquet),
    for tests that damage or edit the rows' file line by line; returns results.jsonl's path."""
    import json
    import shutil

    out = Path(out)
    rows = rows_of(out)
    path = out / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.rmtree(out / "results.parquet", ignore_errors=True)
    return path


def simulated_run(out: Path, nodes: int = 8) -> Path:
    """A real run directory: ``netbench simulate`` on a clean fabric of ``nodes`` (PASS)."""
    argv = [sys.executable, "-m", "netbench", "simulate", "--nodes", str(nodes), "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out
