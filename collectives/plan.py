"""What the ranks are asked to do: a plan of phases, each a set of groups that run at once.

The coordinator builds a ``WorkerPlan`` and hands it to every rank through the rendezvous store;
ranks only execute it. A phase is a world sweep, one round of pairwise tests, or the intra-node
groups; its groups run concurrently and the coordinator releases the next phase only when the
current one has finished (or timed out), so "the pairs of a round run at the same time" holds.

A pairwise round's groups are ``PairGroups``: positions of the two hosts in a host table every round
shares, read as ``GroupSpec``s one at a time; a 4,096-host plan has 8M pair groups, which as
objects would cost gigabytes. ``WorkerPlan.json_chunks`` writes a plan in pieces (a group a line),
never as one string.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, overload

import numpy as np
from netbench.collectives.dtypes import GLOO_UNSUPPORTED, get_dtype, get_op
from netbench.collectives.ops import get_collective

from netbench.common.jsontext import join, number_texts, strings, text_of

if TYPE_CHECKING:
    import pyarrow as pa

# how the timed operations are issued: decided once for the run by netbench.planner.choose_engine
# (--engine auto never reaches a plan), done by every rank as written (collectives.native.engines_of)
ENGINES = ("nccl", "torch", "both")


@dataclass
class SweepSpec:
    """The sweep every group of a phase runs (nccl-tests' -b/-e/-f/-n/-w/-d/-o/-c/-G)."""

    collectives: list[str]
    sizes: list[int]
    iters: int = 20
    warmup: int = 5
    dtype: str = "float"
    op: str = "sum"
    check: bool = True
    in_place: list[bool] = field(default_factory=lambda: [False, True])
    root: int = 0
    cuda_graph: bool = False
    engine: str = "torch"  # nccl | torch | both: the run's (netbench.planner.choose_engine)

    def __post_init__(self) -> None:
        self.collectives = [get_collective(c).name for c in self.collectives]
        self.dtype = get_dtype(self.dtype).name
        self.op = get_op(self.op)
        if not self.collectives:
            raise ValueError("no collective selected")
        if not self.sizes:
            raise ValueError("no message size selected")
        if self.iters < 1:
            raise ValueError(f"iters must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; choose from {', '.join(ENGINES)}")

    def validate_for(self, backend: str) -> None:
        if backend == "gloo" and self.dtype in GLOO_UNSUPPORTED:
            raise ValueError(f"dtype {self.dtype} is not supported by gloo")
        if backend == "gloo" and self.cuda_graph:
            raise ValueError("--cuda-graph needs GPUs (NCCL)")
        if backend == "gloo" and self.engine in ("nccl", "both"):
            raise ValueError(f"--engine {self.engine} needs GPUs (NCCL); gloo runs through torch")


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

    def __len__(self) -> int:
        return len(self.index)

    @overload
    def __getitem__(self, i: int) -> GroupSpec: ...

    @overload
    def __getitem__(self, i: slice | np.ndarray) -> PairGroups: ...

    def __getitem__(self, i: int | slice | np.ndarray) -> GroupSpec | PairGroups:
        if isinstance(i, slice | np.ndarray):  # a slice, or a mask or positions of the groups to keep
            load = self.load[i] if self.load is not None else None
            return PairGroups(self.round, self.table, self.index[i], load)
        a, b = self.index[i].tolist()
        load = int(self.load[i]) if self.load is not None and self.load[i] >= 0 else None
        return self._group(a, b, load)

    def __iter__(self) -> Iterator[GroupSpec]:
        loads = self.load.tolist() if self.load is not None else [-1] * len(self.index)
        for (a, b), load in zip(self.index.tolist(), loads, strict=True):
            yield self._group(a, b, load if load >= 0 else None)

    def _group(self, a: int, b: int, load: int | None) -> GroupSpec:
        t = self.table
        return GroupSpec(
            id=pair_group_id(t.hosts[a], t.hosts[b]),
            pattern="pair",
            ranks=t.ranks[a] + t.ranks[b],
            hosts=[t.hosts[a], t.hosts[b]],
            round=self.round,
            load=load,
        )

    def json_hosts_and_ids(self) -> tuple[list[str | pa.Array], list[str | pa.Array]]:
        """Each group's ``hosts`` and ``id`` as JSON text, in pieces for ``common.jsontext.join``."""
        quoted, inner, _ = self.table.texts
        a, b = self.index[:, 0], self.index[:, 1]
        first = self.table.order[a] < self.table.order[b]  # the id's sorted names
        lo, hi = np.where(first, a, b), np.where(first, b, a)
        hosts = ["[", quoted.take(a), ", ", quoted.take(b), "]"]
        return hosts, ['"pair:', inner.take(lo), "|", inner.take(hi), '"']

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
        load: str | pa.Array = "null"
        if self.load is not None:
            load = number_texts(self.load)
            if (self.load < 0).any():
                load = _none_where(load, self.load < 0)
        lines = join(
            ['{"id": ', *ids, ', "pattern": "pair", "ranks": [', ranks.take(a), between, ranks.take(b),
             '], "hosts": ', *hosts, f', "round": {json.dumps(self.round)}, "rail": null, "load": ', load,
             "},\n"],
            len(self),
        )
        return text_of(lines)[:-2].decode()


def _none_where(texts: pa.Array, none: np.ndarray) -> pa.Array:
    """``texts`` with "null" where ``none``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pa.array(none), "null", texts)


@dataclass
class Phase:
    index: int
    name: str  # "ring", "pairwise round 3", ...
    groups: Sequence[GroupSpec]
    """A list, or ``PairGroups`` for a pairwise round."""
    spec: SweepSpec

    def json_chunks(self) -> Iterator[str]:
        """``json.dumps(dataclasses.asdict(phase))`` in pieces: the groups a line each."""
        yield f'{{"index": {json.dumps(self.index)}, "name": {json.dumps(self.name)}, "groups": [\n'
        if isinstance(self.groups, PairGroups):
            yield self.groups.json_text()
        else:
            yield ",\n".join(json.dumps(dataclasses.asdict(g)) for g in self.groups)
        yield f'], "spec": {json.dumps(dataclasses.asdict(self.spec))}}}'


@dataclass
class WorkerPlan:
    run_id: str
    backend: str  # gloo | nccl
    device: str  # cpu | cuda
    world_size: int
    phases: list[Phase]
    op_timeout_s: float = 60.0  # a single collective (or group set-up) taking longer has failed
    rank_hosts: list[str] = field(default_factory=list)  # host of each global rank
    rail_ifaces: list[str | None] = field(default_factory=list)
    """Per global rank: the interface its gloo rail groups bind (its rail's NIC), None or absent:
    the address that routes to the store, as every other group."""

    def json_chunks(self) -> Iterator[str]:
        """The plan as JSON in pieces (a phase's groups a line each), so that a plan of 8M pair
        groups is never one string; the content of ``json.dumps(dataclasses.asdict(plan))``."""
        for k, f in enumerate(dataclasses.fields(self)):
            yield ("{" if k == 0 else ", ") + json.dumps(f.name) + ": "
            if f.name == "phases":
                yield "["
                for i, phase in enumerate(self.phases):
                    yield ",\n" if i else "\n"
                    yield from phase.json_chunks()
                yield "]"
            else:
                yield json.dumps(getattr(self, f.name))
        yield "}"

    def to_json(self) -> str:
        return "".join(self.json_chunks())

    @classmethod
    def from_json(cls, text: str) -> WorkerPlan:
        d: dict[str, Any] = json.loads(text)
        phases = []
        for p in d.pop("phases"):
            spec = SweepSpec(**p.pop("spec"))
            groups = [GroupSpec(**g) for g in p.pop("groups")]
            phases.append(Phase(groups=groups, spec=spec, **p))
        return cls(phases=phases, **d)
