"""What making one group's communicator costs on the simulated fabric: the set-up a real rank pays
before its group's first measurement (collectives/groups.py, issue 29), charged per group by
``sim.run._measure`` on the fabric's clock and written into the rows as a real rank writes it.

The figures, and where each comes from:

- gloo, CPU ranks: measured here, two local ranks over loopback, 300 fresh groups one after
  another (tests/group_churn.py, 2-core VM shared by five developers, 2026-12-02): ``setup_s``
  median 6.8 ms, p10 2.4 ms, p90 36 ms; the median is ``GLOO_S``.
- NCCL, every rank on one node: measured on the lent H200 (torch 2.11, NCCL 2.28.9), a fresh
  1-rank ProcessGroupNCCL and its first all-reduce: median 21-23 ms (issue 29's table: 22-25 ms);
  split from a world communicator: 16-23 ms, no cheaper. One GPU is the lower bound of a node's
  set-up (``INTRA_S``).
- NCCL across nodes, published: NVIDIA/nccl issue #1646 (DGX B200, 8 ranks, NCCL's own
  "Init timings" line) breaks one communicator's init into alloc 0.41 s, bootstrap 0.03 s,
  allgathers 0.08 s, topo 1.10 s, graphs 0.01 s, connections 0.39 s: 2.02 s besides a one-off
  kernel load; NVIDIA/nccl issue #534 (V100, InfiniBand): 8 communicators of 8 ranks in 16.3 s
  (2.04 s each), 32 of 32 ranks in 130 s (4.06 s each). The power law through those two points,
  ``NET_S`` x ranks ** ``NET_EXP`` (about the square root of the ranks), gives 2.9 s for a pair of
  8-GPU nodes (16 ranks) and 63 s for a ring of 1,024 such nodes; a line through them would say
  11 minutes for the ring, where NVIDIA/nccl issue #1156 reports 2.5 minutes "at large scale
  (above certain K GPUs)" on NCCL's default path, so the sublinear fit is the one kept.
- Split across nodes (``ncclCommSplit``): not measured across nodes. A split rides the parent's
  bootstrap and, sharing the parent's resources, skips the buffer allocation: #1646's alloc and
  bootstrap (0.44 of 2.02 s) are saved, so ``SPLIT_SHARE`` = 0.78 of a fresh group. This is the
  optimistic side: a split is collective over the whole world, so every round would also wait for
  the world's slowest rank (not charged here), and one dead rank blocks every later split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GLOO_S = 0.0068
INTRA_S = 0.022
NET_EXP = 0.496  # log(4.06 / 2.04) / log(32 / 8)
NET_S = 2.04 / 8**NET_EXP
SPLIT_SHARE = 0.78
WAYS = ("fresh", "split")


@dataclass(frozen=True)
class GroupSetup:
    """How every group of a simulated run is made (``fresh`` as collectives/groups.py does, or
    ``split`` from a world communicator, for the comparison in benchmarks/bench_group_setup.py)."""

    made: str = "fresh"

    def __post_init__(self) -> None:
        if self.made not in WAYS:
            raise ValueError(f"group set-up {self.made!r}: choose from {', '.join(WAYS)}")

    def seconds(self, backend: str, ranks: int, nodes: int) -> float:
        """One group's set-up: ``ranks`` ranks on ``nodes`` nodes (see the module's figures)."""
        if backend != "nccl":
            return GLOO_S
        if nodes <= 1:
            return INTRA_S  # split measured no cheaper on one node
        fresh = NET_S * ranks**NET_EXP
        return fresh * SPLIT_SHARE if self.made == "split" else fresh


@dataclass
class Lanes:
    """Groups made ahead on the fabric's clock, as ranks make them (collectives/ahead.py): the
    groups of the k-th phase begin to be made when the first phase from k - ``depth`` on that makes
    groups ahead (a pair or rail phase, ``ahead.FILLS``) starts, and a phase waits only for what is
    left of its groups' making; with none such, they are made at its turn.

    ``slowdown``: how much longer one making takes beside the others made at once. 1 (no slowdown)
    is the optimistic bound: a making is mostly waiting (bootstrap round trips, connection
    handshakes) and topology search on one of a node's many cores, but not measured across nodes;
    benchmarks/bench_group_setup.py reports 1 and 2."""

    depth: int
    slowdown: float = 1.0
    starts: list[tuple[float, bool]] = field(default_factory=list)  # each phase's start, and if it fills

    def wait(self, now: float, setup_s: float, fills: bool) -> float:
        """What of ``setup_s`` the next phase, starting at ``now``, waits for its groups; ``fills``:
        whether the lanes make later groups while it measures."""
        k = len(self.starts)
        self.starts.append((now, fills))
        begun = [t for t, f in self.starts[max(0, k - self.depth) : k] if f] if self.depth else []
        if not begun:
            return setup_s
        return max(0.0, begun[0] + setup_s * self.slowdown - now)

    @property
    def ahead(self) -> bool:
        """Whether the last phase's groups were made ahead."""
        k = len(self.starts) - 1
        return bool(self.depth) and any(f for _, f in self.starts[max(0, k - self.depth) : k])
