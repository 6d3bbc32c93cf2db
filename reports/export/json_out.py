"""The machine-readable report (schema ``netbench.report/1``, described in docs/output-json.md):
the verdict, exit code and findings of a preflight or report, for CI and schedulers.

The verdict follows preflight's exit codes: 0 pass, 1 warnings, 2 failures, 3 could not run.
"""

from __future__ import annotations

from typing import Any

from netbench.reports.export._common import as_finding, passed_checks, severity_counts

from netbench.common import jsontext
from netbench.common.findings import Finding

SCHEMA = "netbench.report/1"
_RUN_KEYS = ("run_id", "started", "finished", "netbench_version", "launcher", "status")
EXIT_CODES = {"pass": 0, "warn": 1, "fail": 2, "error": 3}


def verdict(findings: list[Finding | dict[str, Any]], could_run: bool = True) -> tuple[str, int]:
    """``("pass"|"warn"|"fail"|"error", exit code)``: the worst severity decides; info never fails."""
    if not could_run:
        return "error", EXIT_CODES["error"]
    sevs = {as_finding(f).severity for f in findings}
    v = "fail" if "fail" in sevs else "warn" if "warn" in sevs else "pass"
    return v, EXIT_CODES[v]


def to_report(
    findings: list[Finding | dict[str, Any]],
    run: dict[str, Any],
    *,
    checks: list[str] | None = None,
    hosts: list[str] | None = None,
    could_run: bool = True,
    error: str | None = None,
) -> dict[str, Any]:
    """The report as a dict (see docs/output-json.md for every field)."""
    items = [as_finding(f) for f in findings]
    v, code = verdict(items, could_run)
    drain = sorted({h for f in items if f.severity == "fail" for h in f.hosts})
    return {
        "schema": SCHEMA,
        "verdict": v,
        "exit_code": code,
        "error": error,
        "run": {k: run.get(k) for k in _RUN_KEYS},
        "hosts": sorted(hosts) if hosts is not None else None,
        "counts": severity_counts(items),
        "drain": drain,
        "checks": {"run": list(dict.fromkeys(checks or [])), "passed": passed_checks(items, checks)},
        "findings": [f.to_dict() for f in items],
    }


def dumps(report: dict[str, Any]) -> str:
    return jsontext.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
