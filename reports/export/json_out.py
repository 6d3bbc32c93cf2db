"""The machine-readable report (schema ``netbench.report/1``, described in docs/output-json.md): the
verdict, exit code, drain list and findings of a preflight, a report or a sweep, for CI and
schedulers. One shape for all of them; the verdict, its exit code and drain list are
``reports.verdict``'s, as every other output's.
"""

from __future__ import annotations

from typing import Any

from netbench.reports.export._common import as_finding, passed_checks, severity_counts
from netbench.reports.export.base import Exporter, ExportFile, RunData
from netbench.reports.rule_ids import FINDING_IDS
from netbench.reports.verdict import Verdict, headline, judge, retests

from netbench.common import jsontext
from netbench.common.findings import Finding

SCHEMA = "netbench.report/1"
_RUN_KEYS = ("run_id", "started", "finished", "netbench_version", "launcher", "status")
_TOP_KEYS = ("severity", "rule", "subject", "title", "action")
CHECKS = tuple(r for r in FINDING_IDS if r not in ("analysis_error", "findings_truncated"))
"""The checks every analysis runs (``checks.run``): each finding id, less the engine's own."""


def to_report(
    findings: list[Finding | dict[str, Any]],
    run: dict[str, Any],
    *,
    checks: list[str] | None = None,
    hosts: list[str] | None = None,
    could_run: bool = True,
    error: str | None = None,
    verdict: Verdict | None = None,
    top: int = 10,
) -> dict[str, Any]:
    """The report as a dict (see docs/output-json.md for every field). ``verdict``: the one the
    command judged with; else judged here over ``hosts`` (the fleet the drain rule weighs).
    ``top``: the findings the ``top`` list shows in short."""
    items = [as_finding(f) for f in findings]
    v = verdict or judge(items, len(hosts or []), could_run=could_run)
    return {
        "schema": SCHEMA,
        "verdict": v.status,
        "exit_code": v.code,
        "error": error,
        "run": {k: run.get(k) for k in _RUN_KEYS},
        "hosts": sorted(hosts) if hosts is not None else None,
        "counts": severity_counts(items),
        "drain": list(v.drain),
        "check": list(v.check),
        "checks": {"run": list(dict.fromkeys(checks or [])), "passed": passed_checks(items, checks)},
        "findings": [f.to_dict() for f in items],
        "headline": headline(v),
        "top": [{k: getattr(f, k) for k in _TOP_KEYS} for f in items[:top]],
        "retests": retests(items),
    }


def dumps(report: dict[str, Any]) -> str:
    return jsontext.dumps(report, indent=2, sort_keys=False, default=str) + "\n"


def export(data: RunData) -> list[ExportFile]:
    """The analysed run's report (findings.json's findings, judged over run.json's hosts)."""
    doc = to_report(data.findings, data.meta, checks=list(CHECKS), hosts=data.hosts)
    return [ExportFile("report.json", dumps(doc), doc["verdict"])]


EXPORTER = Exporter(
    name="json",
    files="report.json",
    help="The verdict, exit code, drain list and findings as netbench.report/1 (docs/output-json.md), "
    "for CI and schedulers; of an analysed run (netbench report).",
    example="netbench export latest --format json --out ci/",
    render=export,
)
