"""The one measuring procedure every collective goes through (nccl-tests' common.cu, in Python).

For one (collective, size, in-place) point on one rank:
  1. allocate buffers once, fill the send buffer. As nccl-tests (common.cu startColl: "change offset
     for each iteration so that we avoid cache effects"), operation i uses slot i % slots, where
     slots = largest size / this size (at most one per operation), laid out as nccl-tests' offsets
     (one send and one receive allocation, slot i at i x the size). On the H200 a 16 MiB all_reduce
     with one buffer pair, which stays in the 60 MB L2, ran in 7.0 us against nccl-tests' 11.1 us,
     and in 11.4 us rotating (benchmarks/README.md, 2026-12-03 rotation figures).
     ``Settings.hot_buffers`` (--hot-buffers) keeps one slot: the cache-resident figure, by choice;
  2. optionally the untimed correctness pass: run once, count wrong elements;
  3. ``warmup`` untimed iterations;
  4. line all ranks up (barrier), then a loop of ``iters`` operations timed as a whole: on a GPU with
     CUDA events on the stream, issued back to back (pipelined, as nccl-tests); on CPU with a monotonic
     clock around the loop, each operation waited before the next (gloo runs a collective on its own
     threads; letting several overlap would measure something NCCL never does);
  5. report time per operation, and when this rank arrived at (issued) and completed each timed
     operation on its host clock (``IterStamps``): on CPU around each call and its wait; on a GPU,
     when asked (``Settings.gpu_stamps``, --per-iter), from a CUDA event recorded before and after
     each call (the one before fires when the stream reaches the collective, i.e. when its kernel
     can start), anchored to the host clock by an event the host waited for just before the loop.
     ``collectives.clocks`` puts the hosts' clocks on one; ``netbench.collectives.arrivals`` says who
     arrived last. A CUDA-graph loop (``-G``) replays the whole loop as one launch, on the stream it
     was captured on, and has no per-operation stamps; the native engine's graphs are made with
     CUDA's own API, as nccl-tests', not torch's graph class (``RawGraph`` says why).
Per-rank times are then combined across the group by ``collectives.rank`` (avg as nccl-tests, plus min,
max and every rank's time, because the slowest rank decides when a collective really finishes).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from netbench.collectives import native_loop
from netbench.collectives.clocks import now_us
from netbench.collectives.ops import Buffers, Call, Collective, Layout, NativeCall, NativeOp, fill_send

_NO_WORK: list = []  # shared: the native loop allocates nothing per operation


class Issue:
    """Issues the point's operation on one stream, each time in the next buffer slot.

    Called, it issues one operation and returns the torch work handles to wait for (none for the
    native engine). ``sequence(n)`` hands out the next n operations' launches at once, so the timed
    loop (``_around``) is a plain ``for`` over a list: the closure, the cycle's ``next()`` and an
    empty wait around each call cost 0.5-1 us an operation on the H200's host, a tenth of a small
    all_reduce (a launch probe, 2026-12-03: benchmarks/README.md). The native engine's next n
    operations as NCCL calls (``native_sequence``) are what its loop in C makes (``native_loop``):
    there even the binding's call is gone."""

    def __init__(self, calls: list[Callable[[], object]], ops: list[NativeOp] | None = None):
        self.calls, self.ops, self.next = calls, ops, 0
        self.native = ops is not None  # the native engine: ``ops`` are its operations, slot by slot

    def __call__(self) -> list:
        call = self.calls[self.next]
        self.next = (self.next + 1) % len(self.calls)
        works = call()
        return _NO_WORK if self.native else works  # type: ignore[return-value]

    def sequence(self, n: int) -> list[Callable[[], object]]:
        return [self.calls[j] for j in self._slots(n)]

    def native_sequence(self, n: int) -> list[NativeOp]:
        """The next n operations as the native engine's calls (for the compiled loop)."""
        assert self.ops is not None
        return [self.ops[j] for j in self._slots(n)]

    def _slots(self, n: int) -> list[int]:
        k, first = len(self.calls), self.next
        self.next = (first + n) % k
        return [(first + j) % k for j in range(n)]


GRAPH_LAUNCHES_MAX = 20  # nccl-tests -G 20: replays of the captured loop, launch cost amortised over all
GRAPH_TARGET_MS = 20.0  # ... but no more replays than needed to time this long (8 GiB would take minutes)


