"""Uplinks that explain their hosts' slowness, judged from the pair model and the node verdicts
(``reports.analyses.judge_nodes``): a switch whose hosts are slow only across its uplink
(``SwitchVerdict``), and the only two switches under one parent whose pairs carried less than
their uplinks should (``UplinkPairVerdict``: one of the two uplinks is slow, pairs cannot say which).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from netbench.inventory.topology import LEAF, switch_path
from netbench.reports.pairmodel import PairModel

from netbench.common.naming import natural_key

if TYPE_CHECKING:
    from netbench.reports.analyses import NodeVerdict
    from netbench.reports.policy import Thresholds


@dataclass(frozen=True)
class SwitchVerdict:
    """A switch whose uplink explains its hosts: slow across it, fine below it."""

    switch: str
    hosts: tuple[str, ...]  # its hosts slow only through its uplink
    hosts_below: int
    classes: tuple[str, ...]  # the hop classes that cross the uplink
    effect_ratio: float  # median effect of those hosts in those classes
    below: frozenset[str] = frozenset()  # every host under the switch

    def crossed_by(self, a: str, b: str) -> bool:
        """Whether a pair's path goes through this uplink (one end below the switch, one not)."""
        return (a in self.below) != (b in self.below)


@dataclass(frozen=True)
class UplinkPairVerdict:
    """The only two switches under one parent, whose pairs with each other carried less than uplinks
    at the policy's oversubscription do: one of their uplinks is slow, and pairs cannot tell which
    (every pair between them crosses both; with a third sibling the node effects name it,
    ``SwitchVerdict``). Capacities are in NICs' worth: the busbw of a pair within a leaf."""

    switches: tuple[str, str]
    parent: str
    tier: int  # the two switches' tier (1: leaves), each tier below as oversubscribed as the policy allows
    hosts_below: tuple[int, int]
    capacity_nics: float  # the most their pairs carried together in one round
    expected_nics: float  # what the smaller side's uplinks carry at the policy's oversubscription
    round: int  # the round that carried the most
    pairs: int  # its pairs between the two
    pair_busbw_GBps: float  # their median busbw in that round
    nic_busbw_GBps: float  # the median busbw of pairs within a leaf


def _tier(klass: str) -> int:
    """The tier of a hop class: leaf 1, spine 2, core 3, tier-N N (0 for intra/unknown)."""
    named = {"leaf": 1, "spine": 2, "core": 3}
    if klass in named:
        return named[klass]
    return int(klass[5:]) if klass.startswith("tier-") and klass[5:].isdigit() else 0


