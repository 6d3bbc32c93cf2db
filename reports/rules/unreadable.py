"""Data the readers could not use: lines of results.jsonl / inventory.jsonl that are not JSON, not
an object or break the contract (a missing field, a string where a number belongs, NaN), and
run.json / env.json (or their fields) of the wrong shape. One finding per file, naming the lines and
why, because a verdict on data that was silently dropped is a verdict on the wrong data.

Never less than ``warn``, whatever the policy says: the verdict must not be PASS when part of the
run could not be read (the policy may raise it to ``fail``).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, policy_severity

from netbench.common.findings import Finding
from netbench.common.rundir import Unreadable

#: line numbers listed in a finding's evidence (the count is always complete)
MAX_LINES_LISTED = 200


def check(ctx: AnalysisContext) -> list[Finding]:
    by_file: dict[str, list[Unreadable]] = defaultdict(list)
    for u in ctx.unreadable:
        by_file[u.file].append(u)
    out: list[Finding] = []
    for path, items in by_file.items():
        lines = [u for u in items if u.line is not None]
        whole = [u for u in items if u.line is None]
        if lines:
            reasons = Counter(u.reason for u in lines)
            numbers = [u.line for u in lines]
            more = f"; {len(lines) - 1} more, see the evidence" if len(lines) > 1 else ""
            out.append(
                Finding(
                    rule="unreadable_rows",
                    severity=policy_severity(ctx, "unreadable_rows", floor="warn"),
                    subject_kind="run",
                    subject=path,
                    title=(
                        f"{path}: {len(lines)} line(s) could not be read and were left out "
                        f"(line {lines[0].line}: {lines[0].reason}{more})"
                    ),
                    evidence={
                        "file": path,
                        "lines_skipped": len(lines),
                        "line_numbers": numbers[:MAX_LINES_LISTED],
                        "reasons": dict(reasons.most_common(10)),
                    },
                    action="The analysis did not see these lines: find what wrote or damaged them "
                    "(a killed run, a hand edit, a copy cut short) and re-run if they matter.",
                )
            )
        for u in whole:
            out.append(
                Finding(
                    rule="unreadable_file",
                    severity=policy_severity(ctx, "unreadable_file", floor="warn"),
                    subject_kind="run",
                    subject=path,
                    title=f"{path}: {u.reason}",
                    evidence={"file": path, "reason": u.reason},
                    action="The report was built without this; check the file (it may be damaged or "
                    "from another tool).",
                )
            )
    return out


RULE = Rule(
    name="unreadable",
    ids=ids("unreadable_rows", "unreadable_file"),
    check=check,
    doc="Lines, files and fields of the run directory that could not be read (never below warn).",
    own_severity=True,
)
