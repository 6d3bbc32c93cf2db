"""Slow pair: a link/path that is slow while both its nodes are fine with their other partners.

Judged on the pair model's residual (``reports.pairmodel``): the pair's large-message busbw
against what its cell (hop class and the load of its round on its uplinks) and its two nodes'
effects in that class predict. A pair must be both practically slow (<= slow_pair_factor of the
prediction) and statistically so, its chance read from the noise tail learned from the fleet's own
residuals of its hop class (``reports.noise``; the normal where too few): a warning only past
Holm's family-wise bar over every pair tested (a healthy fleet of any size raises none with
probability 1 - fwer); past the false-discovery bar only, it is info, "suspect: re-test". Without a
re-test a finding rests on one measurement of the pair: it says so, and is at most the policy's
``single_sample`` severity.

A pair of a slow node is not a link fault when it runs at what that node manages at best (its
capacity: capped parts bottleneck, they do not multiply), and no pair of an intermittent node is:
the slow-node verdict already names the culprit.

With re-test evidence (preflight's escalation, ``sweep --hosts --confirm-budget``), a link the re-run
cleared is info, and every re-run link is reported, also one this analysis no longer flags, but a
candidate the re-runs cleared (one of the fleet's worst pairs that no bar flagged, re-run in case:
``netbench.confirm.candidate_links``), which never was a finding. A link
one of whose nodes the re-test confirmed slow (against known-good partners) is that node's fault:
info, not a cable to check.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import (
    CLEARED_ACTION,
    Rule,
    pct_ci,
    retest_said,
    size_label,
    size_severity,
)
from netbench.reports.stats import g3, sig3

from netbench.common.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from netbench.reports.analyses import LinkTests, Retest
    from netbench.reports.context import AnalysisContext
    from netbench.reports.pairmodel import PairModel


def check(ctx: AnalysisContext) -> list[Finding]:
    from netbench.reports.analyses import link_tests

    m = ctx.pair_model
    if m is None:
        return []
    tests = link_tests(m, ctx.policy.thresholds)
    sigma = m.sigma_by_class()  # per hop class (an (N, N) of them is 0.13 GB at 4,096): a pair's by its class
    retests = ctx.analyses.retests
    out = []
    ii, jj = np.nonzero(tests.warn | tests.suspect)
    for i, j in sorted(zip(ii.tolist(), jj.tolist(), strict=True), key=lambda p: m.resid[p]):
        if not _explained_elsewhere(ctx, m, i, j):
            out.append(_link_finding(ctx, m, tests, sigma, i, j))
    if retests is not None:  # every re-run link is in the findings, as the log said it
        shown = {f.subject for f in out}
        out.extend(
            _retest_only(ctx, rt)
            for rt in sorted(retests.results.values(), key=lambda rt: rt.subject)
            if rt.kind == "link"
            and rt.subject not in shown
            and (rt.verdict == "confirmed" or not rt.candidate)
        )
    return out


def _medians(m: PairModel, klass: str, i: int, j: int) -> tuple[list[float | None], int, float | None]:
    """The pair's hop class medians (per size), its cell (-1: none) and what it is compared with at
    the largest size: its cell's median, else its class's."""
    class_med = m.class_median_bw.get(klass, [None] * len(m.sizes))
    cell = int(m.cell[i, j]) if m.cell is not None else -1
    return class_med, cell, m.cell_median_bw[cell] if cell >= 0 else class_med[-1]


def _explained_elsewhere(ctx: AnalysisContext, m: PairModel, i: int, j: int) -> bool:
    """Whether a slow pair's slowness is a slow uplink's or a slow node's: their findings name it."""
    t = ctx.policy.thresholds
    nodes = ctx.analyses.nodes
    retests = ctx.analyses.retests
    a, b = m.hosts[i], m.hosts[j]
    bw_now = m.pair_bw(i, j)[-1]
    if {a, b} & ctx.lost_hosts:
        return True  # an end the run lost (killed, dead, unreachable): its own finding; its partner is
        # no suspect for the pairs it measured while it went (issue 45: a dead a2 named b2 by a2-b2)
    if nodes.uplink_of(a, b) is not None:
        return True  # through a slow uplink: the switch's finding explains it
    if any(nodes.intermittent(h) for h in (a, b)):
        return True  # one of the slow rounds of an intermittent node: the node is the fault
    if retests is not None and {a, b} & retests.confirmed_nodes:
        return True  # its node is slow with known-good partners too (the re-run, if any, says so below)
    if bw_now is not None and any(
        (level := nodes.level(h)) and bw_now >= t.slow_pair_factor * level for h in (a, b)
    ):
        return True  # as fast as its slow node manages at best: the node is the fault
    _, _, cell_med = _medians(m, ctx.hop_class(a, b), i, j)
    # no slower than its slow node's own effect explains: the node is the fault (a node slow in some
    # rounds only can look capped in one class, and its capacity is then its fast rounds', so the
    # capacity test above does not catch these pairs)
    return bw_now is not None and bool(cell_med) and any(
        (eff := nodes.effect(h)) and bw_now >= t.slow_pair_factor * eff * cell_med for h in (a, b)
    )


