"""Hop classes and uplinks: which switches a pair of hosts goes through, and how many pairs of a
round share an uplink. The topology files that give the uplinks are read by
``netbench.inventory.topology``, which re-exports every name here.

Uplinks: what the rest of netbench passes around (and run.json records as ``topology``) is one flat
map ``name -> the switch it hangs off``: every host to its leaf, every switch to its parent. Hosts
placed only by ``switch=`` labels or discovered neighbours have a leaf without a parent.

Hop classes (the tier of the lowest switch two hosts share; users write these words in policy files,
``hop_class = "spine"``, and findings show them):

* ``intra``   the same host;
* ``leaf``    the same leaf switch (or Slurm block);
* ``spine``   through the leaves' parent (tier 2);
* ``core``    through a third-tier switch;
* ``tier-N``  through a switch N >= 4 tiers above the hosts;
* ``unknown`` either host is not placed.

A switch's tier counts from the hosts: its leaf is tier 1, the leaf's parent tier 2, and so on;
in an unbalanced tree the longer of the two paths counts. Two hosts whose switches share no listed
ancestor (two leaves of a flat map, or two root switches) are taken to meet one tier above the
highest switch listed for either, since the fabric that joins them is not in the file: two leaves
without parents meet at ``spine``, as the two-tier vocabulary always said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

INTRA, LEAF, SPINE, CORE, UNKNOWN = "intra", "leaf", "spine", "core", "unknown"
HOP_CLASSES = (INTRA, LEAF, SPINE, CORE, UNKNOWN)
"""The hop classes with a name (``tier-N`` for N >= 4 besides): what a policy's ``hop_class`` says."""
_TIER_NAMES = {1: LEAF, 2: SPINE, 3: CORE}
_DEEP = re.compile(r"tier-(\d+)")

Uplinks = Mapping[str, str]
"""host -> its leaf switch, switch -> its parent switch (see the module docstring)."""


def tier_name(tier: int) -> str:
    """The hop class of a pair whose lowest common switch is ``tier`` tiers above the hosts."""
    if tier < 1:
        raise ValueError(f"tier must be >= 1, got {tier}")
    return _TIER_NAMES.get(tier, f"tier-{tier}")


def is_hop_class(word: str) -> bool:
    """Whether ``word`` is a hop class of the vocabulary (``tier-N`` only for N >= 4: lower tiers
    have names, and one tier must not have two spellings)."""
    if word in (INTRA, UNKNOWN) or word in _TIER_NAMES.values():
        return True
    m = _DEEP.fullmatch(word)
    return bool(m) and int(m.group(1)) > max(_TIER_NAMES)


def _lookup(name: str, uplinks: Uplinks) -> str | None:
    """The key ``name`` is known by: itself, else its short name (hosts files often use FQDNs,
    topology files short names)."""
    if name in uplinks:
        return name
    short = name.split(".", 1)[0]
    return short if short in uplinks else None


def leaf_of(host: str, uplinks: Uplinks) -> str | None:
    """The switch the host hangs off; None if it is not placed."""
    key = _lookup(host, uplinks)
    return uplinks[key] if key is not None else None


def switch_path(host: str, uplinks: Uplinks) -> list[str]:
    """The host's switches from its leaf up to the highest one listed (stops on a loop)."""
    out: list[str] = []
    cur = leaf_of(host, uplinks)
    while cur is not None and cur not in out:
        out.append(cur)
        cur = uplinks.get(cur)
    return out


def meeting_tier(path_a: list[str], path_b: list[str]) -> int:
    """Tier of the lowest switch two leaf-to-top paths share (module docstring: unbalanced trees,
    no common switch)."""
    on_b = {sw: i for i, sw in enumerate(path_b)}
    for i, sw in enumerate(path_a):
        if sw in on_b:
            return max(i, on_b[sw]) + 1
    return max(len(path_a), len(path_b)) + 1


def crossed_uplinks(path_a: list[str], path_b: list[str]) -> list[str]:
    """The switches whose uplink a pair between two leaf-to-top paths goes through: those below the
    lowest switch both paths share, on both sides (every switch of both when they share none: the
    fabric that joins them is above them all). Empty for two hosts of one leaf."""
    common = next((sw for sw in path_a if sw in path_b), None)
    if common is None:
        return path_a + path_b
    return path_a[: path_a.index(common)] + path_b[: path_b.index(common)]


