"""The probe's netbench-runs section: one ``live {json}`` line per marker of another netbench run
that its agent still holds on the node (``netbench/agents/marker.py`` writes the JSON:
``{"run_id": "...", "coordinator": "10.0.0.1:29500", "pid": 1234}``). Whoever can write the
marker folder writes these lines, so every value is checked and a bad one becomes None."""

from __future__ import annotations

import json
import re

from netbench.inventory.model import OtherRun

MAX_RUNS = 16
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_COORDINATOR = re.compile(r"[A-Za-z0-9.:\[\]_-]{1,100}")


def _valid(value: object, pattern: re.Pattern[str]) -> str | None:
    return value if isinstance(value, str) and pattern.fullmatch(value) else None


def parse_netbench_runs(text: str) -> list[OtherRun]:
    runs: list[OtherRun] = []
    for line in text.splitlines():
        if not line.startswith("live ") or len(runs) >= MAX_RUNS:
            continue
        try:
            data = json.loads(line[len("live "):])
        except ValueError:
            data = None
        if not isinstance(data, dict):  # a marker being written: a live run, not yet readable
            runs.append(OtherRun())
            continue
        pid = data.get("pid")
        runs.append(OtherRun(
            run_id=_valid(data.get("run_id"), _RUN_ID),
            coordinator=_valid(data.get("coordinator"), _COORDINATOR),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 31 else None,
        ))
    return runs
