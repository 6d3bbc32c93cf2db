"""Slow node: a node whose pairs are slow with (nearly) all its partners.

The node effect ``a_i`` of the pair model is its busbw over all partners after hop class and the
partners' own effects are taken out. A node is slow when exp(a_i) <= slow_node_factor and its robust
z (against the spread of node effects and its own estimate's error) is beyond the threshold. When
most hosts of one switch are slow, that is reported once more against the switch.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
from netbench.reports.context import AnalysisContext
from netbench.common.findings import Finding
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, pct, size_label
from netbench.reports.stats import SIGMA_FLOOR, fdr_cut, robust_sigma, sig3, z_threshold


def find_slow_nodes(ctx: AnalysisContext) -> list[Finding]:
    m = ctx.pair_model
    if m is None or not m.judged.any():
        return []
    t = ctx.policy.thresholds
    eff = m.node_effect
    judged = m.judged
    spread = robust_sigma(eff[judged])
    se = m.sigma * 1.2533 / np.sqrt(np.maximum(m.partners, 1))  # error of a median of partners
    scale = np.maximum(np.maximum(spread, se), SIGMA_FLOOR)
    z = eff / scale
    practical = judged & (eff <= np.log(t.slow_node_factor))
    cut = fdr_cut(np.where(practical, z, np.nan), int(judged.sum()), t.mad_k, t.fdr)
    zt = -cut if np.isfinite(cut) else z_threshold(t.mad_k, int(judged.sum()))
    bad = practical & (z <= cut)
    out: list[Finding] = []
    for i in sorted(np.nonzero(bad)[0].tolist(), key=lambda k: eff[k]):
        host = m.hosts[i]
        row = m.bw[-1, i]
        partner_idx = np.nonzero(np.isfinite(row))[0]
        # how many partners' pairs are slow against their own class median (raw, before attribution)
        slow_with = 0
        for j in partner_idx:
            klass = ctx.hop_class(host, m.hosts[j])
            med = (m.class_median_bw.get(klass) or [None])[-1]
            if med and row[j] <= t.slow_node_factor * med:
                slow_with += 1
        worst = sorted(partner_idx.tolist(), key=lambda j: row[j])[:5]
        ratio = float(np.exp(eff[i]))
        node_pairs_med = float(np.median(row[partner_idx])) if partner_idx.size else None
        evidence = {
            "collective": m.collective,
            "sizes_bytes": m.sizes,
            "node_effect_ratio": sig3(ratio),
            "robust_z": sig3(float(z[i])),
            "z_threshold": sig3(zt),
            "partners": int(m.partners[i]),
            "partners_slow": slow_with,
            "median_busbw_GBps_with_partners": sig3(node_pairs_med),
            "fleet_class_median_busbw_GBps": {k: sig3(v[-1]) for k, v in m.class_median_bw.items()},
            "slowest_partners": {m.hosts[j]: sig3(float(row[j])) for j in worst},
            "switch": ctx.switches.get(host),
            "node_effect_spread_pct": sig3(100 * spread),
        }
        out.append(
            Finding(
                rule="slow_node",
                severity="fail",
                subject_kind="node",
                subject=host,
                title=(
                    f"Node {host} is {pct(ratio)} than the fleet with {slow_with} of {int(m.partners[i])} "
                    f"partners (busbw at {size_label(m.sizes[-1])}, {m.collective})"
                ),
                evidence=evidence,
                action=(
                    f"Drain {host}; check its NICs (rate, errors), PCIe width/gen of GPUs and HCAs, "
                    "GPU clocks/thermals, and NIC-GPU affinity, then re-test it against known-good partners."
                ),
                hosts=[host],
            )
        )
    out.extend(_switch_findings(ctx, [m.hosts[i] for i in np.nonzero(bad)[0]], m.hosts))
    return out


def _switch_findings(ctx: AnalysisContext, slow: list[str], hosts: list[str]) -> list[Finding]:
    per_switch = Counter(ctx.switches.get(h) for h in hosts if ctx.switches.get(h))
    slow_per = Counter(ctx.switches.get(h) for h in slow if ctx.switches.get(h))
    out = []
    for sw, n_slow in slow_per.items():
        total = per_switch[sw]
        if n_slow >= 3 and n_slow >= 0.5 * total:
            members = sorted(h for h in slow if ctx.switches.get(h) == sw)
            out.append(
                Finding(
                    rule="slow_switch",
                    severity="fail",
                    subject_kind="switch",
                    subject=sw,
                    title=f"{n_slow} of {total} hosts on switch {sw} are slow",
                    evidence={"slow_hosts": members, "hosts_on_switch": total},
                    action=(
                        f"Suspect switch {sw} itself (uplinks, firmware, congestion control)"
                        " before its nodes."
                    ),
                    hosts=members,
                )
            )
    return out


def check(ctx: AnalysisContext) -> list[Finding]:
    return [
        dataclasses.replace(f, evidence=dict(f.evidence), hosts=list(f.hosts)) for f in ctx.slow_node_findings
    ]


RULE = Rule(
    name="slow_node", ids=ids("slow_node", "slow_switch"), check=check, doc=__doc__ or ""
)