def _link_finding(
    ctx: AnalysisContext, m: PairModel, tests: LinkTests, sigma: np.ndarray, i: int, j: int
) -> Finding:
    """The finding of a slow pair no node or uplink explains: a warning past the family-wise bar, a
    suspect (info) past the false-discovery bar only; what its re-test said, if it had one."""
    t = ctx.policy.thresholds
    retests = ctx.analyses.retests
    a, b = m.hosts[i], m.hosts[j]
    klass = ctx.hop_class(a, b)
    k = m.class_index(klass)
    ratio = float(np.exp(m.resid[i, j]))
    class_med, cell, cell_med = _medians(m, klass, i, j)
    effects = m.class_effect[k] if m.class_effect is not None and k is not None else m.node_effect
    expected = None
    if cell_med is not None:
        expected = cell_med * float(np.exp(effects[i] + effects[j]))
    suspect = not bool(tests.warn[i, j])
    half = 1.96 * float(sigma[m.cls[i, j]])  # one measurement: its noise is the class's
    ci = (float(np.exp(m.resid[i, j] - half)), float(np.exp(m.resid[i, j] + half)))
    evidence = {
        "collective": m.collective,
        "sizes_bytes": m.sizes,
        "busbw_GBps": [sig3(v) for v in m.pair_bw(i, j)],
        "hop_class": klass,
        "switches": [ctx.switches.get(a), ctx.switches.get(b)],
        "class_median_busbw_GBps": [sig3(v) for v in class_med],
        "class_pairs_compared": m.class_pairs.get(klass, 0),
        "round": int(m.rounds[i, j]) if m.rounds is not None and m.rounds[i, j] >= 0 else None,
        "round_load": int(m.load[i, j]) if m.load is not None else None,
        "cell_median_busbw_GBps": sig3(cell_med),
        "cell_pairs_compared": m.cell_pairs[cell] if cell >= 0 else None,
        "expected_busbw_GBps": sig3(expected),
        "ratio_to_expected": sig3(ratio),
        "robust_z": sig3(float(m.resid[i, j] / sigma[m.cls[i, j]])),
        "z_threshold": sig3(tests.bar(m, klass, t.fwer, t.mad_k)),
        "p_value": sig3(float(tests.p[i, j])),
        "noise_sigma_pct": sig3(100 * float(sigma[m.cls[i, j]])),
        "noise_tail": m.noise.tail(klass).describe(),
        "effect_ci_ratio": [sig3(ci[0]), sig3(ci[1])],
        "node_effect": {
            a: sig3(float(np.exp(effects[i]))),
            b: sig3(float(np.exp(effects[j]))),
        },
        "tests_family_wise": tests.n_tests,
    }
    severity = "info" if suspect else size_severity(ctx, "slow_pair", ci)
    title = (
        f"Link {a} - {b} is {pct_ci(ratio, ci)} than {klass} pairs under the same load predict "
        f"({g3(m.pair_bw(i, j)[-1])} vs {g3(expected)} GB/s at {size_label(m.sizes[-1])})"
    )
    if suspect:
        title = f"Suspect, re-test: {title} (short of the family-wise bar)"
    action = (
        f"Both nodes are fine with their other partners, suspect the path: re-test {a} and {b} "
        "against known-good partners, then check cables, switch ports and port counters "
        f"(symbol errors, link downs) between {a} and {b}."
    )
    if suspect:
        action = f"Borderline evidence only: re-test {a} and {b} against known-good partners first."
    rt = retests.of(f"{a}|{b}", "link") if retests is not None else None
    if rt is not None:
        evidence["retest"] = asdict(rt)
        if rt.verdict == "cleared":
            severity = "info"
            title = f"{retest_said(rt.verdict, rt.ratios, rt.reason)}: {title}"
            action = CLEARED_ACTION
        elif rt.verdict == "confirmed":
            title = f"{retest_said(rt.verdict, rt.ratios, rt.reason)}: {title}"
            action = confirmed_link_action(a, b)
            severity = _confirmed_severity(ctx, ci)
    if rt is None or rt.verdict in ("not_run", "inconclusive"):  # one measurement speaks for it
        evidence["samples"] = "one measurement of the pair, not re-tested"
        title += " — rests on one sample"
        severity = min(severity, t.single_sample, key=SEVERITY_RANK.__getitem__)
    return Finding(
        rule="slow_pair",
        severity=severity,
        subject_kind="pair",
        subject=f"{a}|{b}",
        title=title,
        evidence=evidence,
        action=action,
        hosts=[a, b],
    )


