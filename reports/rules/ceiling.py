"""Headline busbw against the physical ceiling the inventory gives (``reports.ceilings``).

``below_ceiling``: a headline measured at bandwidth-bound sizes (the largest at least the policy's
``large_min_bytes``) below ``below_ceiling_factor`` of its ceiling: the links can carry far more
than the collective got, so something between them and the ranks is off (NIC selection, GPUDirect
RDMA, PCIe, NCCL settings). ``above_ceiling`` (info): busbw above the links' rate, with why (NVLS,
Tree on two nodes), so nobody files a ticket about a number that is too good. ``below_reference``:
a headline whose ceiling is unknown because nobody said what NICs the nodes have (an nccl-tests
import without ``--nics``), but whose GPUs name a platform with a published figure, far below that
figure: a warning that says what it assumes, since the nodes may have fewer or slower NICs. Other
headlines whose ceiling is unknown are listed with the reason in the report, not as findings.
"""

from __future__ import annotations

from netbench.reports.ceilings import Headline
from netbench.reports.context import AnalysisContext
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, size_label
from netbench.reports.stats import sig3

from netbench.common.findings import Finding


def _subject(h: Headline) -> str:
    where = "|".join(h.hosts) if len(h.hosts) <= 4 else f"{len(h.hosts)} hosts"
    return f"{h.collective} {h.pattern} {where}"


def _evidence(h: Headline) -> dict:
    ev = {
        "busbw_GBps": sig3(h.busbw_GBps),
        "ceiling_GBps": sig3(h.ceiling.GBps or 0.0),
        "fraction_of_ceiling": sig3(h.fraction or 0.0),
        "ceiling_basis": h.ceiling.basis,
        "sizes": [size_label(b) for b in h.sizes],
        "ranks": h.ranks,
        "engine": h.engine,
    }
    if h.reference is not None:
        ev["reference_GBps"] = [sig3(h.reference.low_GBps), sig3(h.reference.high_GBps)]
        ev["reference"] = f"{h.reference.ref.id}: {h.reference.source}"
    return ev


def _above(h: Headline) -> Finding:
    assert h.exceeds is not None and h.fraction is not None and h.ceiling.GBps is not None
    return Finding(
        rule="above_ceiling", severity="info", subject_kind="run", subject=_subject(h),
        title=f"{h.collective} busbw {h.busbw_GBps:.1f} GB/s is {h.fraction:.0%} of the links' "
        f"{h.ceiling.GBps:.1f} GB/s: {h.exceeds.split(':')[0]}",
        evidence={**_evidence(h), "why": h.exceeds},
        action="Nothing is wrong: " + h.exceeds.split(": ", 1)[-1],
        hosts=sorted(h.hosts) if len(h.hosts) <= 4 else [],
    )


def _below(h: Headline) -> Finding:
    assert h.fraction is not None and h.ceiling.GBps is not None
    ref = f"; published: {h.reference.text()}" if h.reference is not None else ""
    return Finding(
        rule="below_ceiling", severity="warn", subject_kind="run", subject=_subject(h),
        title=f"{h.collective} {h.pattern} busbw {h.busbw_GBps:.1f} GB/s is {h.fraction:.0%} of its ceiling "
        f"{h.ceiling.GBps:.1f} GB/s ({h.ceiling.basis}){ref}",
        evidence=_evidence(h), action=_ACTION, hosts=sorted(h.hosts) if len(h.hosts) <= 4 else [],
    )


