"""The circle method: every pair exactly once, no host twice in a round (N = 2..64)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from netbench.collectives.pairs import batched_rounds, circle_rounds


@settings(max_examples=63, deadline=None)
@given(st.integers(min_value=2, max_value=64))
def test_rounds_cover_every_pair_once(n: int) -> None:
    hosts = [f"h{i:02d}" for i in range(n)]
    rounds = circle_rounds(hosts)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert set(seen) == {frozenset(p) for p in itertools.combinations(hosts, 2)}
    for r in rounds:
        members = [h for p in r for h in p]
        assert len(members) == len(set(members))
        assert len(r) == n // 2


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=2, max_value=40), st.integers(min_value=1, max_value=8))
def test_batches_never_exceed_k(n: int, k: int) -> None:
    hosts = [f"h{i}" for i in range(n)]
    batches = batched_rounds(hosts, k)
    assert all(1 <= len(b) <= k for b in batches)
    assert sum(len(b) for b in batches) == n * (n - 1) // 2
