"""Small helpers shared by the exporters: finding coercion, counts, checks, timestamps."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from netbench.common.findings import SEVERITIES, Finding


def as_finding(f: Finding | dict[str, Any]) -> Finding:
    """Accept Finding objects or their dicts (as read back from findings.json)."""
    return f if isinstance(f, Finding) else Finding.from_dict(f)


def severity_counts(findings: list[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        counts[f.severity] += 1
    return counts


def passed_checks(findings: list[Finding], checks: list[str] | None) -> list[str]:
    """Rules that ran and produced no warn/fail finding: each is reported as a passing check."""
    flagged = {f.rule for f in findings if f.severity in ("warn", "fail")}
    return [c for c in dict.fromkeys(checks or []) if c not in flagged]


def iso_to_epoch(value: Any) -> float | None:
    """run.json times are ISO 8601 UTC (``2026-11-29T09:20:37+00:00``); None when absent or bad."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.UTC)
    return stamp.timestamp()
