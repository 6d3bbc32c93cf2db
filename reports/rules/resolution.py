"""Not cleared: a node that read well below its peers, where the run was too noisy to call it, is said
and never reads as a PASS (issue 47: "a run that judged too little to clear a node never says PASS
about it").

The pair model judges a node by its effect against its peers' spread and its own estimate's error
(``reports.analyses.judge_nodes``): found past the family-wise bar, a suspect past the false-discovery
band. Under heavy noise both bars sit far out: six hosts whose 1 MiB pairs vary by 30% from one
measurement to the next see nothing above about 0.5x (``NodeVerdicts.seen_below``, the run's
resolution), so a node at 0.6x read 0.6x and the run said PASS. Such a node is neither found nor
cleared: when its effect in some judged class is ``CLEAR_RATIO`` of its peers or below, and no bar,
re-test or uplink accounted for it, it is named here (warn: never drained, it was not found either),
with what would decide it.

Why a node's own reading and not the resolution alone: a healthy run on a loaded fabric has a coarse
resolution too (the namespaced test hosts under a busy CPU: pair noise 16-28%, resolution 0.44-0.62x)
and saying "inconclusive" on every such run would teach people to ignore it; a node reading 0.7x is
2.5 of its errors out even there (about one node in 160 by chance), so the warning falls on the runs
that have something to decide. ``CLEAR_RATIO`` 0.7: below it a node costs a job 30% and more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule
from netbench.reports.stats import g3, sig3

from netbench.common.findings import Finding

if TYPE_CHECKING:
    from netbench.reports.context import AnalysisContext

CLEAR_RATIO = 0.7
"""A node reading this ratio of its peers or below, unjudged, is not cleared (see the docstring)."""
MIN_NODES = 6
"""Judged nodes at least: fewer give their effects' spread from a handful of numbers (as ``fleet_split``)."""
COARSE = CLEAR_RATIO
"""Below this resolution the run says so as info, also with no node reading low: a PASS of such a run
is a PASS of what it could see, and the reader is told where that stops."""


def check(ctx: AnalysisContext) -> list[Finding]:
    nodes, m, retests = ctx.analyses.nodes, ctx.pair_model, ctx.analyses.retests
    if m is None or m.class_effect is None or m.class_judged is None or nodes.seen_below is None:
        return []
    if not nodes.noise_bound or int(m.judged.sum()) < MIN_NODES or ctx.lost_hosts:
        # the bar stood far out for another reason than the noise: nodes that differ among themselves
        # (a lost host's partners, a fault's pairs: a rank killed in the ring left its partner at 0.61x
        # under 3% noise, and four hosts judged give a spread of three numbers), which the run's
        # failures or the other rules say; "the noise hid it" would blame the wrong thing
        return []
    said = {v.host for v in (*nodes.slow, *nodes.suspects)} | {h for sv in nodes.switches for h in sv.hosts}
    tested = retests.results.values() if retests is not None else ()
    said |= {rt.subject for rt in tested if rt.kind == "node"}
    worst = np.where(m.class_judged, m.class_effect, np.inf).min(axis=0)
    low = [(m.hosts[i], float(np.exp(worst[i]))) for i in np.argsort(worst)
           if worst[i] <= np.log(CLEAR_RATIO) and m.hosts[i] not in said]
    if low:
        return [_not_cleared(ctx, low)]
    if nodes.seen_below < COARSE:
        return [_coarse(ctx)]
    return []


def _not_cleared(ctx: AnalysisContext, low: list[tuple[str, float]]) -> Finding:
    nodes = ctx.analyses.nodes
    spread = float(np.expm1(nodes.noise_sigma or 0.0))
    names = ", ".join(f"{h} ({g3(r)}x)" for h, r in low[:6])
    names += f" and {len(low) - 6} more" if len(low) > 6 else ""
    whose = "its" if len(low) == 1 else "their"
    return Finding(
        rule="not_cleared",
        severity="warn",
        subject_kind="node" if len(low) == 1 else "run",
        subject=low[0][0] if len(low) == 1 else f"{len(low)} nodes",
        title=(f"Not cleared: {names} of {whose} peers, but one pair measurement varies by about "
               f"{spread:.0%} here, so only a node below {g3(nodes.seen_below)}x is told from noise: "
               "neither found nor cleared"),
        evidence={"nodes": {h: sig3(r) for h, r in low}, "clear_ratio": CLEAR_RATIO,
                  "seen_below_ratio": sig3(nodes.seen_below), "pair_noise_log_sigma": sig3(nodes.noise_sigma),
                  "z_threshold": sig3(nodes.z_threshold), "collective": nodes.collective,
                  "sizes_bytes": list(nodes.sizes)},
        action="Measure them again with more iterations per point (-n), larger --pair-sizes or a re-test "
        "budget (--confirm-budget), on a quiet fabric: each of those shrinks a node's error.",
        hosts=[h for h, _ in low],
    )


def _coarse(ctx: AnalysisContext) -> Finding:
    nodes = ctx.analyses.nodes
    assert nodes.seen_below is not None  # check() returned before
    spread = float(np.expm1(nodes.noise_sigma or 0.0))
    return Finding(
        rule="coarse_resolution",
        severity="info",
        subject_kind="run",
        subject="pair measurements",
        title=(f"Coarse resolution: one pair measurement varies by about {spread:.0%} here, so a node had to "
               f"run below {g3(nodes.seen_below)}x of its peers to be told from noise; none read below "
               f"{g3(CLEAR_RATIO)}x"),
        evidence={"seen_below_ratio": sig3(nodes.seen_below), "pair_noise_log_sigma": sig3(nodes.noise_sigma),
                  "z_threshold": sig3(nodes.z_threshold), "hosts": len(nodes.hosts)},
        action="For a finer verdict measure with more iterations per point (-n) or larger --pair-sizes, "
        "on a quiet fabric.",
        hosts=[],
    )


RULE = Rule(name="resolution", ids=ids("not_cleared", "coarse_resolution"), check=check, doc=__doc__ or "")
