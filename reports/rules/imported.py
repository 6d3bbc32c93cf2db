"""What an import of another tool's log could not vouch for (run.json's ``imported[].problems``,
written by ``netbench import``): lines that start as table rows but are not ones the tool printed
(left out, counted per reason), sizes printed again (interleaved copies of one table), a table
without its closing summary line (the run was cut short), a file name that disagrees with the log
(``import_incomplete``); and a line saying the run failed (``Test NCCL failure``, an MPI abort:
``imported_run_failed``), the rows before it kept and judged.

Never less than ``warn``, whatever the policy says: no PASS on a log that was not fully read, or
whose run says it failed.
"""

from __future__ import annotations

from typing import Any

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, policy_severity

from netbench.common.findings import Finding


def _problems(ctx: AnalysisContext) -> list[tuple[str, dict[str, Any]]]:
    """(source, problem) of every imported run, of the expected shape (run.json is untrusted)."""
    imported = ctx.run.get("imported")
    out = []
    for entry in imported if isinstance(imported, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("problems"), list):
            continue
        source = str(entry.get("source") or "an imported log")
        out += [(source, p) for p in entry["problems"]
                if isinstance(p, dict) and isinstance(p.get("kind"), str)]
    return out


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for source, p in _problems(ctx):
        reason, example = str(p.get("reason", ""))[:300], str(p.get("example", ""))[:200]
        count = p.get("count") if isinstance(p.get("count"), int) else 0
        evidence = {"source": source, "kind": p["kind"], "reason": reason, "lines_left_out": count,
                    "line_numbers": p.get("lines") if isinstance(p.get("lines"), list) else [],
                    "example": example}
        if p["kind"] == "failure":
            out.append(Finding(
                rule="imported_run_failed",
                severity=policy_severity(ctx, "imported_run_failed", floor="warn"),
                subject_kind="run", subject=source,
                title=f"{source}: the run failed ({example}); its rows before the failure are judged",
                evidence=evidence,
                action="Find why the run failed (NCCL_DEBUG=INFO, the hosts' logs) and re-run it: the "
                "sizes after the failure were never measured.",
            ))
            continue
        if p["kind"] in ("refused", "repeated"):
            title = f"{source}: {count} line(s) left out: {reason} ({example})"
        else:
            title = f"{source}: {reason}"
        out.append(Finding(
            rule="import_incomplete", severity=policy_severity(ctx, "import_incomplete", floor="warn"),
            subject_kind="run", subject=source, title=title, evidence=evidence,
            action="The verdict covers only the rows read: check the log (a run cut short, several "
            "ranks' output interleaved, a hand edit) and import a clean copy if these lines matter.",
        ))
    return out


RULE = Rule(
    name="imported",
    ids=ids("import_incomplete", "imported_run_failed"),
    check=check,
    doc="What an import could not read as it stands, and an imported log's failure lines (never below warn).",
    own_severity=True,
)
