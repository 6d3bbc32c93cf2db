"""What the ranks are asked to do: a plan of phases, each a set of groups that run at once.

The planner builds a ``WorkerPlan``; the coordinator hands each host its part of it through the
rendezvous store (``WorkerPlan.parts``: every phase, and only the groups that hold the host's ranks);
ranks only execute it. A phase is a world sweep, one round of pairwise tests, or the intra-node
groups; its groups run concurrently and the coordinator releases the next phase only when the
current one has finished (or timed out), so "the pairs of a round run at the same time" holds.

A pairwise round's groups are ``PairGroups``: positions of the two hosts in a host table every round
shares, read as ``GroupSpec``s one at a time; a 4,096-host plan has 8M pair groups, which as
objects would cost gigabytes. Those group records live in ``collectives.plangroups`` (importable
from here too). ``WorkerPlan.json_chunks`` writes a plan in pieces (a group a line), never as one
string.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from netbench.collectives.dtypes import GLOO_UNSUPPORTED, get_dtype, get_op
from netbench.collectives.ops import get_collective
from netbench.collectives.plangroups import GroupSpec, PairGroups, PairHosts

# how the timed operations are issued: decided once for the run by netbench.run.planner.choose_engine
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
    engine: str = "torch"  # nccl | torch | both: the run's (netbench.run.planner.choose_engine)
    step_work: int = 0  # units of work each rank does before each timed operation (harness.step_work)
    per_iter: bool = False  # every rank's per-operation samples go to per_iter.jsonl.gz
    hot_buffers: bool = False  # one buffer pair per point, cache-resident (harness.Settings.hot_buffers)

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
        if backend == "gloo" and self.op == "avg" and not get_dtype(self.dtype).is_float and any(
            get_collective(name).reduces for name in self.collectives
        ):
            # torch's gloo averages by a float division it cannot write back into integer data: every
            # reducing measurement would fail at run time and read as a host fault
            raise ValueError(f"-o avg on integer data ({self.dtype}) is not supported by gloo; "
                             "use -o sum, or a floating -d (float, half, bfloat16, double)")
        if backend == "gloo" and self.cuda_graph:
            raise ValueError("--cuda-graph needs GPUs (NCCL)")
        if backend == "gloo" and self.engine in ("nccl", "both"):
            raise ValueError(f"--engine {self.engine} needs GPUs (NCCL); gloo runs through torch")


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
    ahead: int = 0
    """Groups each rank makes ahead of their turn, on lanes of their own, while it measures
    (collectives/ahead.py); 0: each group when its turn comes. ``planner.groups_ahead`` decides."""
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

    def parts(self) -> PlanParts:
        """The plan as the ranks fetch it: what every host reads, and each host's own groups."""
        return _plan_parts(self)

    @classmethod
    def from_parts(cls, common: str, parts: Iterable[str]) -> WorkerPlan:
        """The plan of the hosts whose ``parts`` are given: every phase, with only the groups that
        hold those hosts (one host's part: that host's plan; every host's: the whole plan's groups)."""
        return _plan_from_parts(common, parts)

    @classmethod
    def from_json(cls, text: str) -> WorkerPlan:
        d: dict[str, Any] = json.loads(text)
        phases = []
        for p in d.pop("phases"):
            spec = SweepSpec(**p.pop("spec"))
            groups = [GroupSpec(**g) for g in p.pop("groups")]
            phases.append(Phase(groups=groups, spec=spec, **p))
        return cls(phases=phases, **d)


# -- each host's part of the plan --------------------------------------------------------------------
# A rank needs every phase (its number, its spec: the phase gate ``go/N`` is passed by every rank, in
# a group or not) but only the groups that hold its host's ranks. The whole plan is 122 MB at 1,024
# hosts and 2 GB at 4,096, and with every rank reading it one store served ~1 TB before the first
# row. ``WorkerPlan.parts`` splits it: a ``common`` text every host reads (the plan's fields, the
# distinct specs, the phases, the host table) and per host the groups that hold it. A pairwise round
# (``PairGroups``) costs a host one number, its partner's position in the host table, so a host's
# own part of a 4,096-host sweep is ~50 KB (and 0.24 MB every host reads) where its 4,095 pair groups
# as GroupSpec JSON were ~1 MB (benchmarks/README.md, "The plan in the store").
# ``WorkerPlan.from_parts`` reads them back: one host's part gives that host's plan; every host's
# parts give the whole plan's groups (the simulator plays every rank).
PARTS_SCHEMA = 1
NO_PARTNER = -1
"""Partner code of a host without a pair in a round. A host first in its pair has its partner's
position p as code, a host second in its pair has -2 - p: the group's ranks and hosts go in that order."""
_COMPACT = (",", ":")


