"""What one rank does: follow the plan phase by phase, measure in its groups, report.

Groups are built directly as backend objects (``ProcessGroupGloo`` / ``ProcessGroupNCCL``) over a
``PrefixStore`` of the run's store, never through the default process group. A pair's group therefore
lives and dies alone: if a partner hangs or dies, this rank's operation fails after ``op_timeout_s``,
the group is abandoned (its communicator aborted) and the rank goes on with the next phase. A
finished group is released, never kept: ``collectives/groups.py`` owns that life cycle.
Plain ``dist.new_group`` would need every rank of the world to take part in every group's creation.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from netbench.collectives import clocks, groups, messages, native_loop
from netbench.collectives.ahead import FILLS, Ahead
from netbench.collectives.arrivals import ARRIVAL_PATTERNS, ArrivalRecord, Stamps, summarise
from netbench.collectives.dtypes import get_dtype, reduce_op
from netbench.collectives.groups import MadeGroup
from netbench.collectives.harness import IterStamps, PointSpec, Settings, corrupts, delays, measure
from netbench.collectives.native import NativeComm, engines_of
from netbench.collectives.ops import bandwidth, get_collective
from netbench.collectives.plan import GroupSpec, Phase, WorkerPlan
from netbench.collectives.sizes import format_size

from netbench.common.rows import ResultRow

STORE_WAIT = _dt.timedelta(days=7)  # a rank waits for the coordinator as long as it is alive


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
    made: MadeGroup | None = None
    """The group being measured: how it was made and what that cost, which its rows carry."""
    open_store: Callable[[], Any] | None = None
    """A new client of the run's store whose waits end after the plan's operation timeout: one for
    each lane that makes groups ahead (collectives/ahead.py). None: every group is made when its
    turn comes."""


def make_group(
    ctx: RankContext, group: GroupSpec, phase: Phase, store: Any = None, again: bool = False,
    rendezvous_s: float | None = None,
) -> MadeGroup:
    """This rank's group for ``group``, made fresh (``groups.make``), with its set-up time: the torch
    process group and, when the phase measures with the native engine, its own communicator.
    ``store``: the client to rendezvous through (a lane's, collectives/ahead.py; None: the rank's);
    ``again``: under a fresh prefix, as the coordinator asked (``again/N``: a member was restarted);
    ``rendezvous_s``: how long to wait for the other members (None: the plan's operation timeout)."""
    t0 = time.monotonic()
    grank = group.ranks.index(ctx.rank)
    iface = rail_iface(ctx, group)
    # gloo: the rail's own NIC, so a rail group measures that NIC and cable alone; else the address
    # that routes to the store
    device = {"interface": iface} if iface else {"hostname": ctx.gloo_addr} if ctx.gloo_addr else None
    gstore = group_store(ctx, group, phase, store, again)
    pg = groups.make(ctx.plan.backend, gstore, grank, len(group.ranks), ctx.plan.op_timeout_s, device,
                     rendezvous_s)
    native = None
    if "nccl" in engines_of(phase.spec.engine):
        try:
            native = NativeComm(gstore, grank, len(group.ranks), rendezvous_s or ctx.plan.op_timeout_s)
        except BaseException:
            groups.abandon(pg)
            raise
    setup = time.monotonic() - t0
    return MadeGroup(pg, grank, "fresh", setup, setup, native)


def rail_iface(ctx: RankContext, group: GroupSpec) -> str | None:
    """The interface a gloo rank binds in a rail group (the plan's, from the inventory), else None.

    NCCL needs no such binding: it drives each GPU's traffic through the NIC nearest to it, which is
    that GPU's rail NIC on a rail-optimised node (NCCL_IB_HCA would be read once per process, so it
    could not be set per group anyway)."""
    if group.rail is None or ctx.rank >= len(ctx.plan.rail_ifaces):
        return None
    return ctx.plan.rail_ifaces[ctx.rank]


def run_group(ctx: RankContext, made: MadeGroup, group: GroupSpec, phase: Phase) -> None:
    """Measure every point of the phase's sweep in one group; the group's rank 0 reports the rows.

    With two engines (``--engine both``) every point is measured by both, in the same group and
    buffers' sizes, so the torch overhead at a size is the ratio of two rows of one run. The engines
    are the plan's, the same on every rank of the group (``planner.choose_engine`` decided them); a
    rank whose host cannot run them stopped after its hello (``native.engine_unmet``)."""
    ok = False
    try:
        _run_points(ctx, made.pg, made.grank, group, phase, engines_of(phase.spec.engine), made.native)
        ok = True
    finally:
        if made.native is not None:
            made.native.close(failed=not ok)


def group_store(
    ctx: RankContext, group: GroupSpec, phase: Phase, store: Any = None, again: bool = False
) -> Any:
    """The group's own view of the run's store: its keys (torch's and ours) never meet another's,
    nor those of an attempt its members made with a process since restarted (``again``)."""
    import torch.distributed as dist

    return dist.PrefixStore(f"p{phase.index}/{group.id}/{'again/' if again else ''}",
                            ctx.store if store is None else store)


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
        delay=delays(ctx.rank, ctx.host),
        step_work=spec.step_work,
        hot_buffers=spec.hot_buffers,
        # a GPU loop carries per-operation events only when asked (--per-iter) where arrivals are
        # analysed: by default it is timed as nccl-tests times it (harness.Settings.gpu_stamps)
        gpu_stamps=spec.per_iter and group.pattern in ARRIVAL_PATTERNS,
    )
    # this host's clock against group rank 0's, once per group: arrivals are compared on one clock
    # (only where they are analysed: not for the thousands of pairs of a pairwise round)
    timed = group.pattern in ARRIVAL_PATTERNS
    clock = clocks.ClockEstimate(0.0, 0.0)
    if timed:
        tag = _clock_tag(pg, grank, ctx.device)
        clock = clocks.estimate(group_store(ctx, group, phase), grank, n, tag=tag)
    step = 0
    # one engine's whole sweep of a collective, then the other's: nccl-tests' table stays one section
    # per (collective, engine), and the report pairs the two engines' rows by size
    for cname, engine in itertools.product(spec.collectives, engines):
        coll = get_collective(cname)
        op_name = spec.op if coll.reduces else None
        op = reduce_op(spec.op) if coll.reduces else None
        root = spec.root if coll.rooted else 0
        reach = max(coll.layout(size, dt.size, n).nbytes for size in spec.sizes)  # slots' room
        seen: set[int] = set()
        for size in spec.sizes:
            lay = coll.layout(size, dt.size, n)
            if lay.nbytes == 0 or lay.nbytes in seen:
                continue  # rounded to nothing, or to a size already measured
            seen.add(lay.nbytes)
            for in_place in spec.in_place:
                if not coll.runs(in_place, engine, n):
                    continue
                target = PointSpec(coll, lay, dt.torch_dtype, in_place, op_name, op, root)
                what = f"{coll.name}'s buffers for sizes up to {format_size(max(spec.sizes))} on {ctx.host}"
                point = _measure(target, pg, grank, n, settings, native if engine == "nccl" else None, reach,
                                 what)
                per_rank, stamps = _gather(pg, grank, n, ctx.device, point, clock, spec.iters)
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
                        group_made=ctx.made.how if ctx.made else None,
                        setup_s=ctx.made.setup_s if ctx.made else None,
                        setup_wait_s=ctx.made.wait_s if ctx.made else None,
                        loop=point.loop,
                    )
                    if point.loop == "python":  # the C loop could not be had: say why (native_loop)
                        row.extra["loop_reason"] = native_loop.choose().reason
                    if stamps is not None and timed:
                        record = arrival_record(row, stamps)
                        if spec.per_iter:  # --per-iter: every sample, iteration x rank, 0.1 us
                            record.extra["samples"] = samples(stamps)
                        row.extra["arrivals"] = record.to_dict()
                    messages.emit("row", row=row.to_dict(), phase=phase.index)
                else:
                    messages.emit("step", rank=ctx.rank, phase=phase.index, group=group.id, step=step)


