"""``netbench simulate``'s sweep: the real plan on a simulated fabric, into a real run directory, with
the truth beside it.

The fabric is a ``Site`` (``netbench.sites.sim.site.SimSite``) and the plan comes from the sweep's own
stage, ``pipeline.plan_run`` (backend, engine, slots, ``planner.build_plan``): exactly the plan of
``sweep --hosts --topology`` (ring, then the pairwise rounds leaf against leaf, or the circle
method's, or ``--pair-batch``; rail rounds). Its phases are measured on the fabric directly, the
fast path (``sim.measure``: every group of a phase at once with numpy, no coordinator, rows written
as columns), not through the site's launcher, whose per-host agents and store round trips would cost
this machine minutes at 4,096 nodes. Fabric time is the simulated duration of the phases. The steps
after it are the sweep's: the re-tests (``sim.confirm``: ``pipeline.confirm`` through the site's
launcher), the report and the exit status (``engine``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from netbench import __version__
from netbench.agents.coordinator import Fault as RankFault
from netbench.agents.coordinator import Outcome
from netbench.agents.launchers import HostSlot
from netbench.collectives.plan import WorkerPlan
from netbench.collectives.planfile import plan_file_chunks
from netbench.common.rundir import TRUTH_JSON, RunDir, new_run_id, utc_now
from netbench.reports.rowstore import RowWriter, row_schema
from netbench.run.options import flat
from netbench.run.pipeline import Planned, plan_run
from netbench.run.planner import PlanRequest
from netbench.sim.dropout import LostGpus
from netbench.sim.fabric import Fabric, Fault
from netbench.sim.launcher import SimHosts
from netbench.sim.measure import _flows, _measure, _note_effects, _rates
from netbench.sim.options import SimOptions
from netbench.sim.progress import Progress
from netbench.sim.rails import RailFabric, build_fabric
from netbench.sim.setup import Lanes
from netbench.sites.sim.site import SimSite, node_inventory

TRUTH_SCHEMA = "netbench.sim-truth/1"
#: the subject kind of the finding each fault should produce (what a score compares against)
FINDING_KIND = {
    "node": "node", "intermittent": "node", "link": "pair", "uplink": "switch", "gpu": "node", "nic": "node"
}
OBSERVABLE = 0.9  # a fault that never slows a measurement below 90% of healthy cannot be seen





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


def simulate(
    opts: SimOptions, echo: Callable[[str], None] = lambda s: None, progress: Progress | None = None
) -> SimResult:
    """Build the fabric, plan on it as a sweep plans (``plan_fabric``), measure every phase on the
    fabric, write the run directory; each stage said to ``progress`` as it starts."""
    progress = progress or Progress()
    spec = opts.fabric
    progress.stage(f"building the fabric ({spec.nodes} nodes, {spec.leaves} leaves, {spec.tiers} tiers)")
    fab = build_fabric(opts.fabric, opts.faults)
    rng = np.random.default_rng(opts.seed)
    run_id = new_run_id()
    progress.stage(f"planning the sweep ({', '.join(opts.pairs.patterns)})")
    planned = plan_fabric(opts, SimSite(SimHosts(fab, opts)), run_id, echo)
    plan, slots = planned.plan, planned.slots
    progress.stage(f"writing the run directory's plan ({len(plan.phases)} phases)")
    rundir = RunDir.create(opts.out, run_id=run_id)
    pair_rounds = sorted({p.groups[0].round for p in plan.phases if p.groups[0].round is not None})
    slow_rounds = _intermittent_rounds(opts.faults, pair_rounds, rng)
    rundir.write_run(
        command="simulate",
        status="running",
        started=utc_now(),
        netbench_version=__version__,
        launcher="simulated",
        backend=plan.backend,
        device=plan.device,
        hosts=list(fab.hosts),
        world_size=plan.world_size,
        topology=planned.request.switches,
        options={"simulate": _jsonable(opts)},
    )
    rundir.write_plan(plan_file_chunks(plan))
    rundir.write_env({h: {"netbench": __version__, "simulated": True} for h in fab.hosts})
    if isinstance(fab, RailFabric):  # its rails, as the inventory stage of a sweep records them
        rundir.write_inventory([node_inventory(fab, h) for h in fab.hosts])
    gpus = LostGpus({f.subject for f in opts.faults if f.kind == "gpu"}, {s.host: s for s in slots})
    worst: dict[int, float] = {}  # fault index -> lowest healthy/faulty ratio it caused
    n_rows, phases = _measure_phases(opts, fab, plan, gpus, slow_rounds, rng, worst, rundir, progress)
    fabric_s = sum(p["seconds"] for p in phases)
    truth = _truth(opts, fab, slow_rounds, worst)
    rundir.write_json(TRUTH_JSON, truth)
    lost = [RankFault("exit", why, host=h) for h, why in gpus.down.items()]  # the coordinator's record
    rundir.write_run(  # the fields run.execute.execute writes, so every site's run.json reads alike
        status="completed", ended=utc_now(), rows=n_rows, fabric_s=round(fabric_s, 3),
        down_hosts=sorted(gpus.down), phases=phases, faults=[asdict(f) for f in lost], startup_s=0.0,
    )
    swept = Outcome("completed", lost, n_rows, down_hosts=set(gpus.down), phases=phases)
    return SimResult(rundir, fabric_s, n_rows, planned.request, tuple(slots), swept, truth)


def plan_fabric(opts: SimOptions, site: SimSite, run_id: str, echo: Callable[[str], None]) -> Planned:
    """The sweep's planning stage on the fabric's site: its hosts (every GPU a rank), its switches
    (as ``sweep --hosts --topology``: the schedule and the loads use them), NCCL, the engine for
    hosts of no inventory, the plan."""
    entries = site.hosts()
    return plan_run(opts.sweep_options(), site, entries, {}, site.switches(entries, echo), run_id)


def _measure_phases(
    opts: SimOptions, fab: Fabric | RailFabric, plan: WorkerPlan, gpus: LostGpus,
    slow_rounds: dict[str, set[int]], rng: np.random.Generator, worst: dict[int, float], rundir: RunDir,
    progress: Progress,
) -> tuple[int, list[dict[str, Any]]]:
    """Every phase of ``plan`` measured on the fabric, one after another, its rows appended to
    results.parquet (a lost GPU's groups as the coordinator writes them, ``sim.dropout``); the rows
    written and each phase's name, groups and fabric seconds. ``worst`` gathers each fault's effect."""
    fabric_s, n_rows = 0.0, 0
    phases: list[dict[str, Any]] = []
    lanes = Lanes(plan.ahead, opts.ahead_slowdown)
    # a phase's rows as columns, a part of results.parquet when a million are buffered or FLUSH_S
    # passed, and at the end however it ends (a signal: the writer's close); no row-by-row tail, as
    # a real run needs: the rows are made here, not measured by ranks that could die
    with RowWriter(rundir) as writer:
        for i, phase in enumerate(plan.phases, 1):
            progress.phase(i, len(plan.phases), phase.name)
            slow_now = frozenset(h for h, rounds in slow_rounds.items() if phase.groups[0].round in rounds)
            groups, lost = gpus.split(phase)
            for grp in lost:
                rows = gpus.rows(plan, phase, grp)
                writer.write_table(pa.Table.from_pylist([r.to_dict() | {"extra": "{}"} for r in rows],
                                                        schema=row_schema()))
                n_rows += len(rows)
            flows = _flows(groups, fab, opts.fabric.gpus)
            rate = _rates(fab, flows, slow_now)
            if flows.a.size and any(f.kind != "gpu" for f in fab.faults):
                _note_effects(fab, flows, rate / _rates(fab, flows, slow_now, faults=False), slow_now, worst)
            measured = _measure(plan, phase, groups, flows.group_rates(rate, len(groups)), opts, rng,
                                lanes, fabric_s)
            writer.write_table(measured.table())
            n_rows += measured.rows
            phase_s = float(measured.seconds.max(initial=0.0))
            fabric_s += phase_s
            phases.append({"name": phase.name, "groups": len(phase.groups), "seconds": phase_s})
    return n_rows, phases


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


def _truth(
    opts: SimOptions, fab: Fabric | RailFabric, slow_rounds: dict[str, set[int]], worst: dict[int, float]
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
        "noise_shape": opts.noise_shape,
        "fabric": asdict(opts.fabric),
        "faults": faults,
    }


SIM_MEASURE = ("collectives", "max_bytes", "iters", "warmup", "groups_ahead", "patterns", "pair_sizes",
               "pair_batch", "pair_schedule")
"""The measurement's leaves a simulation is asked for (``netbench simulate``'s options): its run.json's."""


def _jsonable(opts: SimOptions) -> dict[str, Any]:
    measured = flat(opts.measure) | flat(opts.pairs)
    d = {f.name: getattr(opts, f.name) for f in fields(opts) if f.name not in ("measure", "pairs")}
    d |= {k: measured[k] for k in SIM_MEASURE}
    d["fabric"] = asdict(opts.fabric)
    d["faults"] = [f"{f.kind}:{f.subject}={f.factor}" for f in opts.faults]
    return d