def _runs(values: Sequence[int]) -> list[int]:
    """``values`` as [start, count, start, count, ...], one pair per run of consecutive integers:
    the hosts of a ring of 4,096 hosts are [0, 4096]."""
    out: list[int] = []
    for v in values:
        if out and out[-2] + out[-1] == v:
            out[-1] += 1
        else:
            out += [v, 1]
    return out


def _from_runs(runs: Sequence[int]) -> list[int]:
    return [v for k in range(0, len(runs), 2) for v in range(runs[k], runs[k] + runs[k + 1])]


@dataclass(frozen=True)
class _HostTable:
    """The hosts of a plan with their global ranks; a position here names a host in every part."""

    hosts: list[str]
    ranks: list[list[int]]

    @classmethod
    def of(cls, plan: WorkerPlan) -> _HostTable:
        """The plan's hosts in rank order (``rank_hosts``), then any host a group names beyond them."""
        ranks: dict[str, list[int]] = {}
        for r, h in enumerate(plan.rank_hosts):
            ranks.setdefault(h, []).append(r)
        seen: set[int] = set()  # PairHosts tables read already: every round of a sweep shares one
        for phase in plan.phases:
            if isinstance(phase.groups, PairGroups):
                if id(phase.groups.table) in seen:
                    continue
                seen.add(id(phase.groups.table))
                tables: Iterable[Sequence[str]] = [phase.groups.table.hosts]
            else:
                tables = (g.hosts for g in phase.groups)
            for hosts in tables:
                for h in hosts:
                    ranks.setdefault(h, [])
        return cls(list(ranks), list(ranks.values()))

    def rank_runs(self) -> list[int]:
        """Host position of each global rank as runs [position, count, ...] (ranks in order)."""
        by_rank = sorted((r, p) for p, rs in enumerate(self.ranks) for r in rs)
        out: list[int] = []
        expect = 0
        for r, p in by_rank:
            if r != expect:  # a rank without a host: build_plan's ranks are 0..n-1, each on a host
                raise ValueError(f"rank {expect} has no host in the plan")
            if out and out[-2] == p:
                out[-1] += 1
            else:
                out += [p, 1]
            expect += 1
        return out


def _group_text(g: GroupSpec, pos: Mapping[str, int], table: _HostTable) -> str:
    """A group with its hosts as runs of positions; its ranks left out when they follow from the
    hosts (every rank of each host, or rank ``rail`` of each host), as for every group build_plan makes."""
    d: dict[str, Any] = {"id": g.id, "pattern": g.pattern, "hosts": _runs([pos[h] for h in g.hosts])}
    if g.ranks != _derived_ranks([pos[h] for h in g.hosts], g.rail, table.ranks):
        d["ranks"] = g.ranks
    for key in ("round", "rail", "load", "hop_class"):
        if getattr(g, key) is not None:
            d[key] = getattr(g, key)
    return json.dumps(d, separators=_COMPACT)


def _derived_ranks(hosts: Sequence[int], rail: int | None, ranks: Sequence[list[int]]) -> list[int] | None:
    if rail is None:
        return [r for p in hosts for r in ranks[p]]
    if all(rail < len(ranks[p]) for p in hosts):
        return [ranks[p][rail] for p in hosts]
    return None


@dataclass(frozen=True)
class PlanParts:
    """A plan as the store holds it: ``common`` for every host, then each host's own part."""

    common: str
    hosts: list[str]
    _own: Callable[[], Iterator[str]] = field(repr=False)
    """Each host's part in ``hosts`` order, made as read: 4,096 parts at once would be ~0.2 GB."""

    def own(self) -> Iterator[tuple[str, str]]:
        """(host, its part) for every host of the plan, made one at a time."""
        return zip(self.hosts, self._own(), strict=True)


