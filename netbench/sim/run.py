"""Run the real plan on a simulated fabric into a real run directory, with the truth beside it.

The plan comes from ``netbench.planner.build_plan`` exactly as for ``sweep --hosts`` (ring, then the
circle method's pairwise rounds, or ``--pair-batch``); each phase's groups run at once on the
fabric (``fabric.Fabric.rates``), and every point becomes a ``ResultRow`` as a rank would report it:
time = latency + bytes x busbw factor / rate, times multiplicative noise, per-rank times around it.
Fabric time is the simulated duration of the phases (warm-up, timed iterations and the check pass
of every point; a phase lasts as long as its slowest group).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from netbench import __version__
from netbench.collectives.dtypes import get_dtype
from netbench.collectives.ops import get_collective
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.common.rows import ResultRow
from netbench.common.rundir import RunDir, utc_now
from netbench.coordinator import Fault as RankFault
from netbench.coordinator import Outcome
from netbench.launch import HostSlot
from netbench.options import SweepOptions
from netbench.planner import PlanRequest, build_plan
from netbench.sim.dropout import LostGpus
from netbench.sim.fabric import Fabric, FabricSpec, Fault
from netbench.sim.rails import build_fabric

TRUTH_SCHEMA = "netbench.sim-truth/1"
RANK_JITTER = 0.002  # ranks of one group finish within ~0.2% of each other: no straggler by design
#: the subject kind of the finding each fault should produce (what a score compares against)
FINDING_KIND = {
    "node": "node", "intermittent": "node", "link": "pair", "uplink": "switch", "gpu": "node", "nic": "node"
}
OBSERVABLE = 0.9  # a fault that never slows a measurement below 90% of healthy cannot be seen


@dataclass(frozen=True)
class SimOptions:
    """What ``netbench simulate`` was asked: the fabric, its faults, the noise and what to measure."""

    fabric: FabricSpec
    faults: tuple[Fault, ...] = ()
    noise: float = 0.05
    """Coefficient of variation of each measured time (0.05 = 5%)."""
    seed: int = 0
    latency_us: float = 20.0
    patterns: tuple[str, ...] = ("ring", "pairwise")
    pair_sizes: tuple[int, ...] | None = None  # None: the planner's NCCL defaults (64M, 256M, 1G)
    pair_batch: int | None = None
    pair_schedule: str = "auto"  # planner.PAIR_SCHEDULES; auto: by leaf (the fabric's topology is known)
    collectives: tuple[str, ...] = ("all_reduce",)
    max_bytes: int = 1 << 30
    iters: int = 20
    warmup: int = 5
    out: str | None = None

    def __post_init__(self) -> None:
        from netbench.common.errors import UsageError

        if not 0 <= self.noise < 0.5:
            raise UsageError("--noise must be in [0, 0.5)")


@dataclass(frozen=True)
class SimResult:
    rundir: RunDir
    fabric_s: float  # simulated time of every phase
    rows: int
    # what sweep --hosts has after its launch, for the confirm step (netbench.sim.confirm): the
    # request and hosts it plans from, how the launch went (phases with their fabric seconds)
    request: PlanRequest
    slots: tuple[HostSlot, ...]
    outcome: Outcome
    truth: dict[str, Any] = field(default_factory=dict)


def simulate(opts: SimOptions, echo: Callable[[str], None] = lambda s: None) -> SimResult:
    """Build the fabric and the plan, measure every phase on the fabric, write the run directory."""
    fab = build_fabric(opts.fabric, opts.faults)
    rng = np.random.default_rng(opts.seed)
    req = PlanRequest(
        measure=SweepOptions(
            collectives=list(opts.collectives),
            max_bytes=opts.max_bytes,
            iters=opts.iters,
            warmup=opts.warmup,
            in_place="out",
            backend="nccl",
        ),
        patterns=list(opts.patterns),
        pair_sizes=list(opts.pair_sizes) if opts.pair_sizes else None,
        pair_batch=opts.pair_batch,
        pair_schedule=opts.pair_schedule,
        switches=fab.uplinks(),  # as sweep --hosts --topology: the schedule and the loads use it
    )
    g = opts.fabric.gpus
    slots = [HostSlot(host=h, nprocs=g, rank_base=i * g) for i, h in enumerate(fab.hosts)]
    rundir = RunDir.create(opts.out)
    plan = build_plan(req, rundir.run_id, slots, "nccl")
    pair_rounds = sorted({grp.round for p in plan.phases for grp in p.groups if grp.round is not None})
    slow_rounds = _intermittent_rounds(opts.faults, pair_rounds, rng)
    rundir.write_run(
        status="running",
        started=utc_now(),
        netbench_version=__version__,
        launcher="simulated",
        backend=plan.backend,
        device=plan.device,
        hosts=list(fab.hosts),
        world_size=plan.world_size,
        topology=fab.uplinks(),
        options={"simulate": _jsonable(opts)},
    )
    rundir.write_plan(asdict(plan))
    rundir.write_env({h: {"netbench": __version__, "simulated": True} for h in fab.hosts})
    worst: dict[int, float] = {}  # fault index -> lowest healthy/faulty ratio it caused
    fabric_s, n_rows = 0.0, 0
    phases: list[dict[str, Any]] = []
    gpus = LostGpus({f.subject for f in opts.faults if f.kind == "gpu"}, {s.host: s for s in slots})
    # one fsync at the end, not one per row as a real run needs: nothing here can die half way
    with rundir.results_path.open("a", encoding="utf-8") as fh:
        for phase in plan.phases:
            slow_now = frozenset(h for h, rounds in slow_rounds.items() if phase.groups[0].round in rounds)
            groups, lost = gpus.split(phase)
            for grp in lost:
                fh.writelines(json.dumps(r.to_dict()) + "\n" for r in gpus.rows(plan, phase, grp))
                n_rows += len(phase.spec.collectives)
            flows, owner = _flows(groups)
            rate = fab.rates(flows, slow_now)
            healthy = fab.rates(flows, faults=False)
            group_rate = np.full(len(groups), np.inf)
            np.minimum.at(group_rate, owner, rate)  # a ring moves at its slowest hop
            if flows:
                _note_effects(fab, flows, rate / healthy, slow_now, worst)
            phase_s = 0.0
            for gi, grp in enumerate(groups):
                rows, seconds = _measure(plan, phase, grp, float(group_rate[gi]), opts, rng)
                fh.writelines(json.dumps(_row_dict(r)) + "\n" for r in rows)
                n_rows += len(rows)
                phase_s = max(phase_s, seconds)
            fabric_s += phase_s
            phases.append({"name": phase.name, "groups": len(phase.groups), "seconds": phase_s})
        fh.flush()
        os.fsync(fh.fileno())
    truth = _truth(opts, fab, slow_rounds, worst)
    rundir.write_json("truth.json", truth)
    rundir.write_run(
        status="completed", ended=utc_now(), rows=n_rows, fabric_s=round(fabric_s, 3),
        down_hosts=sorted(gpus.down),
    )
    lost = [RankFault("exit", why, host=h) for h, why in gpus.down.items()]  # the coordinator's record
    swept = Outcome("completed", lost, n_rows, down_hosts=set(gpus.down), phases=phases)
    return SimResult(rundir, fabric_s, n_rows, req, tuple(slots), swept, truth)


def _flows(groups: list[GroupSpec]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The host-to-host flows of a phase's groups: one per pair, one per hop of a ring."""
    flows, owner = [], []
    for gi, grp in enumerate(groups):
        hs = grp.hosts
        hops = [(hs[0], hs[1])] if len(hs) == 2 else [(hs[k], hs[(k + 1) % len(hs)]) for k in range(len(hs))]
        flows += hops
        owner += [gi] * len(hops)
    return flows, np.array(owner, dtype=int)