def _subtrees(hosts: list[str], switches: Mapping[str, str]) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Per switch, the indices of the hosts below it, and its tier (1: a leaf)."""
    below: dict[str, list[int]] = {}
    tier: dict[str, int] = {}
    for i, h in enumerate(hosts):
        for k, sw in enumerate(switch_path(h, switches), 1):
            below.setdefault(sw, []).append(i)
            tier[sw] = max(tier.get(sw, 0), k)
    return below, tier


def switch_verdicts(
    m: PairModel, slow: dict[int, NodeVerdict], switches: Mapping[str, str], slow_factor: float
) -> list[SwitchVerdict]:
    """Switches whose hosts are slow only in the classes that cross the switch's uplink and fine
    below it: the uplink is the fault, not the hosts (half of them or more, at least 3)."""
    assert m.class_judged is not None and m.class_effect is not None
    below, tier_of = _subtrees(m.hosts, switches)
    flagged: dict[str, SwitchVerdict] = {}
    for sw, members in below.items():
        tier = tier_of[sw]
        above = [k for k, c in enumerate(m.classes) if _tier(c) > tier]
        within = [k for k, c in enumerate(m.classes) if 0 < _tier(c) <= tier]
        if not above or not within:
            continue
        hits = []
        for i in members:
            v = slow.get(i)
            if v is None or v.kind != "capped" or v.hop_class not in [m.classes[k] for k in above]:
                continue
            fine_below = any(m.class_judged[k, i] for k in within) and all(
                m.classes[k] not in v.class_effect_ratio or v.class_effect_ratio[m.classes[k]] > slow_factor
                for k in within
            )
            if fine_below:
                hits.append(i)
        if len(hits) >= 3 and len(hits) >= 0.5 * len(members):
            effects = [m.class_effect[k, i] for i in hits for k in above if m.class_judged[k, i]]
            flagged[sw] = SwitchVerdict(
                switch=sw,
                hosts=tuple(m.hosts[i] for i in hits),
                hosts_below=len(members),
                classes=tuple(m.classes[k] for k in above),
                effect_ratio=float(np.exp(np.median(effects))),
                below=frozenset(m.hosts[i] for i in members),
            )
    # the highest flagged switch explains its flagged descendants
    return [
        sv
        for sw, sv in flagged.items()
        if not any(up in flagged for up in switch_path_up(sw, switches))
    ]


def uplink_pairs(m: PairModel, switches: Mapping[str, str], t: Thresholds) -> list[UplinkPairVerdict]:
    """Parents with exactly two child switches whose pairs with each other carried, in their best
    round, less than slow_node_factor x what uplinks at the policy's oversubscription carry
    (``cross_spine_warn_ratio`` of the smaller side's NICs, per tier below), while running well
    below a NIC each (slow_pair_factor: the path was full, so their sum is its capacity, not a lower
    bound of it).

    Why the round's sum and not the pairs' ratio to same-leaf pairs: that ratio is the load of the
    round (how many pairs shared the uplink), the sum is what the uplink carries whatever the
    schedule. The best round, so noise and lightly loaded rounds can only make the fabric look better."""
    nic = (m.class_median_bw.get(LEAF) or [None])[-1]
    if not nic or m.rounds is None:
        return []
    below, tier = _subtrees(m.hosts, switches)
    children: dict[str, list[str]] = {}
    for sw in below:  # a switch listed without a parent hangs off "" (the fabric that joins them)
        children.setdefault(switches.get(sw, ""), []).append(sw)
    bw, out = m.bw[-1], []
    for parent, kids in children.items():
        kids.sort(key=natural_key)
        hosts = len(below[parent]) if parent else len(m.hosts)
        if len(kids) != 2 or len(below[kids[0]]) + len(below[kids[1]]) != hosts:
            continue
        x, y = (np.array(below[k]) for k in kids)
        block, rnd = bw[np.ix_(x, y)], m.rounds[np.ix_(x, y)]
        ok = np.isfinite(block) & (rnd >= 0)
        if not ok.any():
            continue
        r_u, inv = np.unique(rnd[ok], return_inverse=True)
        carried = np.bincount(inv, weights=block[ok])
        best = int(np.argmax(carried))
        in_best = block[ok][inv == best]
        capacity = float(carried[best]) / nic
        # each tier below may be oversubscribed as the policy allows: a pod's uplinks carry its
        # hosts' NICs x ratio (its leaves') x ratio (its own)
        expected = t.cross_spine_warn_ratio ** tier[kids[0]] * min(len(x), len(y))
        full = float(np.median(in_best)) <= t.slow_pair_factor * nic
        if full and capacity < t.slow_node_factor * expected:
            out.append(
                UplinkPairVerdict(
                    switches=(kids[0], kids[1]),
                    parent=parent,
                    tier=tier[kids[0]],
                    hosts_below=(len(x), len(y)),
                    capacity_nics=capacity,
                    expected_nics=expected,
                    round=int(r_u[best]),
                    pairs=int(in_best.size),
                    pair_busbw_GBps=float(np.median(in_best)),
                    nic_busbw_GBps=float(nic),
                )
            )
    return out


def switch_path_up(switch: str, switches: Mapping[str, str]) -> list[str]:
    """The switches above ``switch`` (its parent, the parent's parent ...)."""
    out: list[str] = []
    cur = switches.get(switch)
    while cur is not None and cur not in out:
        out.append(cur)
        cur = switches.get(cur)
    return out
