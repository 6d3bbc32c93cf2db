"""Slow pair: a link/path that is slow while both its nodes are fine with their other partners.

Judged on the pair model's residual (``reports.pairmodel``): the pair's large-message busbw
against what its hop class (same leaf / across the spine) and its two nodes' effects predict.
A pair must be both practically slow (<= slow_pair_factor of the prediction) and statistically
so (robust z beyond mad_k, raised for the number of pairs tested), never against a fixed guess.

A pair of a slow node is not a link fault when it is no slower than that node is with its partners in
general: a node capped below the fabric (a NIC at a lower rate, a bad PCIe link) caps every pair it is
in, which an additive model cannot express, and the slow-node verdict already names the culprit.

With preflight's re-test evidence, a link the re-run cleared is info.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import CLEARED_ACTION, Rule, pct, policy_severity, size_label
from netbench.reports.stats import fdr_cut, g3, sig3, z_threshold

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext


def check(ctx: AnalysisContext) -> list[Finding]:
    m = ctx.pair_model
    if m is None:
        return []
    t = ctx.policy.thresholds
    upper = np.triu(np.isfinite(m.resid), 1)
    n_pairs = int(upper.sum())
    if n_pairs < 3:  # one or two pairs have no peers to be judged against
        return []
    z = m.resid / m.sigma
    practical = upper & (m.resid <= np.log(t.slow_pair_factor))
    cut = fdr_cut(np.where(practical, z, np.nan), n_pairs, t.mad_k, t.fdr)
    zt = -cut if np.isfinite(cut) else z_threshold(t.mad_k, n_pairs)
    bad = practical & (z <= cut)
    nodes = ctx.analyses.nodes
    retests = ctx.analyses.retests
    out = []
    ii, jj = np.nonzero(bad)
    for i, j in sorted(zip(ii.tolist(), jj.tolist(), strict=True), key=lambda p: m.resid[p]):
        a, b = m.hosts[i], m.hosts[j]
        bw_now = m.pair_bw(i, j)[-1]
        if bw_now is not None and any(
            (level := nodes.level(h)) and bw_now >= t.slow_pair_factor * level for h in (a, b)
        ):
            continue  # as fast as its slow node manages with anyone: the node is the fault
        klass = ctx.hop_class(a, b)
        ratio = float(np.exp(m.resid[i, j]))
        class_med = m.class_median_bw.get(klass, [None] * len(m.sizes))
        expected = None
        if class_med[-1] is not None:
            expected = class_med[-1] * float(np.exp(m.node_effect[i] + m.node_effect[j]))
        evidence = {
            "collective": m.collective,
            "sizes_bytes": m.sizes,
            "busbw_GBps": [sig3(v) for v in m.pair_bw(i, j)],
            "hop_class": klass,
            "switches": [ctx.switches.get(a), ctx.switches.get(b)],
            "class_median_busbw_GBps": [sig3(v) for v in class_med],
            "class_pairs_compared": m.class_pairs.get(klass, 0),
            "expected_busbw_GBps": sig3(expected),
            "ratio_to_expected": sig3(ratio),
            "robust_z": sig3(float(z[i, j])),
            "z_threshold": sig3(zt),
            "noise_sigma_pct": sig3(100 * m.sigma),
            "node_effect": {
                a: sig3(float(np.exp(m.node_effect[i]))),
                b: sig3(float(np.exp(m.node_effect[j]))),
            },
        }
        severity = policy_severity(ctx, "slow_pair")
        title = (
            f"Link {a} - {b} is {pct(ratio)} than {klass} pairs predict "
            f"({g3(m.pair_bw(i, j)[-1])} vs {g3(expected)} GB/s at {size_label(m.sizes[-1])})"
        )
        action = (
            f"Both nodes are fine with their other partners, suspect the path: re-test {a} and {b} "
            "against known-good partners, then check cables, switch ports and port counters "
            f"(symbol errors, link downs) between {a} and {b}."
        )
        if retests is not None:
            rt = retests.of(f"{a}|{b}", "link")
            evidence["retest"] = asdict(rt)
            if rt.verdict == "cleared":
                severity = "info"
                title = f"Not confirmed on re-test ({rt.reason}): {title}"
                action = CLEARED_ACTION
        out.append(
            Finding(
                rule="slow_pair",
                severity=severity,
                subject_kind="pair",
                subject=f"{a}|{b}",
                title=title,
                evidence=evidence,
                action=action,
                hosts=[a, b],
            )
        )
    return out


RULE = Rule(name="slow_pair", ids=ids("slow_pair"), check=check, doc=__doc__ or "", own_severity=True)