def _measure(
    plan: WorkerPlan,
    phase: Phase,
    grp: GroupSpec,
    rate_GBps: float,
    opts: SimOptions,
    rng: np.random.Generator,
) -> tuple[list[ResultRow], float]:
    """The rows one group reports for the phase's sweep, and how long the group took on the fabric."""
    spec, n = phase.spec, len(grp.ranks)
    dt = get_dtype(spec.dtype)
    rows, seconds = [], 0.0
    for cname in spec.collectives:
        coll = get_collective(cname)
        seen: set[int] = set()
        for size in spec.sizes:
            lay = coll.layout(size, dt.size, n)
            if lay.nbytes == 0 or lay.nbytes in seen:
                continue
            seen.add(lay.nbytes)
            bus = coll.bus_factor(n)
            for in_place in spec.in_place:
                t = opts.latency_us + lay.nbytes * bus / (rate_GBps * 1e3)
                t *= max(0.05, 1 + opts.noise * rng.standard_normal())
                ranks = t * (1 + RANK_JITTER * rng.standard_normal(n))
                avg = float(ranks.mean())
                algbw = lay.nbytes / 1e3 / avg
                seconds += (spec.warmup + spec.iters + (1 if spec.check else 0)) * avg / 1e6
                rows.append(
                    ResultRow(
                        run_id=plan.run_id,
                        collective=coll.name,
                        backend=plan.backend,
                        pattern=grp.pattern,
                        hosts=list(grp.hosts),
                        ranks=n,
                        round=grp.round,
                        bytes=lay.nbytes,
                        count=lay.count,
                        dtype=dt.name,
                        op=spec.op if coll.reduces else None,
                        in_place=in_place,
                        iters=spec.iters,
                        warmup=spec.warmup,
                        time_us=avg,
                        time_us_min=float(ranks.min()),
                        time_us_max=float(ranks.max()),
                        rank_time_us=[round(float(x), 3) for x in ranks],
                        algbw_GBps=algbw,
                        busbw_GBps=algbw * bus,
                        wrong=0 if spec.check else None,
                        group=grp.id,
                        device=plan.device,
                        ts=time.time(),
                    )
                )
    return rows, seconds