def _clock_tag(pg: Any, grank: int, device: str) -> str:
    """Store keys of this group's clock exchange, never an earlier attempt's: group rank 0 draws a
    token and the group's own first operation hands it to every member (a group made again after a
    restart, ahead on a lane or under ``again/``, meets only its own keys)."""
    import secrets

    token = torch.tensor([secrets.randbits(62) if grank == 0 else 0], dtype=torch.int64, device=device)
    pg.allreduce([token]).wait()
    return f"clk/{int(token.item()):x}"


def _gather(
    pg: Any, grank: int, n: int, device: str, point: Any, clock: clocks.ClockEstimate, iters: int
) -> tuple[list[tuple[float, float]], Stamps | None]:
    """Every rank's (time, wrong count), on every rank: the slowest rank decides, so all are kept;
    and every rank's per-operation stamps on group rank 0's clock (None when a rank has none: a
    CUDA-graph loop). 6 + 2 x iters numbers a rank.

    An all-reduce (sum) of an n-row table where each rank fills its own row and leaves the others
    zero, not torch's all-gather: on the H200 a process whose torch NCCL group had run a few
    ``_allgather_base`` made every later graph-captured NCCL operation of the native engine 0.17-0.35
    us slower (2 MiB 2.50 -> 2.81-2.86 us, 16 MiB 9.48 -> 9.75-9.86, for the rest of the process),
    while the same points gathered by the group's all-reduce, its barrier or nccl4py's own
    all-gather stayed at 2.46-2.48 and 9.39-9.45 (a graph probe of 2026-12-04, --rank-like gather
    --gather-how; benchmarks/README.md "The per-point gather"). x + 0.0 is exact, so the
    sum hands every figure over unchanged; it moves about twice the bytes, untimed and small."""
    st: IterStamps | None = point.stamps
    head = [point.time_us, float(point.wrong or 0), clock.offset_us, clock.err_us,
            st.start_us if st else 0.0, 1.0 if st else 0.0]
    body = (st.arrive_us + st.done_us) if st else [0.0] * (2 * iters)
    width = 6 + 2 * iters
    table = torch.zeros(n, width, dtype=torch.float64, device=device)
    table[grank] = torch.tensor(head + body, dtype=torch.float64)
    pg.allreduce([table]).wait()
    m = table.cpu().numpy()
    per_rank = [(float(t), float(w)) for t, w in m[:, :2].tolist()]
    if not m[:, 5].all():
        return per_rank, None
    # on rank 0's clock: host start + offset correction + time since start; relative to rank 0's start
    base = (m[:, 4] - m[:, 2]) - m[0, 4]
    arrive = m[:, 6 : 6 + iters].T + base[None, :]
    done = m[:, 6 + iters :].T + base[None, :]
    return per_rank, Stamps(arrive, done, m[:, 2].copy(), m[:, 3].copy())


