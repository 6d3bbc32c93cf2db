"""Slow node: a node slow with its partners of one hop class, or in many rounds; slow switch uplinks.

The node verdicts (``reports.analyses.judge_nodes``) come from the pair model's node effects per hop
class ``a_i^K``: its busbw with class-K partners after their cell (class and load) and the partners'
own effects are taken out. A node is slow when, in some class, exp(a_i^K) is at least warn_floor
below its peers and its robust z passes the family-wise bar over every node and class tested; its
severity is the size of its 95% interval against the floors (``rules.base.size_severity``): slow
with its own leaf is slow whatever its cross-spine pairs say (they may be narrower than its cap). A
node with many pairs far below their cell, in some rounds only, is slow too (intermittent), not a
set of bad links. Hosts slow only across a switch's uplink and fine below it are reported once,
against the switch; when most hosts of one switch are slow nodes, that is reported once more against
the switch. With only two switches under a parent (two leaves, two pods), a slow uplink slows every
pair between them alike and no host looks slower than another: when what their pairs carry together
falls below uplinks at the policy's oversubscription, both switches are named as the candidates
(subject ``x|y``). Evidence short of the family-wise bar is info: "suspect, re-test".

With re-test evidence (preflight's escalation, ``sweep --hosts --confirm-budget``), a measured slow
node fails only when the re-test against known-good partners confirms it: unconfirmed it is a
warning, cleared it is info; every re-tested node is reported, also when the full analysis no
longer flags it (confirmed: at the policy's severity). A switch fails only with a confirmed node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import (
    CLEARED_ACTION,
    Rule,
    pct,
    pct_ci,
    policy_severity,
    retest_said,
    size_label,
    size_severity,
)
from netbench.reports.stats import g3, pooled_interval, sig3

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.analyses import NodeVerdict, NodeVerdicts, Retest, SwitchVerdict, UplinkPairVerdict
    from netbench.reports.context import AnalysisContext


def check(ctx: AnalysisContext) -> list[Finding]:
    nodes, retests = ctx.analyses.nodes, ctx.analyses.retests
    # a borderline suspect that a re-test decided (confirmed or cleared) is the re-test's finding:
    # "suspect, re-test" would ask for what was done (preflight's sequential tests decide such nodes)
    decided = {k for k, rt in (retests.results.items() if retests is not None else ())
               if rt.kind == "node" and rt.verdict in ("confirmed", "cleared")}
    out = [_node_finding(ctx, nodes, v) for v in nodes.slow]
    out.extend(_suspect_finding(ctx, nodes, v) for v in nodes.suspects if v.host not in decided)
    out.extend(_uplink_finding(ctx, sv) for sv in nodes.switches)
    out.extend(_uplink_pair_finding(ctx, v) for v in nodes.uplink_pairs)
    if retests is not None:  # every re-tested node is in the findings, as the log said it
        judged = {v.host for v in nodes.slow} | {v.host for v in nodes.suspects if v.host not in decided}
        out.extend(
            _retest_only(ctx, rt)
            for rt in sorted(retests.results.values(), key=lambda rt: rt.subject)
            if rt.kind == "node" and rt.subject not in judged
        )
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
        "kind": v.kind,
        "hop_class": v.hop_class,
        "class_effect_ratio": {k: sig3(r) for k, r in v.class_effect_ratio.items()},
        "capacity_busbw_GBps": sig3(v.capacity_GBps),
        "tests_family_wise": nodes.tests,
        "effect_ci_ratio": [sig3(r) for r in v.effect_ci] if v.effect_ci else None,
    }
    if ctx.pair_model is not None and v.kind == "intermittent":
        evidence["noise_tail"] = ctx.pair_model.noise.tail(v.hop_class or "").describe()
    if v.kind == "intermittent":
        evidence["slow_rounds"] = list(v.slow_rounds)
        evidence["p_value"] = sig3(v.p_value)
    severity = size_severity(ctx, "slow_node", v.effect_ci)
    said = action = None  # what a re-test said, before the title; what it asks
    retests = ctx.analyses.retests
    if retests is not None:
        rt = retests.of(host, "node")
        evidence["retest"] = asdict(rt)
        if rt.verdict == "cleared":
            severity, said, action = "info", retest_said(rt.verdict, rt.ratios, rt.reason), CLEARED_ACTION
        elif rt.verdict == "confirmed":
            # known-good partners confirmed it: where its re-test pairs together measured a size,
            # that interval pooled with the analysis' (two independent measurements of one node);
            # else the policy's (slow with most of its partners, or drained by preflight's
            # sequential test at slow_node_factor): never the quick pass's interval alone
            severity = (size_severity(ctx, "slow_node", pooled_interval(v.effect_ci, rt.interval))
                        if rt.interval is not None else policy_severity(ctx, "slow_node"))
            said = retest_said(rt.verdict, rt.ratios, rt.reason)
            action = confirmed_node_action(host) if severity != "info" else None
        elif rt.verdict == "not_run" and ctx.run.get("command") != "preflight":
            # not re-tested (its budget ran out): the sweep's evidence stands as it would with
            # --confirm-budget 0; running out of budget never weakens a finding. Preflight's quick pass
            # is a screen that always re-tests, so there a node fails only once confirmed
            why = rt.reason.removeprefix("not re-tested: ")
            said = f"Not re-tested ({why})" if why else "Not re-tested"
        elif severity == "fail":  # re-tested, and the re-test could not tell: weaker than the sweep said
            severity, said = "warn", f"Unconfirmed ({rt.reason})"
            action = (f"Not drained: re-test {host} against known-good partners ({_more_budget(ctx)} "
                      "gives its re-test more time).")
    small = severity == "info" and action is None  # past the bar but nearer than warn_floor
    title = f"{said + ': ' if said else ''}{'Small but certain: ' if small else ''}{_title(nodes, v)}"
    if small:
        action = f"Nothing to drain at this size; watch {host} (a slower GPU clock or NIC setting shows so)."
    elif action is None:
        action = (
            f"Drain {host}; check its NICs (rate, errors), PCIe width/gen of GPUs and HCAs, "
            "GPU clocks/thermals, and NIC-GPU affinity, then re-test it against known-good partners."
        )
    links = _alternative_links(v)
    if links and (retests is None or retests.of(host, "node").verdict != "confirmed"):
        evidence["alternative_links"] = links
        title += f" (or {len(links)} slow links: {', '.join(links)})"
        action += f" If known-good partners clear {host} on re-test, check those links instead."
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


def _more_budget(ctx: AnalysisContext) -> str:
    """The option that buys re-tests more time on the command that made the run."""
    return "a longer --budget" if ctx.run.get("command") == "preflight" else "a longer --confirm-budget"


def confirmed_node_action(host: str) -> str:
    """What to do with a node its re-test confirmed: no more testing before acting, the repair."""
    return (
        f"Drain {host}: known-good partners confirmed it on re-test. Check its NICs (rate, errors), "
        "PCIe width/gen of GPUs and HCAs, GPU clocks/thermals and NIC-GPU affinity; after the repair, "
        "a clean netbench run on it returns it to service."
    )


ALTERNATIVE_LINKS = 3
"""An intermittent node with this many slow pairs or fewer may as well be that many slow links on
it: the finding names them, until a re-test against known-good partners tells the two apart."""


def _alternative_links(v: NodeVerdict) -> list[str]:
    if v.kind != "intermittent" or not 0 < v.partners_slow <= ALTERNATIVE_LINKS:
        return []
    worst = sorted(v.slowest_partners, key=lambda p: v.slowest_partners[p])[: v.partners_slow]
    return [f"{v.host}-{p}" for p in worst]


def _title(nodes: NodeVerdicts, v: NodeVerdict) -> str:
    at = f"busbw at {size_label(nodes.sizes[-1])}, {nodes.collective}"
    if v.kind == "intermittent":
        return (
            f"Node {v.host} is intermittently slow: {v.partners_slow} of its {v.partners} pairs, in "
            f"{len(v.slow_rounds)} rounds, are {pct_ci(v.effect_ratio, v.effect_ci)} than their peers ({at})"
        )
    return (
        f"Node {v.host} is {pct_ci(v.effect_ratio, v.effect_ci)} than its {v.hop_class} peers, slow with "
        f"{v.partners_slow} of {v.partners} partners ({at})"
    )


def _suspect_finding(ctx: AnalysisContext, nodes: NodeVerdicts, v: NodeVerdict) -> Finding:
    """Evidence past the false-discovery bar but not the family-wise one: worth a re-test, not a trip."""
    return Finding(
        rule="slow_node",
        severity="info",
        subject_kind="node",
        subject=v.host,
        title=f"Suspect, re-test: {_title(nodes, v)}",
        evidence={
            "kind": v.kind,
            "hop_class": v.hop_class,
            "node_effect_ratio": sig3(v.effect_ratio),
            "effect_ci_ratio": [sig3(r) for r in v.effect_ci] if v.effect_ci else None,
            "robust_z": sig3(v.robust_z),
            "z_threshold": sig3(nodes.z_threshold),
            "class_effect_ratio": {k: sig3(r) for k, r in v.class_effect_ratio.items()},
            "slow_rounds": list(v.slow_rounds),
            "p_value": sig3(v.p_value),
        },
        action=f"Borderline evidence only: re-test {v.host} against known-good partners before acting.",
        hosts=[v.host],
    )


def _uplink_finding(ctx: AnalysisContext, sv: SwitchVerdict) -> Finding:
    classes = "/".join(sv.classes)
    return Finding(
        rule="slow_switch",
        severity=policy_severity(ctx, "slow_switch"),
        subject_kind="switch",
        subject=sv.switch,
        title=(
            f"Uplink of switch {sv.switch} is slow: {len(sv.hosts)} of its {sv.hosts_below} hosts are "
            f"{pct(sv.effect_ratio)} than their peers across it ({classes} pairs), fine below it"
        ),
        evidence={
            "slow_hosts": list(sv.hosts),
            "hosts_below": sv.hosts_below,
            "classes_crossing_uplink": list(sv.classes),
            "effect_ratio": sig3(sv.effect_ratio),
        },
        action=(
            f"Check the uplinks of {sv.switch} (port counters, link speed, cabling, congestion control); "
            "its hosts are fine with each other, so drain none of them for this."
        ),
        hosts=list(sv.hosts),
    )


def _uplink_pair_finding(ctx: AnalysisContext, v: UplinkPairVerdict) -> Finding:
    """One of two uplinks is slow and pairs cannot say which: both switches are named as the
    candidates (subject ``x|y``: the uplinks between them), none of their hosts is blamed."""
    x, y = v.switches
    ratio = ctx.policy.thresholds.cross_spine_warn_ratio
    design = f"{g3(1 / ratio)}:1 uplinks" + (f" at each of {v.tier} tiers" if v.tier > 1 else "")
    return Finding(
        rule="slow_switch",
        severity=policy_severity(ctx, "slow_switch"),
        subject_kind="switch",
        subject=f"{x}|{y}",
        title=(
            f"Traffic between {x} and {y} is {pct(v.capacity_nics / v.expected_nics)} than {design} "
            f"carry: at most {g3(v.capacity_nics)} NICs' worth in any round ({v.pairs} "
            f"pair{'s' * (v.pairs != 1)} at {g3(v.pair_busbw_GBps)} GB/s, same-leaf pairs "
            f"{g3(v.nic_busbw_GBps)} GB/s; "
            f"{v.hosts_below[0]} and {v.hosts_below[1]} hosts) — one of their uplinks ({x}'s or {y}'s) "
            "is slow; pairs alone cannot tell which, every pair between them crosses both"
        ),
        evidence={
            "candidate_switches": [x, y],
            "parent": v.parent,
            "tier": v.tier,
            "hosts_below": list(v.hosts_below),
            "capacity_nics": sig3(v.capacity_nics),
            "expected_nics": sig3(v.expected_nics),
            "cross_spine_warn_ratio": ratio,
            "round": v.round,
            "pairs_in_round": v.pairs,
            "pair_busbw_GBps": sig3(v.pair_busbw_GBps),
            "same_leaf_busbw_GBps": sig3(v.nic_busbw_GBps),
        },
        action=(
            f"Check the uplinks of both {x} and {y} (port counters, link speed, cabling, congestion "
            "control); their hosts are fine with each other, so drain none of them for this. If the "
            "fabric is built more oversubscribed than the policy's cross_spine_warn_ratio, set it."
        ),
        hosts=[],
    )


def _retest_only(ctx: AnalysisContext, rt: Retest) -> Finding:
    """A re-tested node the analysis of everything no longer flags: confirmed, it is slow whatever
    the analysis says (the re-test is the direct evidence); otherwise the re-test's word, as info."""
    if rt.verdict == "confirmed":
        return Finding(
            rule="slow_node",
            severity=size_severity(ctx, "slow_node", rt.interval),
            subject_kind="node",
            subject=rt.subject,
            title=f"{retest_said(rt.verdict, rt.ratios, rt.reason)}: node {rt.subject} is slow against "
                  "known-good partners",
            evidence={"retest": asdict(rt)},
            hosts=[rt.subject],
            action=confirmed_node_action(rt.subject),
        )
    said = {"cleared": "cleared on re-test", "inconclusive": "re-test inconclusive"}
    return Finding(
        rule="slow_node",
        severity="info",
        subject_kind="node",
        subject=rt.subject,
        title=f"Suspect node {rt.subject} {said.get(rt.verdict, 'not re-tested')} ({rt.reason})",
        evidence={"retest": asdict(rt)},
        hosts=[rt.subject],
        action=CLEARED_ACTION if rt.verdict == "cleared" else f"Re-test {rt.subject} if it recurs.",
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