_ROW_FIELDS = tuple(f.name for f in fields(ResultRow))


def _row_dict(row: ResultRow) -> dict[str, Any]:
    """``row.to_dict()`` without ``asdict``'s deep copy (most of the simulator's time at 1,024 nodes):
    the row's lists are its own, built for it in ``_measure``; same keys, same order."""
    return {name: getattr(row, name) for name in _ROW_FIELDS}


def _intermittent_rounds(
    faults: tuple[Fault, ...], rounds: list[int], rng: np.random.Generator
) -> dict[str, set[int]]:
    """For each intermittent node, the pairwise rounds it is slow in (a random share of them)."""
    out: dict[str, set[int]] = {}
    for f in faults:
        if f.kind == "intermittent" and rounds:
            k = max(1, round(f.fraction * len(rounds)))
            out[f.subject] = {int(r) for r in rng.choice(rounds, size=k, replace=False)}
    return out


def _note_effects(
    fab: Fabric,
    flows: list[tuple[str, str]],
    ratio: np.ndarray,
    slow_now: frozenset[str],
    worst: dict[int, float],
) -> None:
    """Record, per fault, the lowest faulty/healthy rate of a flow it touches: a fault that never
    slows any measurement is invisible, and truth.json says so rather than count it as missed."""
    for k, f in enumerate(fab.faults):
        for (a, b), r in zip(flows, ratio, strict=True):
            if f.kind == "node" or (f.kind == "intermittent" and f.subject in slow_now):
                hit = f.subject in (a, b)
            elif f.kind == "link":
                hit = f.subject == "|".join(sorted((a, b)))
            elif f.kind == "uplink":
                hit = f.subject in fab.path_uplinks(a, b)
            elif f.kind == "nic":  # one NIC of a rail-optimised node: every pair of that node
                hit = f.subject.partition("/")[0] in (a, b)
            else:
                hit = False
            if hit:
                worst[k] = min(worst.get(k, 1.0), float(r))


def _truth(
    opts: SimOptions, fab: Fabric, slow_rounds: dict[str, set[int]], worst: dict[int, float]
) -> dict[str, Any]:
    faults = []
    for k, f in enumerate(fab.faults):
        effect = worst.get(k, 1.0)
        faults.append(
            asdict(f)
            | {
                "finding_kind": FINDING_KIND[f.kind],
                "worst_ratio_to_healthy": round(effect, 4),
                "observable": f.kind == "gpu" or effect <= OBSERVABLE,  # a lost GPU fails, never slows
                "slow_rounds": sorted(slow_rounds.get(f.subject, ())) if f.kind == "intermittent" else None,
            }
        )
    return {
        "schema": TRUTH_SCHEMA,
        "seed": opts.seed,
        "noise": opts.noise,
        "fabric": asdict(opts.fabric),
        "faults": faults,
    }


def _jsonable(opts: SimOptions) -> dict[str, Any]:
    d = asdict(opts)
    d["faults"] = [f"{f.kind}:{f.subject}={f.factor}" for f in opts.faults]
    return d