def round_load(pairs: Iterable[tuple[str, str]], uplinks: Uplinks) -> dict[tuple[str, str], int]:
    """Per pair of one round (pairs that run at the same time): the most pairs of that round that
    go through one uplink on its path, the "flows per uplink in their round" the pair model compares
    pairs under (``reports.pairmodel``). 0 within a leaf and for a host the topology does not place.
    Many rounds of one fabric: ``RoundLoad(uplinks)`` once, then call it per round."""
    return RoundLoad(uplinks)(pairs)


class RoundLoad:
    """``round_load`` for many rounds of one fabric: each host's leaf and the uplinks between two
    leaves are worked out once (a 4,096-node plan has 8M pairs), and a round is counted per pair of
    leaves (hosts of one leaf share every path), with numpy (``indexed``: a round as host positions,
    ``collectives.pairs.IndexedRound``)."""

    def __init__(self, uplinks: Uplinks) -> None:
        self.uplinks = uplinks
        self._leaf_id: dict[str | None, int] = {}
        self._switch_id: dict[str, int] = {}
        self._row: dict[int, int] = {}  # leaf pair key -> its row of _matrix
        # per leaf pair: the ids of the switches whose uplinks it crosses, -1 past the row's end
        self._matrix = np.zeros((0, 0), dtype=np.int64)

    def leaves(self, hosts: Sequence[str]) -> np.ndarray:
        """Each host's leaf as an id for ``indexed`` (one id for every host the topology does not place)."""
        ids = self._leaf_id
        return np.array([ids.setdefault(leaf_of(h, self.uplinks), len(ids)) for h in hosts], dtype=np.int64)

    def indexed(self, leaves: np.ndarray, index: np.ndarray, rounds: np.ndarray | None = None) -> np.ndarray:
        """``round_load`` of one round: ``index[i]`` the positions of pair i's hosts in the list
        ``leaves`` was made from. One load per pair. ``rounds``: each pair's round, to count many
        rounds at once (each its own round_load; a pair listed twice in a round counts twice)."""
        if len(index) == 0:
            return np.zeros(0, dtype=np.int64)
        key = leaves[index[:, 0]] * _LEAF_KEY + leaves[index[:, 1]]
        keys, pair_leaves = np.unique(key, return_inverse=True)
        up = self._crossed(keys.tolist())  # (leaf pairs, switches) ids, -1 past a row's end
        if up.shape[1] == 0:
            return np.zeros(len(index), dtype=np.int64)
        n_rounds, round_of = 1, np.zeros(len(index), dtype=np.int64)
        if rounds is not None:
            values, round_of = np.unique(rounds, return_inverse=True)
            n_rounds, round_of = len(values), round_of.ravel()
        # a cell: one leaf pair in one round; its pairs all cross the same uplinks
        cells, inverse, count = np.unique(round_of * len(keys) + pair_leaves.ravel(),
                                          return_inverse=True, return_counts=True)
        n_sw = len(self._switch_id)
        cell_up = up[cells % len(keys)]
        on = cell_up >= 0
        slot = np.where(on, (cells // len(keys))[:, None] * n_sw + cell_up, 0)  # (round, uplink)
        through = np.bincount(slot[on], weights=np.broadcast_to(count[:, None], cell_up.shape)[on],
                              minlength=n_rounds * n_sw)
        load = np.where(on, through[slot], 0).max(axis=1)
        return load.astype(np.int64)[inverse.ravel()]

    def tiers(self, leaves: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Each pair's hop class as its tier (``tier_name``: 1 leaf, 2 spine, 3 core, ...), -1 where
        the topology does not place both hosts: ``hop_class`` worked out once per pair of leaves
        (``indexed``'s arguments)."""
        if len(index) == 0:
            return np.zeros(0, dtype=np.int8)
        keys, inverse = np.unique(leaves[index[:, 0]] * _LEAF_KEY + leaves[index[:, 1]], return_inverse=True)
        name = {i: leaf for leaf, i in self._leaf_id.items()}
        out = []
        for k in keys.tolist():
            a, b = name[k // _LEAF_KEY], name[k % _LEAF_KEY]
            out.append(-1 if a is None or b is None else meeting_tier(self._path(a), self._path(b)))
        return np.array(out, dtype=np.int8)[inverse.ravel()]

    def _crossed(self, keys: list[int]) -> np.ndarray:
        new = [k for k in keys if k not in self._row]
        if new:
            name = {i: leaf for leaf, i in self._leaf_id.items()}
            rows = []
            for k in new:
                a, b = name[k // _LEAF_KEY], name[k % _LEAF_KEY]
                crossed = [] if a is None or b is None else crossed_uplinks(self._path(a), self._path(b))
                self._row[k] = len(self._row)
                rows.append([self._switch_id.setdefault(sw, len(self._switch_id)) for sw in crossed])
            width = max(self._matrix.shape[1], *map(len, rows))
            added = np.full((len(rows), width), -1, dtype=np.int64)
            for i, r in enumerate(rows):
                added[i, : len(r)] = r
            known = np.pad(self._matrix, ((0, 0), (0, width - self._matrix.shape[1])), constant_values=-1)
            self._matrix = np.concatenate([known, added])
        return self._matrix[[self._row[k] for k in keys]]

    def _path(self, leaf: str) -> list[str]:
        out: list[str] = []
        cur: str | None = leaf
        while cur is not None and cur not in out:  # as switch_path, from the leaf
            out.append(cur)
            cur = self.uplinks.get(cur)
        return out

    def __call__(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        pairs = list(pairs)
        hosts = list({h: None for p in pairs for h in p})
        pos = {h: i for i, h in enumerate(hosts)}
        index = np.array([(pos[a], pos[b]) for a, b in pairs], dtype=np.int64).reshape(-1, 2)
        load = self.indexed(self.leaves(hosts), index)
        return {p: int(n) for p, n in zip(pairs, load.tolist(), strict=True)}


_LEAF_KEY = 1 << 32  # a pair of leaf ids as one integer: first * _LEAF_KEY + second


def hop_class(a: str, b: str, uplinks: Uplinks) -> str:
    """``intra`` | ``leaf`` | ``spine`` | ``core`` | ``tier-N`` | ``unknown`` (module docstring)."""
    if a == b:
        return INTRA
    pa, pb = switch_path(a, uplinks), switch_path(b, uplinks)
    if not pa or not pb:
        return UNKNOWN
    return tier_name(meeting_tier(pa, pb))


def ring_crossings(hosts: list[str], switches: Uplinks) -> tuple[int, int]:
    """(leaf changes walking the ring in this order, the fewest any order could have).

    A ring through L leaves must change leaf at least L times (0 when L == 1); an interleaved
    order changes far more often, and every change is traffic through the spine.
    """
    if len(hosts) < 2:
        return 0, 0
    sw = [switches.get(h, "?") for h in hosts]
    crossings = sum(1 for i in range(len(sw)) if sw[i] != sw[(i + 1) % len(sw)])
    leaves = len(set(sw))
    return crossings, (0 if leaves == 1 else leaves)


def grouped_order(hosts: list[str], switches: Uplinks) -> list[str]:
    """The same hosts ordered leaf by leaf (stable within a leaf): the order that crosses least."""
    first_seen: dict[str, int] = {}
    for h in hosts:
        first_seen.setdefault(switches.get(h, "?"), len(first_seen))
    return sorted(hosts, key=lambda h: first_seen[switches.get(h, "?")])


def switch_from_inventory(node: Mapping[str, Any]) -> str | None:
    """A node's leaf from its ``switch=`` label or discovered neighbours (an inventory.jsonl record).

    InfiniBand discovery wins over LLDP, since LLDP often only sees the management network.
    Rail-optimised nodes connect each HCA to a different leaf; such a node's "leaf" is the set of
    its leaves (``leafA+leafB``), so nodes of one scalable unit still compare as same-leaf.
    """
    labels = node.get("labels") or {}
    if labels.get("switch"):
        return str(labels["switch"])
    neigh = [n for n in node.get("neighbors") or [] if n.get("switch")]
    ib = [n for n in neigh if (n.get("source") or "").startswith("ib")]
    use = ib or neigh
    if not use:
        return None
    return "+".join(sorted({str(n["switch"]) for n in use}))


def build_switch_map(
    inventory: Iterable[Mapping[str, Any]], topology: Uplinks | None = None, hosts: Iterable[str] = ()
) -> dict[str, str]:
    """Uplinks for every host we can place. Strongest source last: discovered neighbours and
    ``switch=`` labels of the inventory, then a topology (file or run.json), which also brings the
    switches' parents. ``hosts`` (names as the run spells them) are looked up by short name too."""
    out: dict[str, str] = {}
    for node in inventory:
        sw = switch_from_inventory(node)
        if sw and node.get("host"):
            out[node["host"]] = sw
    if topology:
        out.update(topology)
        for h in hosts:
            leaf = leaf_of(h, topology)
            if leaf is not None:
                out[h] = leaf
    return out