def samples(stamps: Stamps) -> dict[str, Any] | None:
    """Every rank's arrival and completion of every timed operation on group rank 0's clock (us
    after its first arrival, 0.1 us), or None when they would not fit in one protocol line."""
    if stamps.arrive.size * 2 * 12 > messages.MAX_LINE // 2:
        return None
    t0 = float(stamps.arrive.min())
    return {"arrive_us": np.round(stamps.arrive - t0, 1).tolist(),
            "done_us": np.round(stamps.done - t0, 1).tolist()}


def arrival_record(row: ResultRow, stamps: Stamps) -> ArrivalRecord:
    """The point's arrivals (``netbench.collectives.arrivals``), named as its row."""
    return summarise(
        stamps, group=row.group, pattern=row.pattern, hosts=list(row.hosts), collective=row.collective,
        bytes=row.bytes, in_place=row.in_place, engine=row.engine, device=row.device or "cpu",
        backend=row.backend, dtype=row.dtype,
    )


def run_plan(ctx: RankContext) -> None:
    """Execute every phase of the plan. Never raises for a failed group: it reports and goes on.

    With ``plan.ahead`` lanes, the next groups are made while this one measures (collectives/ahead.py);
    a restarted rank (``first_phase``) makes the groups of its first ``ahead`` phases itself, as the
    coordinator has its partners make them again (``again/N``)."""
    ahead = _lanes(ctx)
    for phase in ctx.plan.phases[ctx.first_phase :]:
        key = f"go/{phase.index}"
        ctx.store.wait([key], STORE_WAIT)
        released = set(json.loads(ctx.store.get(key).decode()))
        mine = [g for g in phase.groups if g.id in released and ctx.rank in g.ranks]
        again: set[str] = set()
        if ctx.plan.ahead and mine:  # read by a rank without lanes too: its partners may have them
            again = set(json.loads(ctx.store.get(f"again/{phase.index}").decode()))
        if ahead is not None:
            ahead.settle(phase.index, {g.id for g in mine} - again)
        for k, group in enumerate(mine):
            if ahead is not None and group.pattern in FILLS:
                ahead.fill(phase.index, _upcoming(ctx, phase, mine[k + 1 :]))
            _one_group(ctx, phase, group, ahead, group.id in again)
        messages.emit("phase_done", rank=ctx.rank, phase=phase.index)


