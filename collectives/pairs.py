"""Pair schedules: which node pairs run together.

The circle method (round-robin tournament) gives every pair exactly once in N-1 rounds of N/2
disjoint pairs (odd N: a phantom host makes one real host sit out each round). Disjoint pairs can run
at once without sharing a node; they may still share switch uplinks, hence ``batched`` (at most k
pairs at once) and ``sequential`` (k = 1) for fabrics where concurrent cross-switch pairs interfere.

The circle method knows nothing of switches: one round sends three cross-leaf pairs through a leaf's
uplink, the next seven, so two cross-leaf pairs differ 2-3x because of their round.
``topology_rounds`` (the default when the topology places every host) schedules by leaf instead:
leaves meet leaf against leaf (the circle method over the leaves), and two meeting leaves of n and m
hosts run min(n, m) pairs at once through each uplink in every round of their meeting (Latin-square
matchings), so the load on an uplink is the same in every round for leaves of one size; pairs within
a leaf fill the rounds in which their hosts are idle, else rounds of their own. Rounds: N-1 for an
even number of equal leaves (the minimum), N for an odd one. ``per_uplink`` caps the pairs through
any one uplink further (splitting a round).

``cross_leaf_rounds`` follows it in a quick pass: a few rounds per tier in which leaves (then pods)
meet several others, all their hosts at once, so a slow uplink is the common factor of its hosts'
pairs (with only two leaves the pairs cannot say which of the two uplinks; their sum in a round still
says how much the two carry).

``leaf_first_rounds`` is for a quick pass that measures only a few partners a node (preflight): each
node meets partners on its own leaf first. Behind an oversubscribed uplink a cross-leaf pair gets less
than a NIC, so a node capped below its peers shows only against peers of its own leaf; a quick pass
of circle rounds in hosts-file order pairs node i with ~node N-i, in another pod, and never sees it.

Rounds are ``IndexedRound``s: a round's pairs as positions in the host list every round of the
schedule shares (8 bytes a pair), read as pairs of names by whoever iterates them. A 4,096-node
schedule is 8M pairs; as tuples of names they cost a gigabyte and the plan builder's time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
from netbench.inventory.topology import Uplinks, crossed_uplinks, leaf_of, meeting_tier, switch_path

Pair = tuple[str, str]
_SCAN = 64  # rounds looked at together when a leaf's own pairs look for a round they fit in


class IndexedRound(Sequence[Pair]):
    """One round's pairs: ``index[i]`` is the positions of pair i's two hosts in ``hosts``, a list
    every round of the schedule shares. Reads as a sequence of name pairs (equal to a list of the
    same pairs); the plan builder and the simulator use ``index`` directly."""

    __slots__ = ("hosts", "index")

    def __init__(self, hosts: Sequence[str], index: np.ndarray) -> None:
        self.hosts = hosts
        self.index = index.reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.index)

    @overload
    def __getitem__(self, i: int) -> Pair: ...

    @overload
    def __getitem__(self, i: slice) -> IndexedRound: ...

    def __getitem__(self, i: int | slice) -> Pair | IndexedRound:
        if isinstance(i, slice):
            return IndexedRound(self.hosts, self.index[i])
        a, b = self.index[i]
        return self.hosts[a], self.hosts[b]

    def __iter__(self) -> Iterator[Pair]:
        h = self.hosts
        return ((h[a], h[b]) for a, b in self.index.tolist())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable as a list

    def __repr__(self) -> str:
        return f"IndexedRound({list(self)!r})"


def _circle(n: int) -> np.ndarray:
    """The circle method on players 0..n-1 as an array (rounds, pairs, 2). Player 0 stays in seat 0
    and the others move one seat a round (seat s >= 1 holds player 1 + (s - 1 - r) mod (m - 1) in
    round r); seat s meets seat m - 1 - s. An odd n gets a phantom player n: whoever meets it sits
    the round out."""
    if n < 2:
        return np.zeros((0, 0, 2), dtype=np.int32)
    m = n + n % 2
    r = np.arange(m - 1)[:, None]
    s = np.arange(m // 2)[None, :]

    def seat(k: np.ndarray) -> np.ndarray:
        return np.where(k == 0, 0, 1 + (k - 1 - r) % (m - 1))

    pairs = np.stack(np.broadcast_arrays(seat(s), seat(m - 1 - s)), axis=-1).astype(np.int32)
    if m > n:
        pairs = pairs[(pairs < n).all(axis=-1)].reshape(m - 1, m // 2 - 1, 2)
    return pairs


def circle_rounds(hosts: Sequence[str]) -> list[IndexedRound]:
    """N-1 rounds (N even) or N rounds (N odd) of disjoint pairs covering every pair once."""
    if len(set(hosts)) != len(hosts):
        raise ValueError("host names must be unique")
    return [IndexedRound(hosts, rnd) for rnd in _circle(len(hosts))]


def batched_rounds(hosts: list[str], k: int) -> list[IndexedRound]:
    """Circle rounds split so no more than ``k`` pairs run at once (k=1: one pair at a time)."""
    return split_rounds(circle_rounds(hosts), k)


def split_rounds(rounds: Sequence[IndexedRound], k: int) -> list[IndexedRound]:
    """Each round cut into rounds of at most ``k`` pairs, in order."""
    if k < 1:
        raise ValueError(f"pair batch must be >= 1, got {k}")
    return [rnd[i : i + k] for rnd in rounds for i in range(0, len(rnd), k)]


def _by_leaf(hosts: Sequence[str], uplinks: Uplinks) -> dict[str, list[str]]:
    """Leaf -> its hosts, in the given order; every host must be unique and under a leaf."""
    if len(set(hosts)) != len(hosts):
        raise ValueError("host names must be unique")
    leaves: dict[str, list[str]] = {}
    for h in hosts:
        leaf = leaf_of(h, uplinks)
        if leaf is None:
            raise ValueError(f"host {h} is under no switch of the topology")
        leaves.setdefault(leaf, []).append(h)
    return leaves


def topology_rounds(
    hosts: Sequence[str], uplinks: Uplinks, per_uplink: int | None = None
) -> list[IndexedRound]:
    """Every pair once, in rounds of disjoint pairs scheduled by leaf (module docstring). Every host
    must have a leaf in ``uplinks`` (``common.topology``); ``per_uplink``: at most this many pairs of
    a round through one uplink."""
    if per_uplink is not None and per_uplink < 1:
        raise ValueError(f"pairs per uplink must be >= 1, got {per_uplink}")
    pos = {h: i for i, h in enumerate(hosts)}
    members = [np.array([pos[h] for h in hs], dtype=np.int32) for hs in _by_leaf(hosts, uplinks).values()]
    rounds = [rnd for meeting in _circle(len(members)) for rnd in _meeting(meeting, members)]
    if per_uplink is not None:
        paths = [switch_path(h, uplinks) for h in hosts]
        rounds = [part for rnd in rounds for part in _cap(rnd, per_uplink, paths)]
    return [IndexedRound(hosts, rnd) for rnd in _fill_within(rounds, members, len(hosts))]


def _meeting(meeting: np.ndarray, members: list[np.ndarray]) -> list[np.ndarray]:
    """The rounds in which these pairs of leaves meet: leaves X (n hosts) and Y (m >= n) meet in m
    rounds, round t pairing X[i] with Y[(i + t) mod m], which covers X x Y once."""
    blocks = []
    for x, y in meeting.tolist():
        small, big = sorted((members[x], members[y]), key=len)
        i, t = np.arange(len(small))[None, :], np.arange(len(big))[:, None]
        blocks.append(np.stack(np.broadcast_arrays(small[i], big[(i + t) % len(big)]), axis=-1))
    longest = max(len(b) for b in blocks)
    return [np.concatenate([b[t] for b in blocks if len(b) > t]) for t in range(longest)]


def _fill_within(rounds: list[np.ndarray], members: list[np.ndarray], n_hosts: int) -> list[np.ndarray]:
    """The pairs within each leaf added to the leaf-against-leaf ``rounds``: a leaf's matchings (the
    circle method), in order, each in the next round where its hosts are idle, else in rounds of
    their own after them (shared by the leaves)."""
    n_cross = len(rounds)
    busy = np.zeros((n_cross, n_hosts), dtype=bool)
    for t, rnd in enumerate(rounds):
        busy[t, rnd.ravel()] = True
    parts = [[rnd] for rnd in rounds]
    for mem in members:
        cursor, extra = 0, n_cross
        for matching in _circle(len(mem)):
            pairs = mem[matching]
            used = pairs.ravel()
            cursor = _first_idle(busy, cursor, used)
            at = cursor if cursor < n_cross else extra
            if at == len(parts):
                parts.append([])
            parts[at].append(pairs)
            if cursor < n_cross:
                busy[cursor, used] = True
                cursor += 1
            else:
                extra += 1
    return [np.concatenate(p) if len(p) > 1 else p[0] for p in parts]


def _first_idle(busy: np.ndarray, cursor: int, hosts: np.ndarray) -> int:
    """The first round from ``cursor`` in which none of ``hosts`` is busy; len(busy) if none is."""
    while cursor < len(busy):
        idle = np.flatnonzero(~busy[cursor : cursor + _SCAN][:, hosts].any(axis=1))
        if len(idle):
            return cursor + int(idle[0])
        cursor += _SCAN
    return len(busy)


def _cap(rnd: np.ndarray, k: int, paths: list[list[str]]) -> list[np.ndarray]:
    """One round cut (first fit) into rounds with at most ``k`` of its pairs through any uplink
    (``paths``: each host's switch path)."""
    parts: list[tuple[list[int], Counter[str]]] = []
    for i, (a, b) in enumerate(rnd.tolist()):
        used = crossed_uplinks(paths[a], paths[b])
        fits = next((part for part in parts if all(part[1][sw] < k for sw in used)), None)
        if fits is None:
            fits = ([], Counter())
            parts.append(fits)
        fits[0].append(i)
        fits[1].update(used)
    return [rnd[taken] for taken, _ in parts]


def cross_leaf_rounds(hosts: list[str], uplinks: Uplinks, rounds: int) -> list[list[Pair]]:
    """For each tier above the leaves, rounds of disjoint pairs whose hosts first meet at that tier (a
    pod's leaves with each other, then pods with each other, ...), each child of a switch meeting
    ``rounds`` others (two children: once, ``_meeting_rounds``). Under each switch of
    the tier its children meet child against child (the circle method over them; a meeting pairs all
    of the smaller child's hosts with the other's at once, the matching rotated by the round), so
    each child's uplink carries as many pairs as the smaller side has hosts in every round, and a
    slow one is the common factor of its hosts' pairs against several other children. Why a set of
    rounds per tier: a tier's uplinks are the bottleneck only in its own rounds (a slow leaf uplink
    hides behind a full pod uplink). Every host must have a leaf in ``uplinks``."""
    _by_leaf(hosts, uplinks)  # every host placed, names unique
    # "" above every top switch: leaves listed without a parent meet too (the fabric joins them)
    paths = {h: [*switch_path(h, uplinks), ""] for h in hosts}
    out: list[list[Pair]] = []
    for tier in range(2, max(len(p) for p in paths.values()) + 1):
        # switch of this tier -> its children (one tier down) -> their hosts, in the given order
        under: dict[str, dict[str, list[str]]] = {}
        for h in hosts:
            if len(paths[h]) >= tier:
                under.setdefault(paths[h][tier - 1], {}).setdefault(paths[h][tier - 2], []).append(h)
        n_rounds = max(_meeting_rounds(len(children), rounds) for children in under.values())
        rnds: list[list[Pair]] = [[] for _ in range(n_rounds)]
        for children in under.values():
            meetings = circle_rounds(list(children))
            used: dict[Pair, set[int]] = {}  # a meeting's rotations so far: never a pair twice
            for r in range(_meeting_rounds(len(children), rounds)):
                for x, y in meetings[r % len(meetings)]:
                    small, big = sorted((children[x], children[y]), key=len)
                    turn = r % len(big)  # rotated by the round: a bigger child's spare hosts take turns
                    if turn not in used.setdefault((x, y), set()):
                        used[(x, y)].add(turn)
                        rnds[r].extend((a, big[(i + turn) % len(big)]) for i, a in enumerate(small))
        out.extend(rnd for rnd in rnds if rnd)
    return out


def _meeting_rounds(children: int, rounds: int) -> int:
    """Rounds for ``children`` siblings to meet others ``rounds`` times each: one for two (their
    pairs cross the same two uplinks whoever meets whom, so more rounds tell nothing more), ``rounds``
    for an even number, more for an odd one (one of them sits out each round)."""
    if children < 2:
        return 0
    if children == 2:
        return 1
    return rounds if children % 2 == 0 else -(-rounds * children // (children - 1))


def leaf_first_rounds(hosts: list[str], uplinks: Uplinks, rounds: int) -> list[list[Pair]]:
    """``rounds`` rounds of disjoint pairs, every pair at most once, each node with partners of its
    own leaf first (the circle method within each leaf, the leaves side by side). A node left idle in
    a round (an odd leaf's sit-out, a leaf whose pairs are used up) is paired with the closest idle
    node (the lowest switch they share: its pod before another pod) it has not met, the idle nodes
    with the fewest such options first (so that a small leaf's nodes find partners). Every host must
    have a leaf in ``uplinks`` (``common.topology``)."""
    leaves = _by_leaf(hosts, uplinks)
    within = [circle_rounds(members) for members in leaves.values()]
    paths = {h: switch_path(h, uplinks) for h in hosts}
    met: set[frozenset[str]] = set()
    out: list[list[Pair]] = []
    for t in range(rounds):
        rnd = [p for leaf in within if t < len(leaf) for p in leaf[t] if frozenset(p) not in met]
        busy = {h for p in rnd for h in p}
        idle = [h for h in hosts if h not in busy]
        fresh = {a: [b for b in idle if b != a and frozenset((a, b)) not in met] for a in idle}
        left = set(idle)
        for a in sorted(idle, key=lambda h: len(fresh[h])):  # the fewest options first: more get one
            if a not in left:
                continue
            options = [b for b in fresh[a] if b in left]
            if options:
                b = min(options, key=lambda x: meeting_tier(paths[a], paths[x]))
                left -= {a, b}
                rnd.append((a, b))
        if not rnd:
            break
        met |= {frozenset(p) for p in rnd}
        out.append(rnd)
    return out