def _plan_parts(plan: WorkerPlan) -> PlanParts:
    table = _HostTable.of(plan)
    pos = {h: i for i, h in enumerate(table.hosts)}
    host_of_rank = {r: p for p, rs in enumerate(table.ranks) for r in rs}
    specs: dict[str, int] = {}
    phase_spec: list[int] = []
    # (phase, round, index, load, tier)
    pair_phases: list[tuple[int, int, np.ndarray, np.ndarray | None, np.ndarray | None]] = []
    generic: list[list[str]] = [[] for _ in table.hosts]  # per host: its groups' texts
    mapped: dict[int, np.ndarray | None] = {}  # id(PairHosts) -> its positions here, None: ranks differ
    for k, phase in enumerate(plan.phases):
        spec = json.dumps(dataclasses.asdict(phase.spec), separators=_COMPACT)
        phase_spec.append(specs.setdefault(spec, len(specs)))
        index = _pair_index(phase.groups, pos, table, mapped)
        if index is not None:
            assert isinstance(phase.groups, PairGroups)
            pair_phases.append((k, phase.groups.round, index, phase.groups.load, phase.groups.tier))
            continue
        for g in phase.groups:
            text = f"[{k},{_group_text(g, pos, table)}]"
            members = {pos[h] for h in g.hosts} | {host_of_rank[r] for r in g.ranks if r in host_of_rank}
            for p in sorted(members):
                generic[p].append(text)
    common = json.dumps(
        {
            "schema": PARTS_SCHEMA,
            **{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)
               if f.name not in ("phases", "rank_hosts", "rail_ifaces")},
            "hosts": table.hosts,
            "rank_hosts": table.rank_runs(),
            "specs": [json.loads(s) for s in specs],
            "phases": {"index": [p.index for p in plan.phases], "name": [p.name for p in plan.phases],
                       "spec": phase_spec},
            "pair_phases": {"phase": [k for k, *_ in pair_phases], "round": [r for _, r, *_ in pair_phases]},
        },
        separators=_COMPACT,
    )
    # every host's partner (and its pair's load and hop tier) in each pairwise round: hosts x rounds,
    # a round at once
    n = len(table.hosts)
    partner = np.full((n, len(pair_phases)), NO_PARTNER, dtype=np.int32)
    load = np.full((n, len(pair_phases)), -1, dtype=np.int32)
    tier = np.full((n, len(pair_phases)), -1, dtype=np.int32)
    for j, (_, _, index, pair_load, pair_tier) in enumerate(pair_phases):
        a, b = index[:, 0], index[:, 1]
        partner[a, j], partner[b, j] = b, -2 - a
        if pair_load is not None:
            load[a, j] = load[b, j] = pair_load
        if pair_tier is not None:
            tier[a, j] = tier[b, j] = pair_tier
    any_load = any(pl is not None for *_, pl, _ in pair_phases)
    any_tier = any(pt is not None for *_, pt in pair_phases)
    rail_ifaces = plan.rail_ifaces

    def own() -> Iterator[str]:
        for p, host in enumerate(table.hosts):
            ifaces = [rail_ifaces[r] if r < len(rail_ifaces) else None for r in table.ranks[p]]
            yield (
                f'{{"schema":{PARTS_SCHEMA},"host":{json.dumps(host)},"position":{p},'
                f'"partners":[{",".join(map(str, partner[p].tolist()))}],'
                f'"loads":{"[" + ",".join(map(str, load[p].tolist())) + "]" if any_load else "null"},'
                f'"tiers":{"[" + ",".join(map(str, tier[p].tolist())) + "]" if any_tier else "null"},'
                f'"groups":[{",".join(generic[p])}],'
                f'"rail_ifaces":{json.dumps(ifaces, separators=_COMPACT) if any(ifaces) else "null"}}}'
            )

    return PlanParts(common, table.hosts, own)


def _pair_index(
    groups: Sequence[GroupSpec],
    pos: Mapping[str, int],
    table: _HostTable,
    mapped: dict[int, np.ndarray | None],
) -> np.ndarray | None:
    """A pairwise round's pairs as positions in the host table, or None when the round cannot go as
    partners: not ``PairGroups``, a pair's ranks not its hosts' ranks, or a host twice in the round."""
    if not isinstance(groups, PairGroups):
        return None
    key = id(groups.table)
    if key not in mapped:
        t = groups.table
        here = np.array([pos[h] for h in t.hosts], dtype=np.int64)
        same = all(list(t.ranks[i]) == table.ranks[p] for i, p in enumerate(here.tolist()))
        mapped[key] = here if same else None
    here = mapped[key]
    if here is None:
        return None
    index = here[groups.index].reshape(-1, 2)
    if index.size and np.bincount(index.ravel(), minlength=len(table.hosts)).max() > 1:
        return None
    return index


