"""What the run directory's reader read but cannot vouch for (``netbench.reports.runcheck``): rows
of more than one run (``mixed_runs``), files of a schema this netbench does not write
(``schema_unknown``), and run.json disagreeing with the rows: fewer rows than it counts, hosts it
does not list or far fewer than it lists, groups larger than its world (``run_mismatch``). One
finding each.

Never less than ``warn``, whatever the policy says (the policy may raise it to ``fail``): a verdict
on data whose origin or meaning is in doubt must not be PASS.
"""

from __future__ import annotations

from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, policy_severity
from netbench.reports.runcheck import KINDS, MIXED_RUNS, SCHEMA_UNKNOWN

from netbench.common.findings import Finding

_ACTION = {
    MIXED_RUNS: "Give each run its own directory (a new --out, or {id} in it) and report them apart; "
    "the rows of the run you want are those with its run_id.",
    SCHEMA_UNKNOWN: "Read it with the netbench that wrote it (run.json's netbench_version), or check by "
    "hand that its fields mean what this version reads them as.",
}
_MISMATCH_ACTION = ("Find out what changed the directory after the run (a copy cut short, rows removed or "
                    "added by hand, files of two runs put together) and re-run if the missing part matters.")


def check(ctx: AnalysisContext) -> list[Finding]:
    out = []
    for d in ctx.doubts:
        out.append(
            Finding(
                rule=d.kind,
                severity=policy_severity(ctx, d.kind, floor="warn"),
                subject_kind="run",
                subject=d.file,
                title=f"{d.file}: {d.reason}",
                evidence={"file": d.file, "reason": d.reason},
                action=_ACTION.get(d.kind, _MISMATCH_ACTION),
            )
        )
    return out


RULE = Rule(
    name="rundir",
    ids=ids(*KINDS),
    check=check,
    doc="Rows of several runs, unknown schemas, and run.json against the rows (never below warn).",
    own_severity=True,
)
