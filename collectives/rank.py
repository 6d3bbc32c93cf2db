"""What one rank does: follow the plan phase by phase, measure in its groups, report.

Groups are built directly as backend objects (``ProcessGroupGloo`` / ``ProcessGroupNCCL``) over a
``PrefixStore`` of the run's store, never through the default process group. A pair's group therefore
lives and dies alone: if a partner hangs or dies, this rank's operation fails after ``op_timeout_s``,
the group is abandoned (NCCL: its communicator is aborted) and the rank goes on with the next phase.
Plain ``dist.new_group`` would need every rank of the world to take part in every group's creation.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import time
import traceback
from dataclasses import dataclass
from typing import Any

import torch
from netbench.collectives import messages
from netbench.collectives.dtypes import get_dtype, reduce_op
from netbench.collectives.harness import PointSpec, Settings, corrupts, measure
from netbench.collectives.native import NativeComm, engines_of
from netbench.collectives.ops import bandwidth, get_collective
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan

from netbench.common.rows import ResultRow

STORE_WAIT = _dt.timedelta(days=7)  # a rank waits for the coordinator as long as it is alive
# Finished groups live as long as the process, which ends with os._exit: destroying a gloo group can
# block on its peers, and a ProcessGroupNCCL destroyed without shutdown prints torch's
# "destroy_process_group() was not called" warning into the middle of the table.
_FINISHED: list[Any] = []


@dataclass
class RankContext:
    rank: int
    local_rank: int
    host: str
    plan: WorkerPlan
    store: Any
    device: str
    gloo_addr: str | None = None
    first_phase: int = 0
    """The phases before this one are not this process's: its agent restarted it after a group of
    an earlier phase stalled (worker ``_Agent.restart``)."""


def make_group(ctx: RankContext, group: GroupSpec, phase: Phase) -> tuple[Any, int]:
    import torch.distributed as dist

    pstore = group_store(ctx, group, phase)
    grank = group.ranks.index(ctx.rank)
    timeout = _dt.timedelta(seconds=ctx.plan.op_timeout_s)
    if ctx.plan.backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        pg = dist.ProcessGroupNCCL(pstore, grank, len(group.ranks), opts)
        # eager connect so set-up failures surface here, not inside the first timed loop
        pg.allreduce([torch.zeros(1, device="cuda")]).wait()
        torch.cuda.synchronize()
    else:
        opts = dist.ProcessGroupGloo._Options()
        opts._timeout = timeout
        iface = rail_iface(ctx, group)
        if iface:  # the rail's own NIC, so the group measures that NIC and cable alone
            opts._devices = [dist.ProcessGroupGloo.create_device(interface=iface)]
        elif ctx.gloo_addr:
            opts._devices = [dist.ProcessGroupGloo.create_device(hostname=ctx.gloo_addr)]
        else:
            opts._devices = [dist.ProcessGroupGloo.create_default_device()]
        pg = dist.ProcessGroupGloo(pstore, grank, len(group.ranks), opts)
    return pg, grank


def rail_iface(ctx: RankContext, group: GroupSpec) -> str | None:
    """The interface a gloo rank binds in a rail group (the plan's, from the inventory), else None.

    NCCL needs no such binding: it drives each GPU's traffic through the NIC nearest to it, which is
    that GPU's rail NIC on a rail-optimised node (NCCL_IB_HCA would be read once per process, so it
    could not be set per group anyway)."""
    if group.rail is None or ctx.rank >= len(ctx.plan.rail_ifaces):
        return None
    return ctx.plan.rail_ifaces[ctx.rank]


def run_group(ctx: RankContext, pg: Any, grank: int, group: GroupSpec, phase: Phase) -> None:
    """Measure every point of the phase's sweep in one group; the group's rank 0 reports the rows.

    With two engines (``--engine both``) every point is measured by both, in the same group and
    buffers' sizes, so the torch overhead at a size is the ratio of two rows of one run. The engines
    are the plan's, the same on every rank of the group (``planner.choose_engine`` decided them); a
    rank whose host cannot run them stopped after its hello (``native.engine_unmet``)."""
    engines = engines_of(phase.spec.engine)
    native = None
    if "nccl" in engines:
        native = NativeComm(group_store(ctx, group, phase), grank, len(group.ranks), ctx.plan.op_timeout_s)
    ok = False
    try:
        _run_points(ctx, pg, grank, group, phase, engines, native)
        ok = True
    finally:
        if native is not None:
            native.close(failed=not ok)


def group_store(ctx: RankContext, group: GroupSpec, phase: Phase) -> Any:
    """The group's own view of the run's store: its keys (torch's and ours) never meet another's."""
    import torch.distributed as dist

    return dist.PrefixStore(f"p{phase.index}/{group.id}/", ctx.store)


def _run_points(
    ctx: RankContext, pg: Any, grank: int, group: GroupSpec, phase: Phase, engines: list[str], native: Any
) -> None:
    spec = phase.spec
    n = len(group.ranks)
    dt = get_dtype(spec.dtype)
    settings = Settings(
        iters=spec.iters,
        warmup=spec.warmup,
        check=spec.check,
        device=ctx.device,
        cuda_graph=spec.cuda_graph,
        corrupt=corrupts(ctx.rank, ctx.host),
    )
    step = 0
    # one engine's whole sweep of a collective, then the other's: nccl-tests' table stays one section
    # per (collective, engine), and the report pairs the two engines' rows by size
    for cname, engine in itertools.product(spec.collectives, engines):
        coll = get_collective(cname)
        op_name = spec.op if coll.reduces else None
        op = reduce_op(spec.op) if coll.reduces else None
        root = spec.root if coll.rooted else 0
        seen: set[int] = set()
        for size in spec.sizes:
            lay = coll.layout(size, dt.size, n)
            if lay.nbytes == 0 or lay.nbytes in seen:
                continue  # rounded to nothing, or to a size already measured
            seen.add(lay.nbytes)
            for in_place in spec.in_place:
                if not coll.runs(in_place, engine):
                    continue
                target = PointSpec(coll, lay, dt.torch_dtype, in_place, op_name, op, root)
                point = measure(
                    target,
                    pg,
                    rank=grank,
                    nranks=n,
                    settings=settings,
                    native=native if engine == "nccl" else None,
                )
                per_rank = _gather(pg, n, ctx.device, point.time_us, point.wrong or 0)
                step += 1
                if grank == 0:
                    times = [t for t, _ in per_rank]
                    avg = sum(times) / n
                    algbw, busbw = bandwidth(lay.nbytes, avg, n, coll)
                    row = ResultRow(
                        run_id=ctx.plan.run_id,
                        collective=coll.name,
                        backend=ctx.plan.backend,
                        pattern=group.pattern,
                        hosts=group.hosts,
                        ranks=n,
                        round=group.round,
                        bytes=lay.nbytes,
                        count=lay.count,
                        dtype=dt.name,
                        op=op_name,
                        in_place=in_place,
                        iters=spec.iters,
                        warmup=spec.warmup,
                        time_us=avg,
                        time_us_min=min(times),
                        time_us_max=max(times),
                        rank_time_us=times,
                        algbw_GBps=algbw,
                        busbw_GBps=busbw,
                        wrong=int(sum(w for _, w in per_rank)) if spec.check else None,
                        root=spec.root if coll.rooted else None,
                        group=group.id,
                        device=ctx.device,
                        cuda_graph=spec.cuda_graph,
                        engine=engine,
                        ts=time.time(),
                        rail=group.rail,
                    )
                    messages.emit("row", row=row.to_dict(), phase=phase.index)
                else:
                    messages.emit("step", rank=ctx.rank, phase=phase.index, group=group.id, step=step)


def _gather(pg: Any, n: int, device: str, time_us: float, wrong: int) -> list[tuple[float, float]]:
    """Every rank's (time, wrong count), on every rank: the slowest rank decides, so all are kept."""
    stats = torch.tensor([time_us, float(wrong)], dtype=torch.float64, device=device)
    gathered = torch.empty(2 * n, dtype=torch.float64, device=device)
    pg._allgather_base(gathered, stats).wait()
    return [(float(t), float(w)) for t, w in gathered.view(n, 2).cpu().tolist()]


def _abandon(pg: Any, backend: str) -> None:
    """Drop a failed group without waiting on it (NCCL: abort the communicator)."""
    if pg is None:
        return
    try:
        if backend == "nccl":
            pg.abort()
    except Exception:  # noqa: BLE001 - best effort on a group that already failed
        pass


def run_plan(ctx: RankContext) -> None:
    """Execute every phase of the plan. Never raises for a failed group: it reports and goes on."""
    for phase in ctx.plan.phases[ctx.first_phase :]:
        key = f"go/{phase.index}"
        ctx.store.wait([key], STORE_WAIT)
        released = set(json.loads(ctx.store.get(key).decode()))
        mine = [g for g in phase.groups if g.id in released and ctx.rank in g.ranks]
        for group in mine:
            pg = None
            t0 = time.time()
            try:
                pg, grank = make_group(ctx, group, phase)
                setup_s = time.time() - t0
                run_group(ctx, pg, grank, group, phase)
                messages.emit(
                    "group_done",
                    rank=ctx.rank,
                    phase=phase.index,
                    group=group.id,
                    seconds=time.time() - t0,
                    setup_s=setup_s,
                )
                _FINISHED.append(pg)
            except Exception as exc:  # noqa: BLE001 - a group's failure must not end the rank
                text = f"{type(exc).__name__}: {exc}".strip()
                kind = "timeout" if "timeout" in text.lower() or "timed out" in text.lower() else "error"
                messages.emit(
                    "group_error",
                    rank=ctx.rank,
                    phase=phase.index,
                    group=group.id,
                    kind=kind,
                    error=text.splitlines()[0][:500] if text else kind,
                    detail=traceback.format_exc(limit=3)[-1500:]
                    if os.environ.get("NETBENCH_DEBUG")
                    else None,
                )
                _abandon(pg, ctx.plan.backend)
        messages.emit("phase_done", rank=ctx.rank, phase=phase.index)
