"""A fleet in two speeds.

``fleet_split`` (fail): half the hosts or more cannot run faster than one rate with any partner,
while the others run ``SPLIT_RATIO`` or more above it with each other. The slow-node rule weighs each
host against the fleet's own median; when half the fleet is slow that median is the slow rate, and
the slow hosts read as the norm (issue 45: three of six hosts capped to 50 Mbit/s gave PASS). A
host's best pair is what tells: a capped host is capped with every partner, a healthy one runs at
full rate with another healthy one, whatever the share of each. The slow group is the hosts whose
best pair is within ``CAPPED`` of the lowest (one cap, and noise); the fast one those ``SPLIT_RATIO``
above it (a healthy host whose leaf peers are all capped runs faster across the uplink: fast). Hop
classes do not split a fleet this way (every host's best pair is within its leaf), nor does one slow
host (fewer than half: the slow-node rule names it). Which group is healthy the fleet alone cannot
say, so nobody is drained: the finding names both groups and their rates, for the link rate or the
last baseline to decide.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from netbench.reports.context import AnalysisContext
from netbench.reports.learned import pair_rates
from netbench.reports.rule_ids import ids
from netbench.reports.rules.base import Rule
from netbench.reports.stats import sig3

from netbench.common.findings import Finding

_SHOW = 16
MIN_HOSTS = 6
"""Hosts judged (two measured partners or more) for a split: with four, "half" is two hosts whose best
pair is one of three, and the fast group one pair; a loaded machine's 64K pairs, 15x apart with every
host healthy, read as a split (issue 47's mistyped-host test, 4 hosts, once in CI)."""
CAPPED = 1.25
"""Hosts whose best pair is within this of the lowest best pair are at the floor: one cap, and noise."""
SPLIT_RATIO = 1.8
"""The fast hosts' best pairs at least this far above the floor: half the fleet at half rate is a
split; two leaves of a 6-host gloo fleet on a loaded machine, one of them short of a lost host, ran
1.5x apart with every host healthy."""


def check(ctx: AnalysisContext) -> list[Finding]:
    rows = replace(ctx.pairs)  # ``ok`` is changed below: on a copy, not the context's own
    lost = ctx.lost_hosts
    if lost:  # a host the run lost, and its pairs, say nothing about the fleet's speeds
        gone = rows.mask_of(lost)
        rows.ok = rows.ok & ~gone[rows.a] & ~gone[rows.b]
    pairs, rate = pair_rates(rows)
    n = len(rows.names)
    if n < MIN_HOSTS or len(rate) < MIN_HOSTS:
        return []
    best = np.full(n, np.nan)
    met = np.zeros(n, dtype=np.int64)
    for end in (0, 1):
        np.fmax.at(best, pairs[:, end], rate)
        np.add.at(met, pairs[:, end], 1)
    seen = np.flatnonzero((met >= 2) & np.isfinite(best))
    if len(seen) < MIN_HOSTS:
        return []
    floor = float(best[seen].min())
    slow, quick = seen[best[seen] <= floor * CAPPED], seen[best[seen] >= floor * SPLIT_RATIO]
    if len(quick) < 2 or 2 * len(slow) < len(seen) or 2 * len(quick) < len(seen) - len(slow):
        return []  # a split leaves most hosts off the floor fast
    if len(quick) < 3 and 3 * len(quick) < len(seen):
        # two fast hosts are one pair, one sample: two hosts of 256 that met in one fast sample (t5
        # noise) are the noise's tail, not a second speed; two of six (four capped) are a third
        return []
    within = np.isin(pairs[:, 0], quick) & np.isin(pairs[:, 1], quick)
    slow_rate = float(np.max(best[slow]))
    # a best pair is one sample: heavy-tailed noise that now and then speeds a pair up 2-20x gives some
    # hosts a best far above the rest with every host healthy (t3, 256 hosts: 19 "fast" hosts whose
    # pairs with each other ran at 180 GB/s, below the "slow" hosts' 249); a split holds in the fast
    # group's typical pair too
    if not within.any() or float(np.median(rate[within])) < SPLIT_RATIO * floor:
        return []
    fast_rate = float(np.median(rate[within]))
    names = [rows.names[h] for h in slow.tolist()], [rows.names[h] for h in quick.tolist()]
    return [Finding(
        rule="fleet_split",
        severity="fail",
        subject_kind="run",
        subject="fleet",
        title=f"The fleet runs at two speeds: {len(slow)} hosts ({_names(names[0])}) at most "
        f"{sig3(slow_rate)} GB/s with any partner, {len(quick)} ({_names(names[1])}) at "
        f"{sig3(fast_rate)} GB/s with each other",
        evidence={"slow_hosts": sorted(names[0]), "fast_hosts": sorted(names[1]),
                  "slow_best_GBps": sig3(slow_rate), "fast_median_GBps": sig3(fast_rate)},
        action="Half the fleet or more is at the lower rate, so its own median cannot say which group is "
        "healthy: compare both with the links' rate (netbench inventory) or the last baseline (netbench "
        "compare), then drain the group that is off. Nobody is drained for this finding.",
    )]


def _names(hosts: list[str]) -> str:
    shown = sorted(hosts)
    return ", ".join(shown[:_SHOW]) + (f" and {len(shown) - _SHOW} more" if len(shown) > _SHOW else "")


RULE = Rule(name="fleet_split", ids=ids("fleet_split"), check=check, doc=__doc__ or "")
