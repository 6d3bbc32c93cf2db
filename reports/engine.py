"""The machinery, written once: load a run, run every registered rule, apply the policy.

Rules only look at an AnalysisContext (its inputs and the analyses computed once from them) and
return findings. Here: severity overrides from the policy (for the rules that do not apply them
themselves), a cap per rule (a broken fabric must not produce a 500,000-line report; the rest is
summarised in one finding), a crashed rule turned into a finding instead of a lost report, and the
order findings are read in (failures first).
"""

from __future__ import annotations

import traceback
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from netbench.reports.context import AnalysisContext
from netbench.reports.policy import Policy, load_policy

from netbench.common.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from netbench.reports.analyses import RetestEvidence
    from netbench.reports.rules.base import Rule


def resolve_policy(policy: Policy | str | Path | None) -> Policy:
    return policy if isinstance(policy, Policy) else load_policy(policy)


def resolve_topology(topology: dict[str, str] | str | Path | None) -> dict[str, str] | None:
    if topology is None or isinstance(topology, dict):
        return topology
    from netbench.inventory.topology import load_topology

    return load_topology(topology).uplinks()


def load_context(
    run_dir: str | Path,
    baseline: str | Path | None = None,
    policy: Policy | str | Path | None = None,
    topology: dict[str, str] | str | Path | None = None,
    retests: RetestEvidence | None = None,
) -> AnalysisContext:
    """The context of a run directory; ``retests``: preflight's re-test evidence for its suspects."""
    return AnalysisContext.load(
        run_dir,
        baseline=baseline,
        policy=resolve_policy(policy),
        topology=resolve_topology(topology),
        retests=retests,
    )


def run_rules(ctx: AnalysisContext, rules: list[Rule] | None = None) -> list[Finding]:
    from netbench.reports.rules import RULES

    order = {}
    overrides = ctx.policy.severity
    findings: list[Finding] = []
    chosen = rules if rules is not None else RULES
    for pos, rule in enumerate(chosen):
        try:
            found = rule.check(ctx)
        except Exception as exc:  # one rule's bug must not cost the whole report
            found = [
                Finding(
                    rule="analysis_error",
                    severity="warn",
                    subject_kind="run",
                    subject=rule.name,
                    title=f"Rule {rule.name} could not run on this data: {type(exc).__name__}: {exc}",
                    evidence={"traceback": traceback.format_exc(limit=6)},
                    action=(
                        "Report this as a netbench bug with the run directory; other rules are unaffected."
                    ),
                )
            ]
        for f in found:
            order.setdefault(f.rule, pos)
            if f.rule in overrides and not (rule.own_severity and f.rule in rule.ids):
                f.severity = overrides[f.rule]
        findings.extend(found)
    _defer(findings, {rid for rule in chosen if rule.defers for rid in rule.ids})
    findings = _cap(findings, ctx.policy.thresholds.max_findings_per_rule)
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], order.get(f.rule, 99)))
    return findings


def named_nodes(findings: list[Finding]) -> set[str]:
    """The nodes a warning or failure names (its subject, or its hosts for a node or a component)."""
    out: set[str] = set()
    for f in findings:
        if f.severity in ("warn", "fail") and f.subject_kind in ("node", "component"):
            out.update(f.hosts or ([f.subject] if f.subject_kind == "node" else []))
    return out


def _defer(findings: list[Finding], deferring: set[str]) -> None:
    """The findings of a deferring rule (``Rule.defers``, its ids ``deferring``) about a node another
    rule's warning or failure names become information: the other finding is the alarm."""
    if not deferring:
        return
    named = named_nodes([f for f in findings if f.rule not in deferring])
    for f in findings:
        if f.rule in deferring and f.severity != "info" and named.intersection(f.hosts or [f.subject]):
            f.severity = "info"


def _cap(findings: list[Finding], limit: int) -> list[Finding]:
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_rule[f.rule].append(f)
    out: list[Finding] = []
    for rule, items in by_rule.items():
        items.sort(key=lambda f: -SEVERITY_RANK[f.severity])  # stable: a rule's own order within a severity
        out.extend(items[:limit])
        rest = items[limit:]
        if rest:
            hosts = sorted({h for f in rest for h in f.hosts})
            out.append(
                Finding(
                    rule="findings_truncated",
                    severity=rest[0].severity,
                    subject_kind="run",
                    subject=rule,
                    title=f"{len(rest)} more {rule} findings not listed ({len(hosts)} hosts involved)",
                    evidence={"rule": rule, "more": len(rest), "subjects": [f.subject for f in rest[:200]]},
                    action="Their subjects are in this finding's evidence; this many usually means one cause "
                    "upstream (a switch, a fleet-wide setting). "
                    "Raise thresholds.max_findings_per_rule to list all.",
                    hosts=hosts[:1000],
                )
            )
    return out


def row_counts(ctx: AnalysisContext) -> tuple[int, int]:
    """(rows measured ok and right, rows failed or wrong) of the rows the analysis holds: the exit
    status counts them from here, never by reading the rows again after the verdict (issue 48). A
    plain pair row (``reports.pairstore``) is measured and right; every other row is in the frame."""
    import pandas as pd

    rows = ctx.rest
    if not ctx.row_count:
        return 0, 0
    bad = rows["status"] != "ok"
    if "wrong" in rows.columns:
        bad = bad | (pd.to_numeric(rows["wrong"], errors="coerce").fillna(0) > 0)
    n_bad = int(bad.sum())
    return ctx.row_count - n_bad, n_bad


def analyze(
    run_dir: str | Path,
    baseline: str | Path | None = None,
    policy: Policy | str | Path | None = None,
    topology: dict[str, str] | str | Path | None = None,
) -> list[Finding]:
    """Every finding for a run directory, worst first. ``policy`` is a Policy, a TOML path or None."""
    return run_rules(load_context(run_dir, baseline, policy, topology))
