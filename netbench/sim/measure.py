"""Measuring a phase on the simulated fabric, at once with numpy: the fast path of ``netbench
simulate`` (``sim.run``) and the measurement of ``sim.launcher``'s simulated ranks.

Each phase's groups run at once on the fabric (``fabric.Fabric.flow_rates``, a rail group on its GPU's
rail), and every point becomes a ``ResultRow`` as a rank would report it: time = latency + bytes x
busbw factor / rate, times multiplicative noise, per-rank times around it. A phase lasts as long as
its slowest group (warm-up, timed iterations and the check pass of every point, the group's set-up
first: ``sim.setup``).

At scale (4,096 nodes: 4,095 rounds of 2,048 pairs, 8.4M rows) the flows are position arrays
(``Flows``), a phase's measurements columns (``Measured``), and its rows are written as Arrow
columns (``Measured.table``, for results.parquet): the values of each ``ResultRow``. ``sim.launcher``
sends the same rows as ``ResultRow``s (``Measured.rows_of``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from netbench.collectives.ahead import FILLS
from netbench.collectives.dtypes import get_dtype
from netbench.collectives.ops import Collective, Layout, get_collective
from netbench.collectives.plan import GroupSpec, PairGroups, Phase, SweepSpec, WorkerPlan
from netbench.common.rows import ResultRow
from netbench.defaults import SIM_NOISE_SHAPES
from netbench.sim.fabric import Fabric
from netbench.sim.rails import RailFabric
from netbench.sim.setup import GroupSetup, Lanes

if TYPE_CHECKING:
    import pyarrow as pa

    from netbench.sim.options import SimOptions

RANK_JITTER = 0.002  # ranks of one group finish within ~0.2% of each other: no straggler by design


NOISE_SHAPES = SIM_NOISE_SHAPES
"""What multiplies each measured time, all with the CV ``noise``: normal 1 + cv z (bandwidth skewed a
little toward slow), lognormal exp(cv z) (symmetric in log bandwidth), skewed a skew-normal of
shape 5 with its long side slow (delays add, they never subtract), t3/t4/t5 a Student-t of 3-5
degrees of freedom scaled to the CV (rare large excursions both ways), congestion the normal plus,
in CONGESTED_SHARE of the measurements, a slowdown drawn from CONGESTED_SLOWDOWN (a burst of
congestion beside the pair)."""
CONGESTED_SHARE = 0.01
CONGESTED_SLOWDOWN = (1.1, 1.5)
SKEW = 5.0


def noise_factor(shape: str, cv: float, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The factor each time is multiplied by, from standard normal draws ``z`` (the normal shape
    draws nothing more, so its runs keep their seeds' numbers)."""
    if shape == "lognormal":
        return np.exp(cv * z)
    if shape == "skewed":
        d = SKEW / np.sqrt(1 + SKEW**2)
        x = d * np.abs(rng.standard_normal(z.shape)) + np.sqrt(1 - d**2) * z
        mean, sd = d * np.sqrt(2 / np.pi), np.sqrt(1 - 2 * d**2 / np.pi)
        return np.maximum(0.05, 1 + cv * (x - mean) / sd)
    if shape in ("t3", "t4", "t5"):
        nu = int(shape[1])
        t = z / np.sqrt(rng.chisquare(nu, z.shape) / nu)
        return np.maximum(0.05, 1 + cv * t * np.sqrt((nu - 2) / nu))
    out = np.maximum(0.05, 1 + cv * z)
    if shape == "congestion":
        hit = rng.random(z.shape) < CONGESTED_SHARE
        out[hit] *= rng.uniform(*CONGESTED_SLOWDOWN, size=int(hit.sum()))
    return out



@dataclass(frozen=True)
class Flows:
    """The host-to-host flows of a phase's groups (host positions on the fabric): one per pair,
    one per hop of a ring; ``owner``: each flow's group; ``rail``: the rail a flow runs on (1..R),
    0 for every rail at once (a pair of NCCL ranks uses every NIC of its hosts)."""

    a: np.ndarray
    b: np.ndarray
    owner: np.ndarray
    rail: np.ndarray

    def group_rates(self, rate: np.ndarray, groups: int) -> np.ndarray:
        """A group moves at its slowest flow (a ring at its slowest hop)."""
        if len(self.owner) == groups and (self.owner == np.arange(groups)).all():
            return rate
        out = np.full(groups, np.inf)
        np.minimum.at(out, self.owner, rate)
        return out

    def subset(self, keep: np.ndarray) -> Flows:
        return Flows(self.a[keep], self.b[keep], self.owner[keep], self.rail[keep])


