"""The groups of a plan: ``GroupSpec``, a set of global ranks that measure together, and
``PairGroups``, a pairwise round's groups as positions of the two hosts in a host table
(``PairHosts``) every round shares, read as ``GroupSpec``s one at a time: a 4,096-host plan has 8M
pair groups, which as objects would cost gigabytes. ``PairGroups.json_text`` writes a round's groups
as ``json.dumps(dataclasses.asdict(group))`` would, without making them (``collectives.plan`` writes
the plan around them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, overload

import numpy as np
from netbench.inventory.topology import tier_name

from netbench.common.jsontext import join, number_texts, strings, text_of

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class GroupSpec:
    """A set of global ranks that measure together. ``id`` is unique within the plan."""

    id: str
    pattern: str  # world | ring | pair | rail | intra
    ranks: list[int]
    hosts: list[str]
    round: int | None = None
    rail: int | None = None  # pattern rail: the local rank of both members (GPU k, NIC k)
    load: int | None = None
    """A pair's load: the most pairs of its round through one uplink on its path (0 within a leaf;
    ``common.topology.round_load``, the count the pair model compares pairs under). None: the
    topology does not place both hosts, or not a pair."""
    hop_class: str | None = None
    """A pair's hop class (``common.topology.hop_class``: leaf, spine, core, tier-N), worked out by
    the planner from the switches it scheduled and counted ``load`` with. None where ``load`` is."""


def pair_group_id(a: str, b: str) -> str:
    return "pair:" + "|".join(sorted((a, b)))


@dataclass(eq=False)
class PairHosts:
    """The hosts pair groups are made of, with their ranks: one table for every round of a plan."""

    hosts: Sequence[str]
    ranks: Sequence[list[int]]
    """ranks[i]: the global ranks of hosts[i]."""

    @cached_property
    def sizes(self) -> np.ndarray:
        """Each host's number of ranks."""
        return np.array([len(r) for r in self.ranks], dtype=np.int64)

    @cached_property
    def order(self) -> np.ndarray:
        """Each host's place in name order (a pair's id names its hosts sorted)."""
        order = np.empty(len(self.hosts), dtype=np.int64)
        order[sorted(range(len(self.hosts)), key=self.hosts.__getitem__)] = np.arange(len(self.hosts))
        return order

    @cached_property
    def texts(self) -> tuple[pa.Array, pa.Array, pa.Array]:
        """Per host: its name as JSON, its name inside a JSON string, its ranks as JSON list items."""
        quoted = [json.dumps(h) for h in self.hosts]
        ranks = [", ".join(map(str, r)) for r in self.ranks]
        return strings(quoted), strings([q[1:-1] for q in quoted]), strings(ranks)


