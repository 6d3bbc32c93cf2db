"""Cross-switch traffic: host orders that cross leaves more than needed, and the spine's price.

A ring over hosts on L leaves needs only L leaf changes; an order that interleaves leaves sends
most ring steps through the spine, where uplinks are shared (often oversubscribed). The measured
penalty is the pair model's class levels: cross-spine pairs vs same-leaf pairs at large sizes.

``ring_below_pairs`` (info): the ring over every host far below its slowest hop class's pairs at the
same size. A ring runs at its slowest hop, so a slow node found by the pairs explains it (named);
when no pair is that slow, the cause is the ring itself: its order, the algorithm NCCL picked for
it, or load the pairwise rounds never put on a link.

``leaves_learned`` (info): no topology, label or discovered neighbour placed a host, so the leaves
were learned from the pairs (``reports.learned``): said with the groups, so a reader knows that the
hop classes of this report, and the re-tests' partners and controls, came from the measurements.
"""

from __future__ import annotations

from netbench.inventory.topology import LEAF, SPINE, grouped_order, ring_crossings
from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding

_SHOW = 16  # hosts of an order shown in a title; the full order is in the evidence


RING_BELOW = 0.5  # a ring under half its slowest class's pair median is worth a comment


def check(ctx: AnalysisContext) -> list[Finding]:
    return _learned(ctx) + _orders(ctx) + _penalty(ctx) + _ring(ctx)


def _learned(ctx: AnalysisContext) -> list[Finding]:
    if not ctx.leaves_learned:
        return []
    groups: dict[str, list[str]] = {}
    for host, leaf in ctx.switches.items():
        groups.setdefault(leaf, []).append(host)
    shown = "; ".join(f"{leaf}: {', '.join(sorted(h)[:_SHOW])}{' ...' if len(h) > _SHOW else ''}"
                      for leaf, h in sorted(groups.items()))
    return [Finding(
        rule="leaves_learned",
        severity="info",
        subject_kind="run",
        subject="topology",
        title=f"No switch was named: {len(groups)} leaves learned from the pairs' two rates ({shown})",
        evidence={"leaves": {leaf: sorted(h) for leaf, h in sorted(groups.items())}},
        action="Give --topology (or switch= labels in the hosts file) to judge by the real switches.",
    )]


def _ring(ctx: AnalysisContext) -> list[Finding]:
    m = ctx.pair_model
    if m is None or not m.class_median_bw:
        return []
    rows = ctx.ok_rows
    mine = (rows["pattern"] == "ring") & (rows["collective"] == m.collective) & rows["busbw_GBps"].notna()
    ring = rows[mine]
    common = sorted(set(ring["bytes"].astype(int)) & set(m.sizes))
    if not common:
        return []
    size = common[-1]  # the largest size both measured
    ring_bw = float(ring.loc[ring["bytes"] == size, "busbw_GBps"].median())
    at = list(m.sizes).index(size)
    classes = {k: v[at] for k, v in m.class_median_bw.items() if len(v) > at and v[at]}
    if not classes:
        return []
    klass, pair_bw = min(classes.items(), key=lambda kv: kv[1])
    if ring_bw >= RING_BELOW * pair_bw:
        return []
    slow = [v.host for v in ctx.analyses.nodes.slow] if ctx.analyses.nodes is not None else []
    why = (f"the ring runs at its slowest hop: slow node{'s' * (len(slow) > 1)} {', '.join(slow[:4])} "
           "explain it" if slow else "no pair was that slow: look at the ring's order (cross_switch_order), "
           "the algorithm NCCL picked for it (NCCL_ALGO=Ring measures the fabric) or load only the ring "
           "puts on a link")
    return [Finding(
        rule="ring_below_pairs", severity="info", subject_kind="run", subject=f"{m.collective} ring",
        title=f"The ring reaches {g3(ring_bw)} GB/s at {size_label(size)}, {g3(ring_bw / pair_bw)}x the "
        f"median {klass} pair ({g3(pair_bw)} GB/s): {why}",
        evidence={"collective": m.collective, "sizes_bytes": [size], "ring_busbw_GBps": sig3(ring_bw),
                  "hop_class": klass, "class_median_busbw_GBps": sig3(pair_bw), "slow_nodes": slow},
        action="See the slow node's finding." if slow else "Re-run the ring with NCCL_ALGO=Ring and the "
        "hosts grouped by leaf; if it stays slow, measure its hops as pairs (--pattern pairwise).",
        hosts=slow[:4],
    )]