def _flows(groups: Sequence[GroupSpec], fab: Fabric | RailFabric, gpus: int) -> Flows:
    """The flows of ``groups``. A rail group (rank k of both hosts) runs on the rail of GPU k's NIC."""
    if isinstance(groups, PairGroups) and list(groups.table.hosts) == fab.hosts:  # positions as they are
        n = len(groups)
        return Flows(groups.index[:, 0], groups.index[:, 1], np.arange(n), np.zeros(n, dtype=np.int64))
    a, b, owner, rail = [], [], [], []
    for gi, grp in enumerate(groups):
        hs = grp.hosts
        hops = [(hs[0], hs[1])] if len(hs) == 2 else [(hs[k], hs[(k + 1) % len(hs)]) for k in range(len(hs))]
        a += [fab.pos[x] for x, _ in hops]
        b += [fab.pos[y] for _, y in hops]
        owner += [gi] * len(hops)
        rail += [0 if grp.rail is None else fab.rail_of(grp.rail, gpus)] * len(hops)
    return Flows(*(np.array(x, dtype=np.int64) for x in (a, b, owner, rail)))


def _rates(
    fab: Fabric | RailFabric, flows: Flows, slow_now: frozenset[str], faults: bool = True
) -> np.ndarray:
    """Each flow's rate when all of them run at once, each on its rail (``Flows.rail``)."""
    rails = np.unique(flows.rail)
    if len(rails) <= 1:
        rail = int(rails[0]) if len(rails) else 0
        return fab.flow_rates(flows.a, flows.b, slow_now, faults, rail=rail or None)
    out = np.empty(len(flows.a))
    for r in rails.tolist():
        on = flows.rail == r
        out[on] = fab.flow_rates(flows.a[on], flows.b[on], slow_now, faults, rail=r or None)
    return out


@dataclass(frozen=True)
class _Point:
    collective: Collective
    layout: Layout
    bus: float
    in_place: bool


@dataclass
class Measured:
    """A phase's groups measured on the fabric, as columns: ``time_us[g, p]`` of group g at point p
    (a collective, size and mode), ``rank_us[g, p, r]`` per rank. ``rows_of`` gives them as the
    ``ResultRow``s each group's rank 0 reports; ``table`` as the same rows' columns."""

    plan: WorkerPlan
    phase: Phase
    groups: Sequence[GroupSpec]
    points: list[_Point]
    rank_us: np.ndarray
    seconds: np.ndarray
    """Each group's time on the fabric: its set-up, then warm-up, timed iterations and check of
    every point."""
    ts: float
    made: str = "fresh"
    setup_s: float = 0.0
    """What making each group cost (``sim.setup``): the same for every group of a phase."""
    wait_s: float = 0.0
    """What of it the phase waited for (all of it, unless its groups were made ahead)."""

    @property
    def rows(self) -> int:
        return len(self.groups) * len(self.points)

    @property
    def time_us(self) -> np.ndarray:
        return self.rank_us.mean(axis=-1)

    def _columns(self) -> dict[str, np.ndarray]:
        avg = self.time_us
        algbw = np.array([p.layout.nbytes for p in self.points]) / 1e3 / avg
        return {
            "time_us": avg,
            "time_us_min": self.rank_us.min(axis=-1),
            "time_us_max": self.rank_us.max(axis=-1),
            "rank_time_us": np.round(self.rank_us, 3),
            "algbw_GBps": algbw,
            "busbw_GBps": algbw * np.array([p.bus for p in self.points]),
        }

    def _point_fields(self, p: _Point) -> dict[str, Any]:
        spec = self.phase.spec
        return {
            "run_id": self.plan.run_id,
            "collective": p.collective.name,
            "backend": self.plan.backend,
            "bytes": p.layout.nbytes,
            "count": p.layout.count,
            "dtype": spec.dtype,
            "op": spec.op if p.collective.reduces else None,
            "in_place": p.in_place,
            "iters": spec.iters,
            "warmup": spec.warmup,
            "wrong": 0 if spec.check else None,
            "device": self.plan.device,
            "ts": self.ts,
            "group_made": self.made,
            "setup_s": self.setup_s,
            "setup_wait_s": self.wait_s,
        }

    def rows_of(self) -> list[list[ResultRow]]:
        """Each group's rows, in point order."""
        if not self.rows:
            return [[] for _ in self.groups]
        cols = {k: v.tolist() for k, v in self._columns().items()}
        points = [self._point_fields(p) for p in self.points]
        n = self.rank_us.shape[-1]
        return [
            [
                ResultRow(
                    **points[q], pattern=grp.pattern, hosts=list(grp.hosts), ranks=n, round=grp.round,
                    group=grp.id, rail=grp.rail, load=grp.load, hop_class=grp.hop_class,
                    **{k: v[gi][q] for k, v in cols.items()},
                )
                for q in range(len(self.points))
            ]
            for gi, grp in enumerate(self.groups)
        ]

    def table(self) -> pa.Table:
        """The rows as columns of results.parquet (``reports.rowstore.row_schema``), group after
        group (``rows_of``'s order), each the same values as its ``ResultRow``; a pair row's
        ``rank_time_us`` is left null: its ranks' times are the simulator's jitter around
        ``time_us`` (min, mean and max are kept), and at 4,096 nodes they were 100 B of a row's
        140 in results.parquet (issue 48's 1 GB)."""
        import pyarrow as pa

        from netbench.reports.rowstore import row_schema

        schema = row_schema()
        if not self.rows:
            return schema.empty_table()
        if not isinstance(self.groups, PairGroups):
            return pa.Table.from_pylist([r.to_dict() | {"extra": "{}"} for g in self.rows_of() for r in g],
                                        schema=schema)
        g, q = len(self.groups), len(self.points)
        cols: dict[str, Any] = {k: v.reshape(g * q) for k, v in self._columns().items()
                                if k != "rank_time_us"}
        points = [self._point_fields(p) for p in self.points]
        for name in points[0]:
            cols[name] = pa.array([pf[name] for pf in points] * g, type=schema.field(name).type)
        each = np.repeat(np.arange(g), q)
        for name, arr in _pair_columns(self.groups).items():
            cols[name] = arr.take(each) if q > 1 else arr
        n = g * q
        columns = []
        for f in schema:
            if f.name in cols:
                columns.append(pa.array(cols[f.name], type=f.type))
            elif f.name == "ranks":
                columns.append(pa.array(np.full(n, self.rank_us.shape[-1]), type=f.type))
            else:
                columns.append(_constant(f, n))
        return pa.Table.from_arrays(columns, schema=schema)