@dataclass(frozen=True)
class Settings:
    """How every point of a sweep is measured on this rank (the sweep spec's loop settings)."""

    iters: int  # timed operations per point
    warmup: int  # untimed operations before the timed loop
    check: bool  # run the untimed correctness pass and count wrong elements
    device: str  # "cuda" or "cpu": where the buffers live and how the loop is timed
    cuda_graph: bool = False  # capture the timed loop in a CUDA graph (nccl-tests -G); GPU only
    corrupt: bool = False  # damage this rank's result before the check (fault injection for tests)
    delay: tuple[int, float] | None = None
    """(every k-th timed operation, microseconds): sleep that long before issuing it (fault
    injection for tests: a rank that arrives late at every k-th operation)."""
    step_work: int = 0
    """Units of work (``step_work``) before each timed operation, the same on every rank; 0: none."""
    hot_buffers: bool = False
    """One pair of buffers for every operation of a point (--hot-buffers): data that stays in the
    cache between operations. Off, operations rotate over slots, as nccl-tests does."""
    gpu_stamps: bool = False
    """On a GPU, an event before and after each timed operation (per-operation stamps). Off, the loop
    is timed as nccl-tests times it, by one pair of events around it: two event records per
    operation add host time to a pipelined loop whose small sizes are bound by launches (nccl-tests'
    own per-iteration timing, -I, is asked for too). CPU loops always carry their stamps: two clock
    reads beside an operation of tens of microseconds."""


@dataclass(frozen=True)
class PointSpec:
    """One point: which collective, how its buffers are laid out, element type, reduction and root."""

    coll: Collective
    lay: Layout
    dtype: torch.dtype
    in_place: bool
    op_name: str | None = None  # "sum", "max", ... for reducing collectives (None otherwise)
    op: object | None = None  # the matching torch ReduceOp
    root: int = 0  # rooted collectives only (broadcast, reduce)


@dataclass(frozen=True)
class IterStamps:
    """When this rank arrived at and completed each timed operation: microseconds after
    ``start_us`` (this host's wall clock, ``clocks.now_us``), one entry per operation."""

    start_us: float
    arrive_us: list[float]
    done_us: list[float]


@dataclass
class Point:
    """What one rank measured at one point."""

    time_us: float
    wrong: int | None
    stamps: IterStamps | None = None  # None for a CUDA-graph loop
    loop: str | None = None  # the native engine's loop timed as nccl-tests: "c" (native_loop), "python"


class Timer:
    """Times a loop of operations and returns microseconds per operation."""

    def __init__(self, device: str):
        self.device = device

    def time_loop(
        self,
        run_once: Issue,
        iters: int,
        graph: Graph | None = None,
        launches: int = 1,
        delay: tuple[int, float] | None = None,
        work: StepWork | None = None,
        gpu_stamps: bool = True,
    ) -> tuple[float, IterStamps | None, str | None]:
        """(microseconds per operation, per-operation stamps, how the native engine's loop timed as
        nccl-tests times it made its calls: "c" or "python", else None). The stamps cost two clock
        reads (CPU) or two events (GPU) per operation, which neither serialises the pipelined GPU
        loop nor adds a measurable share to an operation of gloo (tens of microseconds at least)."""
        every, pause_s = (delay[0], delay[1] / 1e6) if delay else (0, 0.0)
        if self.device == "cuda":
            if graph is not None or not (gpu_stamps or delay or work):
                return _around(run_once, iters, graph, launches)
            anchor = torch.cuda.Event(enable_timing=True)
            anchor.record()
            anchor.synchronize()  # the stream was idle (_line_up): the event fired just now
            start_us = now_us()
            marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(iters)]
            for i, (a, d) in enumerate(marks):
                if every and i % every == every - 1:
                    time.sleep(pause_s)
                if work is not None:
                    work()  # queued on the stream: a slow GPU reaches the collective late
                a.record()
                _wait_all(run_once())  # on CUDA this only orders the streams; it does not block the host
                d.record()
            marks[-1][1].synchronize()
            arrive = [anchor.elapsed_time(a) * 1000.0 for a, _ in marks]
            done = [anchor.elapsed_time(d) * 1000.0 for _, d in marks]
            per_op = (done[-1] - arrive[0]) / iters
            if work is not None:  # the operations alone, not the work between them
                per_op = sum(d - a for a, d in zip(arrive, done, strict=True)) / iters
            return per_op, IterStamps(start_us, arrive, done), None
        clock = time.perf_counter_ns
        start_us, t0 = now_us(), clock()
        arrive, done = [0] * iters, [0] * iters
        for i in range(iters):
            if every and i % every == every - 1:
                time.sleep(pause_s)
            if work is not None:
                work()
            arrive[i] = clock()
            for w in run_once():
                w.wait()
            done[i] = clock()
        per_op = (done[-1] - t0) / 1000.0 / iters
        if work is not None:  # the operations alone, not the work between them
            per_op = sum(d - a for a, d in zip(arrive, done, strict=True)) / 1000.0 / iters
        rel = [(a - t0) / 1000.0 for a in arrive], [(d - t0) / 1000.0 for d in done]
        return per_op, IterStamps(start_us, *rel), None