def _retest_only(ctx: AnalysisContext, rt: Retest) -> Finding:
    """A re-run link this analysis does not flag (or leaves to a node): confirmed, it is slow on
    the direct evidence; otherwise the re-run's word, as info."""
    a, b = rt.subject.split("|", 1)
    retests = ctx.analyses.retests
    node = next((h for h in (a, b) if retests is not None and h in retests.confirmed_nodes), None)
    confirmed = rt.verdict == "confirmed" and node is None
    said = {"confirmed": "is slow on re-run", "cleared": "cleared on re-run"}.get(rt.verdict, "not re-run")
    because = f"; node {node} is slow against known-good partners: its fault" if node else ""
    vals = sorted(rt.ratios.values())
    med = vals[len(vals) // 2] if vals else None  # the re-run's own figure: its size when confirmed
    return Finding(
        rule="slow_pair",
        severity=_confirmed_severity(ctx, None if med is None else (med, med)) if confirmed else "info",
        subject_kind="pair",
        subject=rt.subject,
        title=(f"{retest_said(rt.verdict, rt.ratios, rt.reason)}: link {a} - {b} {said} against known-good "
               f"pairs{because}"),
        evidence={"retest": asdict(rt), "hop_class": ctx.hop_class(a, b)},
        action=(
            confirmed_link_action(a, b) if confirmed
            else f"See node {node}'s finding." if node
            else CLEARED_ACTION if rt.verdict == "cleared" else f"Re-test {a} and {b} if it recurs."
        ),
        hosts=[a, b],
    )


def _confirmed_severity(ctx: AnalysisContext, ci: tuple[float, float] | None) -> str:
    """A link its re-test confirmed is no longer one sample's word: its size decides, as a node's
    does, a failure when certainly ``fail_floor`` slower (a link confirmed 60% slow is a fault to
    fix, not a warning). A policy that sets ``slow_pair``'s severity still caps it."""
    if ci is None or "slow_pair" in ctx.policy.severity:
        return size_severity(ctx, "slow_pair", ci)
    t = ctx.policy.thresholds
    near, far = 1 - ci[1], 1 - ci[0]
    return "fail" if near >= t.warn_floor and far >= t.fail_floor else size_severity(ctx, "slow_pair", ci)


def confirmed_link_action(a: str, b: str) -> str:
    """What to do with a link its re-test confirmed while its ends are fine with known-good partners:
    the path between them, and no drain."""
    return (
        f"The path between {a} and {b}: re-tested slow while both are fine with known-good partners. "
        "Check cables, transceivers, switch ports and port counters (symbol errors, link downs) on it; "
        "drain neither node for this."
    )


RULE = Rule(name="slow_pair", ids=ids("slow_pair"), check=check, doc=__doc__ or "", own_severity=True)