def _pairs_below(below: list[Headline], judged: int) -> Finding:
    """Pairs share one finding: when most of them are far below, the cause is fleet-wide (settings,
    NIC selection); a few slow pairs among good ones are the slow_pair/slow_node rules' business."""
    worst = sorted(below, key=lambda h: h.fraction or 0.0)
    median = sorted(h.fraction or 0.0 for h in below)[len(below) // 2]
    what = "rail groups" if below[0].pattern == "rail" else "pairs"
    return Finding(
        rule="below_ceiling", severity="warn", subject_kind="run", subject=f"{below[0].collective} {what}",
        title=f"{len(below)} of {judged} {what} ran below their ceiling (median {median:.0%}; worst "
        f"{'|'.join(worst[0].hosts)} at {worst[0].busbw_GBps:.1f} of {worst[0].ceiling.GBps:.1f} GB/s)",
        evidence={"pairs_judged": judged, "pairs_below": len(below), "median_fraction": sig3(median),
                  "worst": [{"hosts": "|".join(h.hosts), **_evidence(h)} for h in worst[:_LIST]]},
        action=_ACTION, hosts=sorted({x for h in worst[:_LIST] for x in h.hosts}),
    )


_REFERENCE_ACTION = (
    "If the nodes are that platform, the fabric delivers far less than it should: check which NICs and "
    "transport NCCL used (NCCL_DEBUG=INFO: NET/IB, not NET/Socket), GPUDirect RDMA and the NICs' links. "
    "If they have fewer or slower NICs, import the log again with --nics PORTSxGBPS (e.g. 8x200) to judge "
    "it against their own ceiling.")


def _below_reference(h: Headline, factor: float) -> Finding:
    assert h.reference is not None
    ref = h.reference
    share = h.busbw_GBps / ref.low_GBps
    return Finding(
        rule="below_reference", severity="warn", subject_kind="run", subject=_subject(h),
        title=f"{h.collective} {h.pattern} busbw {h.busbw_GBps:.1f} GB/s is {share:.0%} of what "
        f"{ref.ref.platform} reaches ({ref.text()}); no NIC is known, so this assumes that platform",
        evidence={**_evidence(h), "reference_low_GBps": sig3(ref.low_GBps),
                  "below_reference_factor": factor, "assumes": ref.ref.platform,
                  "ceiling_unknown": h.ceiling.unknown or ""},
        action=_REFERENCE_ACTION, hosts=sorted(h.hosts) if len(h.hosts) <= 4 else [],
    )


_LIST = 20
_ACTION = ("The links can carry far more: check which NICs NCCL picked (NCCL_DEBUG=INFO, NCCL_IB_HCA), "
           "GPUDirect RDMA, the NICs' PCIe links and NCCL_ALGO/NCCL_PROTO settings; on CPU ranks, the "
           "interface gloo bound (GLOO_SOCKET_IFNAME).")


def check(ctx: AnalysisContext) -> list[Finding]:
    t = ctx.policy.thresholds
    out: list[Finding] = []
    # pair and rail groups (one per pair, or per pair and rail) are judged together per pattern
    judged: dict[str, list[Headline]] = {"pair": [], "rail": []}
    below: dict[str, list[Headline]] = {"pair": [], "rail": []}
    for h in ctx.analyses.headlines:
        if h.fraction is None:
            ref = h.reference
            if (ref is not None and ref.ref.scope == "platform" and max(h.sizes) >= t.large_min_bytes
                    and h.busbw_GBps < t.below_reference_factor * ref.low_GBps):
                out.append(_below_reference(h, t.below_reference_factor))
            continue
        if h.exceeds:
            if h.pattern not in judged:  # one per pair would drown the report; the pairs' table shows them
                out.append(_above(h))
            continue
        if max(h.sizes) < t.large_min_bytes:  # latency-bound sizes say nothing of the ceiling
            continue
        low = h.fraction < t.below_ceiling_factor
        if h.pattern in judged:
            judged[h.pattern].append(h)
            if low:
                below[h.pattern].append(h)
        elif low:
            out.append(_below(h))
    for pattern, hs in below.items():
        if hs:
            out.append(_pairs_below(hs, len(judged[pattern])))
    return out


RULE = Rule(name="ceiling", ids=ids("below_ceiling", "above_ceiling", "below_reference"), check=check,
            doc=__doc__ or "")