def _lanes(ctx: RankContext) -> Ahead | None:
    if not ctx.plan.ahead or ctx.open_store is None:
        return None

    def on_thread() -> None:  # a lane's CUDA calls go to this rank's GPU, as the rank's own do
        if ctx.device == "cuda":
            torch.cuda.set_device(ctx.local_rank)

    floor = ctx.first_phase + ctx.plan.ahead if ctx.first_phase else 0
    forever = STORE_WAIT.total_seconds()  # a member may come only at the group's turn (ahead.py)
    return Ahead(ctx.plan.ahead, ctx.open_store,
                 lambda store, g, p: make_group(ctx, g, p, store, rendezvous_s=forever),
                 on_thread, ctx.plan.op_timeout_s, floor)


def _upcoming(
    ctx: RankContext, phase: Phase, rest: list[GroupSpec]
) -> Iterator[tuple[Phase, GroupSpec, int]]:
    """This rank's groups after the current one, in plan order, each with its place among the
    phase's planned groups that hold the rank (``ahead.lane_of``): the rest of this phase's released
    ones, then every later phase's planned ones (a release may still leave some out)."""
    if rest:
        place = {g.id: k for k, g in enumerate(g for g in phase.groups if ctx.rank in g.ranks)}
        for g in rest:
            yield phase, g, place[g.id]
    for later in ctx.plan.phases[phase.index + 1 :]:
        for k, g in enumerate(g for g in later.groups if ctx.rank in g.ranks):
            yield later, g, k


class BuffersTooLarge(Exception):
    """The sweep's sizes need more memory than this rank could allocate: the user's ``-e`` (or
    ``--pair-sizes``) against this host's memory, not a fault of the host. Reported as a group error
    of kind ``memory``, which blames no host."""


def _measure(target: PointSpec, pg: Any, grank: int, n: int, settings: Settings, native: Any, reach: int,
             what: str) -> Any:
    try:
        return measure(target, pg, rank=grank, nranks=n, settings=settings, native=native, reach=reach)
    except RuntimeError as exc:
        if not out_of_memory(exc):
            raise
        said = str(exc).strip()
        raise BuffersTooLarge(f"cannot allocate {what} ({format_size(reach)} a buffer): "
                              f"{said.splitlines()[-1][:200] if said else type(exc).__name__}") from None


def out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: CUDA's OutOfMemoryError, or the CPU allocator's RuntimeError."""
    text = str(exc)
    return isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in text or (
        "out of memory" in text.lower() and "CUDA" in text)


def _one_group(ctx: RankContext, phase: Phase, group: GroupSpec, ahead: Ahead | None, again: bool) -> None:
    made = None
    t0 = time.monotonic()
    try:
        made = ahead.take(phase.index, group.id) if ahead is not None and not again else None
        made = ctx.made = made or make_group(ctx, group, phase, again=again)
        run_group(ctx, made, group, phase)
        groups.release(made.pg, ctx.plan.op_timeout_s)  # its last op (_gather) had every member
        messages.emit(
            "group_done",
            rank=ctx.rank,
            phase=phase.index,
            group=group.id,
            seconds=time.monotonic() - t0,
            setup_s=made.setup_s,
            wait_s=made.wait_s,
        )
    except Exception as exc:  # noqa: BLE001 - a group's failure must not end the rank
        text = f"{type(exc).__name__}: {exc}".strip()
        kind = ("memory" if isinstance(exc, BuffersTooLarge)
                else "timeout" if "timeout" in text.lower() or "timed out" in text.lower() else "error")
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
        groups.abandon(made.pg if made else None)