def _orders(ctx: AnalysisContext) -> list[Finding]:
    rows = ctx.rest  # every row that is not a pair's
    groups = rows[(rows["pattern"] != "pair") & rows["hosts"].notna()]
    seen: dict[tuple[str, ...], list[str]] = {}
    for hosts, coll in zip(groups["hosts"], groups["collective"], strict=True):
        if isinstance(hosts, list) and len(hosts) > 2:
            seen.setdefault(tuple(hosts), [])
            if coll not in seen[tuple(hosts)]:
                seen[tuple(hosts)].append(coll)
    out = []
    for order, colls in seen.items():
        hosts = list(order)
        if any(h not in ctx.switches for h in hosts):
            continue  # cannot tell crossings without every host's leaf
        crossings, needed = ring_crossings(hosts, ctx.switches)
        if crossings <= needed:
            continue
        better = grouped_order(hosts, ctx.switches)
        leaves = len({ctx.switches[h] for h in hosts})
        out.append(
            Finding(
                rule="cross_switch_order",
                severity="warn",
                subject_kind="run",
                subject=f"host order of {len(hosts)} hosts ({', '.join(colls)})",
                title=(
                    f"Ring order of {len(hosts)} hosts changes leaf {crossings} times "
                    f"where {needed} would do "
                    f"({leaves} leaves)"
                ),
                evidence={
                    "collectives": colls,
                    "crossings": crossings,
                    "needed": needed,
                    "leaves": leaves,
                    "order": hosts,
                    "switch_sequence": [ctx.switches[h] for h in hosts[:64]],
                    "suggested_order": better,
                },
                action=(
                    "List hosts grouped by leaf switch (hostfile / rank order) so rings and groups stay on "
                    f"a leaf; e.g. start with {', '.join(better[:_SHOW])}"
                    + (" ..." if len(better) > _SHOW else ".")
                ),
                hosts=[],
            )
        )
    return out


NO_PENALTY = 0.95  # cross-spine pairs this close to same-leaf ones: within noise, not "1.05:1"


def _as_oversubscription(ratio: float) -> str:
    """How the ratio reads to a fabric engineer: N:1 oversubscription, or none to see (never
    "0.984:1", which read as a typo)."""
    if ratio >= NO_PENALTY:
        return "no oversubscription shows under this load"
    return f"about {g3(1 / ratio)}:1 oversubscription under this load"


def _penalty(ctx: AnalysisContext) -> list[Finding]:
    m = ctx.pair_model
    if m is None:
        return []
    ratio = m.class_ratio(SPINE, LEAF)
    if ratio is None:
        return []
    t = ctx.policy.thresholds
    # below the policy by the practical margin a slow node needs too: a fabric built at exactly the
    # policy's oversubscription, measured under full load, sits on the line and would flip with noise
    sev = "warn" if ratio < t.cross_spine_warn_ratio * t.slow_node_factor else "info"
    leaf, spine = m.class_median_bw[LEAF][-1], m.class_median_bw[SPINE][-1]
    return [
        Finding(
            rule="cross_spine_penalty",
            severity=sev,
            subject_kind="run",
            subject="spine",
            title=(
                f"Cross-spine pairs reach {g3(ratio)}x of same-leaf pairs ({g3(spine)} vs {g3(leaf)} GB/s "
                f"at {size_label(m.sizes[-1])}): " + _as_oversubscription(ratio)
            ),
            evidence={
                "collective": m.collective,
                "sizes_bytes": m.sizes,
                "ratio_spine_to_leaf": sig3(ratio),
                "leaf_median_busbw_GBps": [sig3(v) for v in m.class_median_bw[LEAF]],
                "spine_median_busbw_GBps": [sig3(v) for v in m.class_median_bw[SPINE]],
                "leaf_pairs": m.class_pairs.get(LEAF, 0),
                "spine_pairs": m.class_pairs.get(SPINE, 0),
                "warn_below": sig3(t.cross_spine_warn_ratio * t.slow_node_factor),
            },
            action=(
                "Expected with oversubscribed uplinks when pairs run concurrently; keep jobs' rings within a "
                "leaf where possible"
                + (
                    "; the penalty is beyond the policy: check spine uplinks and routing"
                    " (adaptive routing, ECMP hashing)."
                    if sev == "warn"
                    else "."
                )
            ),
        )
    ]


RULE = Rule(
    name="cross_switch",
    ids=ids("leaves_learned", "cross_switch_order", "cross_spine_penalty", "ring_below_pairs"),
    check=check,
    doc=__doc__ or "",
)
