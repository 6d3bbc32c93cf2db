"""Preflight's own decisions, pure functions: which pairs the quick pass runs (whom to drain is
``reports.verdict.drain_and_check``'s, the rule of every output). Who is a suspect, whom it is
re-tested with and what the re-test says are ``netbench.confirm``'s, shared with ``sweep --hosts``.
Tested without any host (tests/test_preflight_plan.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from netbench.confirm import Pair


# -- stages 2 and 4: measuring -----------------------------------------------------------------------
def quick_rounds(
    hosts: list[str], partners: int, switches: Mapping[str, str] | None = None
) -> list[list[Pair]]:
    """Rounds until every host has ``partners`` partners (or all of them): partners on its own leaf
    first when the topology places every host (``collectives.pairs.leaf_first_rounds``: behind an
    oversubscribed uplink a capped NIC shows only against its leaf peers), then ``partners`` rounds
    per tier above the leaves in which leaves (then pods) meet others, every host at once
    (``collectives.pairs.cross_leaf_rounds``: a slow uplink is then the common factor of its hosts'
    pairs, which the own-leaf rounds never cross); else the first circle-method rounds."""
    from netbench.collectives.pairs import circle_rounds, cross_leaf_rounds, leaf_first_rounds
    from netbench.inventory.topology import leaf_of

    want = min(partners, len(hosts) - 1)
    schedule = circle_rounds(hosts)
    placed = switches is not None and all(leaf_of(h, switches) is not None for h in hosts)
    if placed:
        # leaf_first_rounds can leave a host idle in a round (odd totals), hence the spare rounds
        schedule = leaf_first_rounds(hosts, switches, 2 * want + 1)
    have: Counter[str] = Counter()
    out: list[list[Pair]] = []
    for rnd in schedule:
        if all(have[h] >= want for h in hosts):
            break
        out.append(list(rnd))
        for a, b in rnd:
            have[a] += 1
            have[b] += 1
    if placed and switches is not None:
        met = {frozenset(p) for rnd in out for p in rnd}  # an odd leaf's idle node may have met one
        for rnd in cross_leaf_rounds(hosts, switches, want):
            fresh = [p for p in rnd if frozenset(p) not in met]
            if fresh:
                out.append(fresh)
    return out
