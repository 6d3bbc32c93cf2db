"""Slow node: a node whose pairs are slow with (nearly) all its partners.

The node verdicts (``reports.analyses.judge_nodes``) come from the pair model's node effect ``a_i``:
its busbw over all partners after hop class and the partners' own effects are taken out. A node is
slow when exp(a_i) <= slow_node_factor and its robust z (against the spread of node effects and its
own estimate's error) is beyond the threshold. When most hosts of one switch are slow, that is
reported once more against the switch.

With preflight's re-test evidence, a measured slow node fails only when the re-test against
known-good partners confirms it: unconfirmed it is a warning, cleared it is info; a node the
re-test confirms is reported even when the full analysis no longer flags it. A switch fails only
with a confirmed node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import CLEARED_ACTION, Rule, pct, policy_severity, size_label
from netbench.reports.stats import sig3

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.analyses import NodeVerdict, NodeVerdicts, Retest
    from netbench.reports.context import AnalysisContext


def check(ctx: AnalysisContext) -> list[Finding]:
    nodes, retests = ctx.analyses.nodes, ctx.analyses.retests
    out = [_node_finding(ctx, nodes, v) for v in nodes.slow]
    if retests is not None:
        confirmed = sorted(retests.confirmed_nodes - {v.host for v in nodes.slow})
        out.extend(_confirmed_on_retest(ctx, retests.of(h, "node")) for h in confirmed)
    out.extend(_switch_findings(ctx, [v.host for v in nodes.slow], nodes.hosts))
    return out


def _node_finding(ctx: AnalysisContext, nodes: NodeVerdicts, v: NodeVerdict) -> Finding:
    host = v.host
    evidence = {
        "collective": nodes.collective,
        "sizes_bytes": list(nodes.sizes),
        "node_effect_ratio": sig3(v.effect_ratio),
        "robust_z": sig3(v.robust_z),
        "z_threshold": sig3(nodes.z_threshold),
        "partners": v.partners,
        "partners_slow": v.partners_slow,
        "median_busbw_GBps_with_partners": sig3(v.median_busbw_GBps),
        "fleet_class_median_busbw_GBps": {k: sig3(bw) for k, bw in nodes.class_median_busbw_GBps.items()},
        "slowest_partners": {p: sig3(bw) for p, bw in v.slowest_partners.items()},
        "switch": ctx.switches.get(host),
        "node_effect_spread_pct": sig3(100 * nodes.effect_spread),
    }
    title = (
        f"Node {host} is {pct(v.effect_ratio)} than the fleet with {v.partners_slow} of {v.partners} "
        f"partners (busbw at {size_label(nodes.sizes[-1])}, {nodes.collective})"
    )
    action = (
        f"Drain {host}; check its NICs (rate, errors), PCIe width/gen of GPUs and HCAs, "
        "GPU clocks/thermals, and NIC-GPU affinity, then re-test it against known-good partners."
    )
    severity = policy_severity(ctx, "slow_node")
    retests = ctx.analyses.retests
    if retests is not None:
        rt = retests.of(host, "node")
        evidence["retest"] = asdict(rt)
        if rt.verdict == "cleared":
            severity = "info"
            title = f"Not confirmed on re-test ({rt.reason}): {title}"
            action = CLEARED_ACTION
        elif rt.verdict != "confirmed" and severity == "fail":
            severity = "warn"
            title = f"Unconfirmed ({rt.reason}): {title}"
            action = f"Not drained: re-test {host} against known-good partners (a longer --budget does)."
    return Finding(
        rule="slow_node",
        severity=severity,
        subject_kind="node",
        subject=host,
        title=title,
        evidence=evidence,
        action=action,
        hosts=[host],
    )


def _confirmed_on_retest(ctx: AnalysisContext, rt: Retest) -> Finding:
    """A node the re-test found slow although the analysis of everything no longer flags it."""
    return Finding(
        rule="slow_node",
        severity=policy_severity(ctx, "slow_node"),
        subject_kind="node",
        subject=rt.subject,
        title=f"Node {rt.subject} is slow against known-good partners on re-test ({rt.reason})",
        evidence={"retest": asdict(rt)},
        hosts=[rt.subject],
        action=f"Drain {rt.subject}; check its NICs, PCIe links and GPU clocks, then re-test it.",
    )


def _switch_findings(ctx: AnalysisContext, slow: list[str], hosts: tuple[str, ...]) -> list[Finding]:
    per_switch = Counter(ctx.switches.get(h) for h in hosts if ctx.switches.get(h))
    slow_per = Counter(ctx.switches.get(h) for h in slow if ctx.switches.get(h))
    retests = ctx.analyses.retests
    out = []
    for sw, n_slow in slow_per.items():
        total = per_switch[sw]
        if n_slow >= 3 and n_slow >= 0.5 * total:
            members = sorted(h for h in slow if ctx.switches.get(h) == sw)
            severity = policy_severity(ctx, "slow_switch")
            title = f"{n_slow} of {total} hosts on switch {sw} are slow"
            # a switch is "slow" because its nodes are: with re-tests, it fails only with a confirmed one
            if retests is not None and severity == "fail" and not set(members) & retests.confirmed_nodes:
                severity = "warn"
                title = f"Unconfirmed (no node of it confirmed on re-test): {title}"
            out.append(
                Finding(
                    rule="slow_switch",
                    severity=severity,
                    subject_kind="switch",
                    subject=sw,
                    title=title,
                    evidence={"slow_hosts": members, "hosts_on_switch": total},
                    action=(
                        f"Suspect switch {sw} itself (uplinks, firmware, congestion control)"
                        " before its nodes."
                    ),
                    hosts=members,
                )
            )
    return out


RULE = Rule(
    name="slow_node",
    ids=ids("slow_node", "slow_switch"),
    check=check,
    doc=__doc__ or "",
    own_severity=True,
)