def _constant(f: Any, n: int) -> pa.Array:
    """A field the sim leaves at ``ResultRow``'s default (null where it has none), in every row."""
    import pyarrow as pa

    default = {fl.name: fl.default for fl in dataclasses.fields(ResultRow)}.get(f.name)
    value = None if default is dataclasses.MISSING else default
    value = "{}" if f.name == "extra" else value
    if value is None:
        return pa.nulls(n, f.type)
    return pa.array([value], type=f.type).take(np.zeros(n, dtype=int))


def _pair_columns(groups: PairGroups) -> dict[str, pa.Array]:
    """A pairwise round's group fields, one value a group: the hosts (strings of the plan's host
    table, taken), the group id (``pair:`` and the two names sorted), the round, the plan's load and
    hop class."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from netbench.inventory.topology import tier_name

    names = pa.array(list(groups.table.hosts), type=pa.string())
    a, b = groups.index[:, 0], groups.index[:, 1]
    g = len(a)
    hosts = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * g + 1, 2), type=pa.int32()),
                                     names.take(pa.array(groups.index.reshape(-1))))
    first = groups.table.order[a] < groups.table.order[b]
    lo, hi = names.take(pa.array(np.where(first, a, b))), names.take(pa.array(np.where(first, b, a)))
    ids = pc.binary_join_element_wise("pair:", pc.binary_join_element_wise(lo, hi, "|"), "")
    load = pa.nulls(g, pa.int64()) if groups.load is None else pa.array(groups.load, mask=groups.load < 0)
    hop = pa.nulls(g, pa.string())
    if groups.tier is not None and g:
        top = int(groups.tier.max())
        named = (tier_name(t) if t >= 1 else None for t in range(top + 1))
        tiers = pa.array([None, *named], type=pa.string())
        hop = tiers.take(pa.array(np.maximum(groups.tier.astype(np.int64) + 1, 0)))
    return {"pattern": pa.array(["pair"]).take(np.zeros(g, dtype=int)), "hosts": hosts,
            "round": pa.array(np.full(g, groups.round)), "group": ids, "load": load, "hop_class": hop}


def _points(spec: SweepSpec, ranks: int) -> list[_Point]:
    """What a group of ``ranks`` measures: each collective at each size (once per distinct byte
    count it rounds to, none of 0 bytes), in each mode."""
    dt = get_dtype(spec.dtype)
    out = []
    for cname in spec.collectives:
        coll = get_collective(cname)
        seen: set[int] = set()
        for size in spec.sizes:
            lay = coll.layout(size, dt.size, ranks)
            if lay.nbytes == 0 or lay.nbytes in seen:
                continue
            seen.add(lay.nbytes)
            out += [_Point(coll, lay, coll.bus_factor(ranks), in_place) for in_place in spec.in_place]
    return out


CONTENDED_SLOWDOWN = (1.7, 3.5)
"""How much longer a contended group takes (``SimOptions.contention``): this 2-core test machine's
concurrent gloo pairs ran from 0.3x to 0.6x of their usual busbw beside each other."""


def _measure(
    plan: WorkerPlan,
    phase: Phase,
    groups: Sequence[GroupSpec],
    rate_GBps: np.ndarray,
    opts: SimOptions,
    rng: np.random.Generator,
    lanes: Lanes | None = None,
    now: float = 0.0,
) -> Measured:
    """What every group of the phase measures at its rate (``rate_GBps[g]``): at each point, time =
    latency + bytes x busbw factor / rate, times multiplicative noise, each rank around it. The
    random draws are a group's points in order, each the noise then the ranks' jitter. ``lanes``:
    the groups made ahead so far (the phase starts at ``now``), which decide what of the groups'
    set-up the phase waits for; None: all of it."""
    sizes = _group_sizes(groups)
    if len(sizes) > 1:
        raise ValueError(f"{phase.name}: groups of different sizes ({sorted(sizes)}) in one phase")
    if not sizes:  # every group of the phase failed (a lost GPU): nothing measured
        return Measured(plan, phase, groups, [], np.zeros((0, 0, 0)), np.zeros(0), time.time())
    n = sizes.pop()
    points = _points(phase.spec, n)
    nbytes = np.array([p.layout.nbytes for p in points], dtype=np.int64)
    bus = np.array([p.bus for p in points])
    t = opts.latency_us + (nbytes * bus) / (rate_GBps[:, None] * 1e3)
    z = rng.standard_normal((len(groups), len(points), 1 + n))
    t = t * noise_factor(opts.noise_shape, opts.noise, z[..., 0], rng)
    if opts.contention and rng.random() < opts.contention:  # drawn only when asked: seeds keep their draws
        hit = rng.random(len(groups)) < 0.5
        t[hit] *= rng.uniform(*CONTENDED_SLOWDOWN, size=(int(hit.sum()), 1))
    rank_us = t[..., None] * (1 + RANK_JITTER * z[..., 1:])
    spec = phase.spec
    per_point = spec.warmup + spec.iters + (1 if spec.check else 0)
    avg = rank_us.mean(axis=-1)
    setup_s = GroupSetup(opts.group_made).seconds(plan.backend, n, _group_nodes(groups))
    fills = bool(len(groups)) and groups[0].pattern in FILLS
    wait_s = lanes.wait(now, setup_s, fills) if lanes is not None else setup_s
    made = "ahead" if lanes is not None and lanes.ahead else opts.group_made
    seconds = np.full(len(groups), wait_s)  # a group measures once its communicator is made
    for q in range(len(points)):
        seconds += per_point * avg[:, q] / 1e6
    return Measured(plan, phase, groups, points, rank_us, seconds, time.time(), made, setup_s, wait_s)


def _group_nodes(groups: Sequence[GroupSpec]) -> int:
    """The hosts of a phase's groups (the most of any group): 2 for pairs, every host for a ring."""
    if isinstance(groups, PairGroups):
        return 2
    return max(len(set(grp.hosts)) for grp in groups)