def _around(
    run_once: Issue, iters: int, graph: Graph | None, launches: int
) -> tuple[float, None, str | None]:
    """(microseconds per operation, no stamps, the native engine's eager loop), timed as nccl-tests
    times it: the host's clock from just before the loop until the host has seen the stream finish
    (nccl-tests' ``timer`` around its loop and ``completeColl``), divided by the operations (-G: the
    graph of ``iters`` operations replayed ``launches`` times, time / (iters x launches)). Not CUDA
    events: events leave out the first launch's way to the GPU and the last completion's way back,
    which nccl-tests counts, so an event-timed loop reads a few tenths of a microsecond an operation
    faster than nccl-tests' at the smallest sizes for no difference in the fabric (src/common.cu,
    nccl-tests 2.19). The native engine's eager loop runs in C where it builds (``native_loop``: one C
    call an operation and the stream polled to its end, as nccl-tests; Python's call and wait cost
    more), its clock from its first call to the stream seen finished."""
    eager_native = run_once.native and graph is None
    compiled = native_loop.choose().loop if eager_native else None
    # made before the clock starts: the launches, or the C loop's array of calls
    todo = run_once.sequence(iters) if graph is None and compiled is None else []
    calls = compiled.prepare(run_once.native_sequence(iters)) if compiled is not None else None
    end = torch.cuda.Event()
    end.record()  # torch makes the CUDA event at its first record: outside the clock, as nccl-tests'
    end.synchronize()
    if compiled is not None:  # the calls and the wait for the stream, both in C (native_loop)
        return compiled.timed(calls, torch.cuda.current_stream().cuda_stream) / iters, None, "c"
    t0 = time.perf_counter()
    if graph is not None:
        for _ in range(launches):
            graph.replay()
        iters *= launches
    elif run_once.native:
        for launch in todo:
            launch()
    else:
        for issue in todo:
            _wait_all(issue())  # on CUDA this only orders the streams; it does not block the host
    end.record()
    end.synchronize()
    return (time.perf_counter() - t0) * 1e6 / iters, None, "python" if eager_native else None


class StepWork:
    """``units`` matmuls of a fixed size on the rank's device: the same work on every rank, so a
    rank whose CPU or GPU is slow (throttled, shared, clocked down) takes longer and arrives late,
    as in a training step. Fixed work, never calibrated per rank: calibrating would hide the slow
    one. On a GPU it is queued on the collective's stream, so it delays the kernel, not the host."""

    SIZE = {"cpu": 64, "cuda": 2048}

    def __init__(self, units: int, device: str):
        n = self.SIZE["cuda" if device == "cuda" else "cpu"]
        if device != "cuda":
            # one thread: the ranks of a host share its cores, and torch's default (a thread per
            # core, spinning between matmuls) made 64x64 matmuls 10x slower under load
            torch.set_num_threads(1)
        self.units = units
        self.a = torch.full((n, n), 1.0 / n, device=device)
        self.b = torch.empty_like(self.a)

    def __call__(self) -> None:
        for _ in range(self.units):
            torch.mm(self.a, self.a, out=self.b)


