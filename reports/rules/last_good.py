"""Each node of the run against its own last good run in the fleet history (``netbench preflight``;
the comparisons are an input, ``AnalysisContext.last_good``, made by ``netbench.history.lastgood``).

A node is *below its last good run* when it measured at least ``LOSS`` less now, by more than its
own noise: ``Z`` times the run-to-run spread of its effect over the history, for a difference of two
runs. One run cannot show that a loss persists; it is said as measured in this run, against that
run, and never drains (a warning at most, whatever the policy says). Its finding is a warning when
the loss is the node's own (it lost against the fleet as well, by ``LOSS``), information when the
whole fleet measured as much lower (no node's fault: one finding for them all); and information as
well where another rule's warning or failure names the node (``Rule.defers``): that one is the alarm.
"""

from __future__ import annotations

import math

import numpy as np
from netbench.reports.context import AnalysisContext
from netbench.reports.lastgood import LastGood
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule, policy_severity, size_label

from netbench.common.findings import Finding

ID = "slower_than_last_good"
LOSS = 0.10
Z = 3.0


def _lower(g: LastGood) -> bool:
    """Whether ``g`` measured ``LOSS`` or more below its last good run, beyond its own noise."""
    return g.now_GBps <= (1 - LOSS) * g.then_GBps and \
        math.log(g.then_GBps / g.now_GBps) >= Z * math.sqrt(2) * math.log1p(g.noise_pct / 100)


def check(ctx: AnalysisContext) -> list[Finding]:
    found = list(ctx.last_good)
    lower = [g for g in found if _lower(g)]
    if not lower:
        return []
    fleet = float(np.median([g.now_GBps / g.then_GBps for g in found]))
    whole = f"; the fleet as a whole measured {100 * (fleet - 1):+.0f}%" if abs(fleet - 1) >= 0.05 else ""
    own = [g for g in lower if g.now_GBps / g.then_GBps / fleet <= 1 - LOSS]
    with_fleet = [g for g in lower if g not in own]
    out = [Finding(
        rule=ID, severity=policy_severity(ctx, ID, cap="warn"), subject_kind="node", subject=g.host,
        hosts=[g.host],
        title=(f"{g.host} measured {g.change_pct:+.0f}% against its last good run "
               f"({g.started[:10]}, run {g.run_id}): {g.now_GBps:.3g} GB/s against "
               f"{g.then_GBps:.3g} GB/s at {size_label(g.bytes)}{whole}"),
        evidence=g.to_json() | {"fleet_change_pct": round(100 * (fleet - 1), 2)},
        action=f"See what changed on it since that run: netbench history show node {g.host}",
    ) for g in own]
    if with_fleet:
        names = ", ".join(g.host for g in with_fleet[:8]) + (" ..." if len(with_fleet) > 8 else "")
        out.append(Finding(
            rule=ID, severity="info", subject_kind="run", subject="fleet",
            title=(f"{len(with_fleet)} of {len(found)} nodes measured {LOSS:.0%} or more below their last "
                   f"good run, as the fleet did ({100 * (fleet - 1):+.0f}%): {names}"),
            evidence={"nodes": [g.to_json() for g in with_fleet],
                      "fleet_change_pct": round(100 * (fleet - 1), 2)},
            action="netbench history show fleet: when the fleet's headline moved, and what changed then",
        ))
    return out


RULE = Rule(
    name="last_good", ids=ids(ID), check=check, doc=__doc__ or "", own_severity=True,
    defers=True,
)
