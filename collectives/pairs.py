"""Pair schedules: which node pairs run together.

The circle method (round-robin tournament) gives every pair exactly once in N-1 rounds of N/2
disjoint pairs (odd N: a phantom host makes one real host sit out each round). Disjoint pairs can run
at once without sharing a node; they may still share switch uplinks, hence ``batched`` (at most k
pairs at once) and ``sequential`` (k = 1) for fabrics where concurrent cross-switch pairs interfere.
"""

from __future__ import annotations

Pair = tuple[str, str]


def circle_rounds(hosts: list[str]) -> list[list[Pair]]:
    """N-1 rounds (N even) or N rounds (N odd) of disjoint pairs covering every pair once."""
    if len(set(hosts)) != len(hosts):
        raise ValueError("host names must be unique")
    players: list[str | None] = list(hosts)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)  # the host paired with None sits out this round
    n = len(players)
    rounds: list[list[Pair]] = []
    fixed, rest = players[0], players[1:]
    for _ in range(n - 1):
        lineup = [fixed, *rest]
        pairs: list[Pair] = []
        for i in range(n // 2):
            a, b = lineup[i], lineup[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b))
        rounds.append(pairs)
        rest = rest[-1:] + rest[:-1]
    return rounds


def batched_rounds(hosts: list[str], k: int) -> list[list[Pair]]:
    """Circle rounds split so no more than ``k`` pairs run at once (k=1: one pair at a time)."""
    if k < 1:
        raise ValueError(f"pair batch must be >= 1, got {k}")
    out: list[list[Pair]] = []
    for rnd in circle_rounds(hosts):
        for i in range(0, len(rnd), k):
            out.append(rnd[i : i + k])
    return out