def _plan_from_parts(common: str, parts: Iterable[str]) -> WorkerPlan:
    c: dict[str, Any] = json.loads(common)
    _check_schema(c)
    hosts: list[str] = c["hosts"]
    runs = c["rank_hosts"]
    rank_pos = [runs[k] for k in range(0, len(runs), 2) for _ in range(runs[k + 1])]
    ranks: list[list[int]] = [[] for _ in hosts]
    for r, p in enumerate(rank_pos):
        ranks[p].append(r)
    table = PairHosts(hosts, ranks)
    specs = [SweepSpec(**s) for s in c["specs"]]
    phases_in = c["phases"]
    pair_of = {k: j for j, k in enumerate(c["pair_phases"]["phase"])}
    pair_rounds: list[int] = c["pair_phases"]["round"]
    generic: list[dict[str, GroupSpec]] = [{} for _ in phases_in["index"]]
    # (pairwise phase j, a, b, load, tier): each pair from its first host's part, or from its second host's
    # when the first one's part was not read (a rank reads its own host's part only)
    first_rows: list[np.ndarray] = []
    second_rows: list[np.ndarray] = []
    read: set[int] = set()
    rail_ifaces: list[str | None] = [None] * c["world_size"]
    for text in parts:
        part = json.loads(text)
        _check_schema(part)
        me = part["position"]
        read.add(me)
        code = np.asarray(part["partners"], dtype=np.int64).reshape(-1)
        load = np.asarray(part["loads"] if part["loads"] is not None else [-1] * len(code), dtype=np.int64)
        tiers = part.get("tiers")  # absent from a part an older netbench made
        tier = np.asarray(tiers if tiers is not None else [-1] * len(code), dtype=np.int64)
        j = np.flatnonzero(code != NO_PARTNER)
        first = code[j] >= 0
        other = np.where(first, code[j], -2 - code[j])
        a, b = np.where(first, me, other), np.where(first, other, me)
        rows = np.stack([j, a, b, load[j], tier[j]], axis=1)
        first_rows.append(rows[first])
        second_rows.append(rows[~first])
        for k, g in part["groups"]:
            if g["id"] not in generic[k]:
                generic[k][g["id"]] = _group_of(g, hosts, ranks)
        for r, iface in zip(ranks[me], part["rail_ifaces"] or [], strict=False):
            rail_ifaces[r] = iface
    none = np.zeros((0, 5), dtype=np.int64)
    seconds = np.concatenate([none, *second_rows])
    unread = ~np.isin(seconds[:, 1], np.fromiter(read, dtype=np.int64, count=len(read)))
    rows = np.concatenate([none, *first_rows, seconds[unread]])
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    bounds = np.searchsorted(rows[:, 0], np.arange(len(pair_rounds) + 1))
    phases = []
    for k, (index, name, spec) in enumerate(zip(phases_in["index"], phases_in["name"], phases_in["spec"],
                                                strict=True)):
        groups: Sequence[GroupSpec] = list(generic[k].values())
        if k in pair_of:
            j = pair_of[k]
            mine = rows[bounds[j] : bounds[j + 1]]
            loads = mine[:, 3] if (mine[:, 3] >= 0).any() else None
            tiers = mine[:, 4].astype(np.int8) if (mine[:, 4] >= 0).any() else None
            groups = PairGroups(pair_rounds[j], table, mine[:, 1:3].copy(), loads, tiers)
        phases.append(Phase(index=index, name=name, groups=groups, spec=specs[spec]))
    fields = {f.name for f in dataclasses.fields(WorkerPlan)} - {"phases", "rank_hosts", "rail_ifaces"}
    return WorkerPlan(
        phases=phases,
        rank_hosts=[hosts[p] for p in rank_pos],
        rail_ifaces=rail_ifaces if any(rail_ifaces) else [],
        **{k: c[k] for k in fields},
    )


def _check_schema(d: dict[str, Any]) -> None:
    if d.get("schema") != PARTS_SCHEMA:  # a worker of another netbench version than the coordinator's
        raise ValueError(f"plan part of schema {d.get('schema')!r}; this netbench reads {PARTS_SCHEMA}")


def _group_of(g: dict[str, Any], hosts: list[str], ranks: list[list[int]]) -> GroupSpec:
    positions = _from_runs(g["hosts"])
    return GroupSpec(
        id=g["id"],
        pattern=g["pattern"],
        ranks=g["ranks"] if "ranks" in g else _derived_ranks(positions, g.get("rail"), ranks) or [],
        hosts=[hosts[p] for p in positions],
        round=g.get("round"),
        rail=g.get("rail"),
        load=g.get("load"),
        hop_class=g.get("hop_class"),
    )