def _wait_all(works: list) -> None:
    """Wait for every handle. ProcessGroupNCCL returns no handle (None) for an operation issued with
    ``asyncOp=False``: it already runs on the caller's stream, so there is nothing to wait for."""
    for w in works:
        if w is not None:
            w.wait()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def slots_for(nbytes: int, reach: int, settings: Settings) -> int:
    """How many buffer slots a point of ``nbytes`` rotates over when the sweep's largest point of the
    collective has ``reach`` bytes: nccl-tests' ``maxbytes / size`` (so a point never holds more
    memory than the largest one does), no more than there are timed operations to use them."""
    if settings.hot_buffers or nbytes <= 0:
        return 1
    return max(1, min(settings.iters, reach // nbytes))


def measure(
    spec: PointSpec,
    pg: object,
    rank: int,
    nranks: int,
    settings: Settings,
    native: object | None = None,
    reach: int = 0,
) -> Point:
    """Measure one point on this rank (``rank`` of ``nranks`` in the process group ``pg``).

    ``native``: a ``collectives.native.NativeComm`` to issue the operations through NCCL directly
    (the native engine); None issues them through the torch process group ``pg``. Either way ``pg``
    lines the ranks up, and the loop is timed on torch's current stream. ``reach``: the bytes of the
    collective's largest point in this sweep, which sizes the rotation (``slots_for``)."""
    coll, lay, dtype, op_name, root = spec.coll, spec.lay, spec.dtype, spec.op_name, spec.root
    device, in_place = settings.device, spec.in_place
    slots = coll.buffers(lay, rank, dtype, device, in_place, slots_for(lay.nbytes, reach, settings))
    buf = slots[0]  # the one the correctness pass runs in and checks
    call = Call(pg=pg, rank=rank, nranks=nranks, op=spec.op, root=root)

    def on_stream(stream: int | None) -> Issue:
        """The operation, issued on ``stream``, each time in the next slot: torch picks its current
        stream itself; the native call is handed the raw handle and pointers once per slot, so the
        timed loop does no per-call lookup."""
        if native is None:
            return Issue([functools.partial(coll.issue, call, b) for b in slots])
        from netbench.collectives.native import NCCL_DTYPES, NCCL_OPS

        nc = NativeCall(
            comm=native.comm,
            stream=stream or 0,
            rank=rank,
            nranks=nranks,
            dtype=NCCL_DTYPES[str(dtype).removeprefix("torch.")],
            op=NCCL_OPS[op_name or "sum"],
            root=root,
        )
        ops = [coll.native(nc, b) for b in slots]
        return Issue([op.launcher(native.nccl) for op in ops], ops)

    run_once = on_stream(torch.cuda.current_stream().cuda_stream if device == "cuda" else None)

    # The untimed correctness pass runs first so the send buffer is filled once: the timed loop
    # then starts from real data (never uninitialised memory, which may hold slow denormals).
    for b in slots:
        fill_send(coll, b, lay, rank, nranks, op_name)
    wrong = None
    if settings.check:
        if coll.seeds_recv and not in_place:
            buf.recv.copy_(buf.send)
        _wait_all(run_once())
        _sync(device)
        if settings.corrupt and buf.recv.numel():
            flat = buf.recv.view(-1)
            flat[0] = flat[0] + 1 if dtype.is_floating_point else flat[0] ^ 1
        wrong = count_wrong(coll, buf, lay, rank, nranks, op_name, root)

    for _ in range(settings.warmup):
        _wait_all(run_once())
    _sync(device)

    graph, launches, replay_on = None, 1, None
    if settings.cuda_graph and device == "cuda":
        graph, launches, replay_on = _capture(on_stream, settings.iters)

    _line_up(pg, device)
    work = StepWork(settings.step_work, device) if settings.step_work else None
    with torch.cuda.stream(replay_on) if replay_on is not None else contextlib.nullcontext():
        time_us, stamps, loop = Timer(device).time_loop(run_once, settings.iters, graph, launches,
                                                        settings.delay, work, settings.gpu_stamps)
    if graph is not None:
        torch.cuda.current_stream().wait_stream(replay_on)
        graph.reset()  # its executable graph and memory go now, not whenever Python collects it
    return Point(time_us=time_us, wrong=wrong, stamps=stamps, loop=loop)


def _line_up(pg: object, device: str) -> None:
    """Barrier before the timed loop. On NCCL a one-element all-reduce on this rank's GPU, then a
    host sync: ``ProcessGroupNCCL.barrier()`` has to guess the device when no default group names
    one, and it only orders streams, while the CPU clock below must start after every rank arrived."""
    if device == "cuda":
        pg.allreduce([torch.zeros(1, device="cuda")]).wait()
        torch.cuda.synchronize()
        return
    _wait_all([pg.barrier()])


@functools.cache
def _capture_stream(device: int) -> torch.cuda.Stream:
    """The one stream every graph of this process is captured and replayed on (nccl-tests: one
    stream per GPU, cudaStreamNonBlocking as torch's pool streams are)."""
    return torch.cuda.Stream(device=device)


class RawGraph:
    """A CUDA graph made with CUDA's own runtime API (``cuda.bindings``), as nccl-tests makes one:
    cudaStreamBeginCapture (thread-local), cudaStreamEndCapture, cudaGraphInstantiate with no flags,
    cudaGraphLaunch on the current stream, both destroyed by ``reset``.

    Why not ``torch.cuda.CUDAGraph`` for the native engine: on the H200 a process that made its
    graphs of one-rank NCCL all_reduce with torch's class read 9.46 us an operation at 16 MiB for
    its first five graphs, then 9.82 from the sixth on (2 MiB: 2.50 -> 2.85), with or without a
    process group, the graph reset at once or not (one capture stream for all put the step off at 16
    MiB, but the next size was slow from its second graph); the same graphs
    made through CUDA's own API (CuPy, nccl-tests) stayed at 9.46 and 2.52 over twelve graphs each,
    and ``measure()`` with this class at 2.48-2.50 and 9.47-9.49 over 22 graphs of a sweep's sizes
    (graph probes of 2026-12-04; benchmarks/README.md "Graphs made with CUDA's own
    API"). The native engine's operations allocate nothing inside the capture, so torch's graph
    memory pool has nothing to do; the torch engine's graphs (torch operations) stay torch's."""

    def __init__(self, rt: Any, stream: int, capture: Callable[[], None]):
        self.rt, self.graph, self.exec = rt, None, None
        mode = rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
        _cuda_ok(rt, rt.cudaStreamBeginCapture(stream, mode), "cudaStreamBeginCapture")
        try:
            capture()
        finally:
            self.graph = _cuda_ok(rt, rt.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
        self.exec = _cuda_ok(rt, rt.cudaGraphInstantiate(self.graph, 0), "cudaGraphInstantiate")

    def replay(self) -> None:
        _cuda_ok(self.rt, self.rt.cudaGraphLaunch(self.exec, torch.cuda.current_stream().cuda_stream),
                 "cudaGraphLaunch")

    def reset(self) -> None:
        if self.exec is not None:
            self.rt.cudaGraphExecDestroy(self.exec)
        if self.graph is not None:
            self.rt.cudaGraphDestroy(self.graph)
        self.graph = self.exec = None


def _cuda_ok(rt: Any, result: tuple, what: str) -> Any:
    """The value of a ``cuda.bindings`` call's (error, value...) result, or RuntimeError naming it."""
    err, *value = result
    if err != rt.cudaError_t.cudaSuccess:
        raise RuntimeError(f"{what}: {err.name if hasattr(err, 'name') else err}")
    return value[0] if value else None


def _cudart() -> Any:
    """``cuda.bindings.runtime`` (installed with nccl4py's cu12/cu13 extras), or None where it does
    not import: torch's graph class is used then."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        return None
    return runtime


Graph = torch.cuda.CUDAGraph | RawGraph


def _capture(on_stream: Callable[[int | None], Issue], iters: int) -> tuple[Graph, int, torch.cuda.Stream]:
    """Capture ``iters`` operations into one CUDA graph (nccl-tests -G): launch cost leaves the loop.

    Returns the graph, how many times to replay it, and the stream to replay it on (the one it was
    captured on, as nccl-tests does). nccl-tests replays its graph ``-G`` times and
    divides by iters x launches, so the graph launch itself (a few us) is amortised over hundreds of
    operations; we do the same for short graphs and replay long ones once (their launch cost is noise).
    ``thread_local`` capture: ProcessGroupNCCL's watchdog thread queries events of earlier work while we
    capture, which the default ``global`` mode would count as an illegal call and fail the capture.
    The native engine's graphs are made with CUDA's own API where it imports (``RawGraph``).
    """
    stream = _capture_stream(torch.cuda.current_device())
    stream.wait_stream(torch.cuda.current_stream())
    run_once = on_stream(stream.cuda_stream)
    rt = _cudart() if run_once.native else None
    graph: Graph
    if rt is not None:
        graph = RawGraph(rt, stream.cuda_stream, lambda: [launch() for launch in run_once.sequence(iters)])
    else:
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            # one rank's in-place all_reduce launches nothing, and torch warns that the graph is empty
            # from inside the table; the time it gives is what the row says (the call's own cost)
            warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                for _ in range(iters):
                    _wait_all(run_once())
    with torch.cuda.stream(stream):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()  # one untimed replay so the first timed one is warm; its time sizes the replays
        end.record()
        end.synchronize()
    ms = max(start.elapsed_time(end), 1e-3)
    return graph, max(1, min(GRAPH_LAUNCHES_MAX, int(GRAPH_TARGET_MS / ms))), stream


def count_wrong(
    coll: Collective, buf: Buffers, lay: Layout, rank: int, nranks: int, op_name: str | None, root: int
) -> int:
    """Elements of this rank's result that differ from what the collective must produce.

    The expected values are periodic: within one segment of the result (the whole buffer, or one rank's
    chunk for all_gather/all_to_all) they repeat every 4 * nranks elements (see ``collectives.ops``). So
    one period is computed, on the device where the result lives, and the segment is compared against it
    as a (rows x period) view: a check costs one pass over the result, never a host-side expectation of
    every element (which for an 8 GiB GPU buffer would take minutes).
    """
    recv = buf.recv.reshape(-1)
    n = recv.numel()
    if (
        n == 0
        or coll.expected(torch.zeros(1, dtype=torch.int64), rank, nranks, lay.chunk, op_name, root) is None
    ):
        return 0
    tol = _tolerance(recv.dtype, op_name)
    dev = recv.device
    period = 4 * nranks
    seg = lay.chunk if coll.segmented and lay.chunk else n
    wrong = 0
    for a in range(0, n, seg):
        b = min(n, a + seg)
        rows, tail = divmod(b - a, period)
        width = period if rows else 0
        j = torch.arange(a, a + max(width, tail), dtype=torch.int64)
        exp = coll.expected(j, rank, nranks, lay.chunk, op_name, root).to(recv.dtype).to(dev)
        if rows:
            wrong += _mismatches(
                recv[a : a + rows * period].view(rows, period), exp[:period].unsqueeze(0), tol
            )
        if tail:
            wrong += _mismatches(recv[b - tail : b], exp[:tail], tol)
    return wrong


def _mismatches(got: torch.Tensor, exp: torch.Tensor, tol: float) -> int:
    if tol == 0.0:  # integer types wrap exactly as the collective's arithmetic does
        return int((got != exp).sum())
    return int((~torch.isclose(got.to(torch.float64), exp.to(torch.float64), rtol=tol, atol=tol)).sum())


def _tolerance(dtype: torch.dtype, op_name: str | None) -> float:
    if not dtype.is_floating_point or op_name != "avg":
        return 0.0  # small-integer data: sums, products, min and max are exact
    return {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(dtype, 1e-5)


def corrupts(rank: int, host: str) -> bool:
    """Whether this rank was told to corrupt its results (fault injection, tests only):
    ``NETBENCH_INJECT=corrupt:<rank>`` or ``corrupt:@<host>``, the latter every rank of that host in
    every launch of the run (a re-test numbers its ranks anew)."""
    spec = os.environ.get("NETBENCH_INJECT", "")
    for part in spec.split(","):
        kind, _, value = part.partition(":")
        if kind == "corrupt" and (value == f"@{host}" or (value.isdigit() and int(value) == rank)):
            return True
    return False


def delays(rank: int, host: str) -> tuple[int, float] | None:
    """Whether this rank was told to arrive late (fault injection, tests only):
    ``NETBENCH_INJECT=delay:@<host>:<every>:<us>`` (or ``delay:<rank>:...``) sleeps ``us``
    microseconds before every ``every``-th timed operation of that host's (or rank's) points."""
    for part in os.environ.get("NETBENCH_INJECT", "").split(","):
        bits = part.split(":")
        if len(bits) == 4 and bits[0] == "delay" and (bits[1] == f"@{host}" or bits[1] == str(rank)):
            try:
                every, us = int(bits[2]), float(bits[3])
            except ValueError:
                return None
            return (every, us) if every >= 1 and 0 <= us < 60e6 else None
    return None