def _group_sizes(groups: Sequence[GroupSpec]) -> set[int]:
    """The sizes (ranks) of a phase's groups."""
    if isinstance(groups, PairGroups):
        return set(np.unique(groups.table.sizes[groups.index].sum(axis=1)).tolist())
    return {len(grp.ranks) for grp in groups}


def _note_effects(
    fab: Fabric | RailFabric,
    flows: Flows,
    ratio: np.ndarray,
    slow_now: frozenset[str],
    worst: dict[int, float],
) -> None:
    """Record, per fault, the lowest faulty/healthy rate of a flow it touches: a fault that never
    slows any measurement is invisible, and truth.json says so rather than count it as missed."""
    a, b = flows.a, flows.b
    for k, f in enumerate(fab.faults):
        if f.kind == "node" or (f.kind == "intermittent" and f.subject in slow_now):
            hit = (a == fab.pos[f.subject]) | (b == fab.pos[f.subject])
        elif f.kind == "link":
            x, y = (fab.pos[h] for h in f.subject.split("|"))
            hit = ((a == x) & (b == y)) | ((a == y) & (b == x))
        elif f.kind == "uplink":
            hit = fab.crosses(a, b, f.subject) & np.isin(flows.rail, (0, fab.switch_rail(f.subject)))
        elif f.kind == "nic":  # one NIC of a rail-optimised node: the node's flows on that rail
            host, _, rail = f.subject.partition("/")
            hit = ((a == fab.pos[host]) | (b == fab.pos[host])) & np.isin(flows.rail, (0, int(rail)))
        else:
            continue
        if hit.any():
            worst[k] = min(worst.get(k, 1.0), float(ratio[hit].min()))