@dataclass(frozen=True, eq=False)
class PairGroups(Sequence[GroupSpec]):
    """One pairwise round's groups: a pair's group is every rank of both hosts (``GroupSpec``
    made on demand from positions in a ``PairHosts``)."""

    round: int
    table: PairHosts
    index: np.ndarray
    """(pairs, 2): the positions of each pair's hosts in ``table``."""
    load: np.ndarray | None = None
    """Per pair: its load (``GroupSpec.load``), -1 where it is None; None: None for every pair."""
    tier: np.ndarray | None = None
    """Per pair: its hop class as a tier (``GroupSpec.hop_class``; ``common.topology.tier_name``: 1
    leaf, 2 spine, ...), -1 where it is None; None: None for every pair. A number, not a name: 8M
    pairs at 4,096 nodes."""

    def __len__(self) -> int:
        return len(self.index)

    @overload
    def __getitem__(self, i: int) -> GroupSpec: ...

    @overload
    def __getitem__(self, i: slice | np.ndarray) -> PairGroups: ...

    def __getitem__(self, i: int | slice | np.ndarray) -> GroupSpec | PairGroups:
        if isinstance(i, slice | np.ndarray):  # a slice, or a mask or positions of the groups to keep
            load = self.load[i] if self.load is not None else None
            tier = self.tier[i] if self.tier is not None else None
            return PairGroups(self.round, self.table, self.index[i], load, tier)
        a, b = self.index[i].tolist()
        load = int(self.load[i]) if self.load is not None and self.load[i] >= 0 else None
        tier = int(self.tier[i]) if self.tier is not None else -1
        return self._group(a, b, load, tier_name(tier) if tier >= 1 else None)

    def __iter__(self) -> Iterator[GroupSpec]:
        none = [-1] * len(self.index)
        loads = self.load.tolist() if self.load is not None else none
        tiers = self.tier.tolist() if self.tier is not None else none
        for (a, b), load, tier in zip(self.index.tolist(), loads, tiers, strict=True):
            yield self._group(a, b, load if load >= 0 else None, tier_name(tier) if tier >= 1 else None)

    def _group(self, a: int, b: int, load: int | None, hop_class: str | None) -> GroupSpec:
        t = self.table
        return GroupSpec(
            id=pair_group_id(t.hosts[a], t.hosts[b]),
            pattern="pair",
            ranks=t.ranks[a] + t.ranks[b],
            hosts=[t.hosts[a], t.hosts[b]],
            round=self.round,
            load=load,
            hop_class=hop_class,
        )

    def json_hosts_and_ids(self) -> tuple[list[str | pa.Array], list[str | pa.Array]]:
        """Each group's ``hosts`` and ``id`` as JSON text, in pieces for ``common.jsontext.join``."""
        quoted, inner, _ = self.table.texts
        a, b = self.index[:, 0], self.index[:, 1]
        first = self.table.order[a] < self.table.order[b]  # the id's sorted names
        lo, hi = np.where(first, a, b), np.where(first, b, a)
        hosts = ["[", quoted.take(a), ", ", quoted.take(b), "]"]
        return hosts, ['"pair:', inner.take(lo), "|", inner.take(hi), '"']

    def json_load_and_hop_class(self) -> tuple[str | pa.Array, str | pa.Array]:
        """Each group's ``load`` and ``hop_class`` as JSON text ("null" where None; one "null" for
        every group when the round has none)."""
        load: str | pa.Array = "null"
        if self.load is not None:
            load = number_texts(self.load)
            if (self.load < 0).any():
                load = _none_where(load, self.load < 0)
        hop: str | pa.Array = "null"
        if self.tier is not None and len(self):  # a tier's name by its number, "null" for -1 (and 0)
            top = int(self.tier.max())
            names = ["null", *(json.dumps(tier_name(t)) if t >= 1 else "null" for t in range(top + 1))]
            hop = strings(names).take(np.maximum(self.tier.astype(np.int64) + 1, 0))
        return load, hop

    def json_text(self) -> str:
        """The groups as ``json.dumps(dataclasses.asdict(group))`` writes each (keys, order, spacing),
        a line each, ",\n" between them."""
        if not len(self):
            return ""
        _, _, ranks = self.table.texts
        a, b = self.index[:, 0], self.index[:, 1]
        has = self.table.sizes > 0
        between: str | pa.Array = ", "  # between the two hosts' ranks, one list's items
        if not has.all():
            between = strings(["", ", "]).take((has[a] & has[b]).astype(np.int8))
        hosts, ids = self.json_hosts_and_ids()
        load, hop = self.json_load_and_hop_class()
        lines = join(
            ['{"id": ', *ids, ', "pattern": "pair", "ranks": [', ranks.take(a), between, ranks.take(b),
             '], "hosts": ', *hosts, f', "round": {json.dumps(self.round)}, "rail": null, "load": ', load,
             ', "hop_class": ', hop, "},\n"],
            len(self),
        )
        return text_of(lines)[:-2].decode()


def _none_where(texts: pa.Array, none: np.ndarray) -> pa.Array:
    """``texts`` with "null" where ``none``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pa.array(none), "null", texts)
