"""The collectives: each one a small declarative record, nccl-tests' ``testColl`` in Python.

A ``Collective`` says how many bytes and elements a size means (nccl-tests' getCollByteCount), the
bus-bandwidth factor (nccl-tests doc/PERFORMANCE.md), how to issue the call on a process-group
backend, and what every element of the result must be (for the untimed check). It never times or
loops: ``collectives.harness`` does that once for all of them.

Sizes follow nccl-tests: for all_gather the size is the gathered (receive) buffer, n * send; for
reduce_scatter it is the send buffer, n * receive; for all_to_all one rank's send buffer; for the
others the buffer itself. A size that is not a multiple of what the collective needs is rounded down,
as nccl-tests does, and rows carry the rounded size.

The check uses fill(rank, index): small integers (1..4), so sums over up to 64 ranks are exact even in
bfloat16 and the check can demand exact equality; for ``prod`` every element is 1 except one rank's 2,
so products never overflow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from netbench.collectives.names import measured

if TYPE_CHECKING:
    import torch
# torch is imported where a rank uses it, not here: the coordinator, the planner and the simulator
# read these records (sizes, bus factors, what runs), and a sweep refusing a bad --dtype must not
# pay torch's 1.5-2.5 s import first.

Work = object  # torch.distributed Work handle


@dataclass(frozen=True)
class Layout:
    """Buffers for one measurement: element counts per rank and the size nccl-tests would print."""

    nbytes: int  # S: the "size" column, after rounding
    count: int  # the "count" column (nccl-tests prints elements of the size)
    send_numel: int
    recv_numel: int
    chunk: int  # elements per rank chunk (all_gather, reduce_scatter, all_to_all), else count


@dataclass
class Buffers:
    send: torch.Tensor
    recv: torch.Tensor


@dataclass(frozen=True)
class Call:
    """Everything the issuing function needs besides buffers."""

    pg: object  # a torch.distributed backend (ProcessGroupGloo / ProcessGroupNCCL)
    rank: int
    nranks: int  # ranks in the process group
    op: object | None  # torch ReduceOp
    root: int
    # options objects built on first use and reused by every iteration of the point (building one is
    # a few pybind calls: microseconds that would otherwise land in the timed loop of small messages)
    cache: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class NativeCall:
    """Everything a native (NCCL-direct) call needs besides buffers: raw handles, no torch objects
    and nothing of nccl4py (CPU users must not pay for it). ``comm`` the communicator's handle (an
    ``ncclComm_t`` as an int); ``stream`` the raw ``cudaStream_t`` the operations go to (torch's
    current stream: torch owns buffers and streams)."""

    comm: int
    stream: int
    rank: int
    nranks: int
    dtype: int  # ncclDataType_t
    op: int  # ncclRedOp_t (reducing collectives)
    root: int


def _fill(rank: torch.Tensor | int, idx: torch.Tensor, n: int, op: str | None) -> torch.Tensor:
    """The value rank ``rank`` puts at position ``idx`` of its send buffer (float64)."""
    import torch

    if op == "prod":
        return 1.0 + (idx % n == rank).to(torch.float64)
    return ((idx + rank) % 4 + 1).to(torch.float64)


def _reduce_over_ranks(n: int, idx: torch.Tensor, op: str | None) -> torch.Tensor:
    import torch

    acc = _fill(0, idx, n, op)
    for r in range(1, n):
        v = _fill(r, idx, n, op)
        if op in ("sum", "avg"):
            acc = acc + v
        elif op == "prod":
            acc = acc * v
        elif op == "max":
            acc = torch.maximum(acc, v)
        elif op == "min":
            acc = torch.minimum(acc, v)
    if op == "avg":
        acc = acc / n
    return acc


# --- byte accounting -----------------------------------------------------------------------------
def _layout_plain(nbytes: int, esize: int, n: int) -> Layout:
    count = nbytes // esize
    return Layout(count * esize, count, count, count, count)


def _chunk(nbytes: int, esize: int, n: int) -> int:
    """Elements of one rank's chunk, as nccl-tests counts them: ``(count/nranks) & -(16/eltSize)``,
    a whole number of 16-byte lines (all_gather.cu, reduce_scatter.cu, alltoall.cu), so the sizes
    of these collectives are the sizes nccl-tests prints."""
    per_line = max(1, 16 // esize)
    return nbytes // esize // n // per_line * per_line


def _layout_gather(nbytes: int, esize: int, n: int) -> Layout:
    chunk = _chunk(nbytes, esize, n)
    return Layout(chunk * n * esize, chunk * n, chunk, chunk * n, chunk)


def _layout_scatter(nbytes: int, esize: int, n: int) -> Layout:
    chunk = _chunk(nbytes, esize, n)
    return Layout(chunk * n * esize, chunk * n, chunk * n, chunk, chunk)


def _layout_alltoall(nbytes: int, esize: int, n: int) -> Layout:
    chunk = _chunk(nbytes, esize, n)
    return Layout(chunk * n * esize, chunk * n, chunk * n, chunk * n, chunk)


# --- calls ----------------------------------------------------------------------------------------
def _opts(c: Call, cls_name: str, tensor: torch.Tensor, **fields: object) -> object:
    """Options for a backend call. On a GPU ``asyncOp=False``: ProcessGroupNCCL then launches on the
    caller's current stream, back to back like nccl-tests, instead of on its own stream fenced by two
    cross-stream event waits per operation (extra latency, and extra nodes in a captured graph).
    Gloo keeps its defaults, so CPU behaviour is unchanged."""
    opts = c.cache.get(cls_name)
    if opts is not None:
        return opts
    import torch
    import torch.distributed as dist

    cls = getattr(dist, cls_name, None) or getattr(torch._C._distributed_c10d, cls_name)
    opts = cls()
    for key, value in fields.items():
        setattr(opts, key, value)
    if tensor.is_cuda and hasattr(opts, "asyncOp"):
        opts.asyncOp = False
    c.cache[cls_name] = opts
    return opts


def _all_reduce(c: Call, b: Buffers) -> list[Work]:
    # torch.distributed has no out-of-place all_reduce: it reduces ``recv`` in place. The harness
    # copies send -> recv before the (untimed) check; timed iterations reduce recv again and again.
    return [c.pg.allreduce([b.recv], _opts(c, "AllreduceOptions", b.recv, reduceOp=c.op))]


def _all_gather(c: Call, b: Buffers) -> list[Work]:
    return [c.pg._allgather_base(b.recv, b.send, _opts(c, "AllgatherOptions", b.recv))]


def _reduce_scatter(c: Call, b: Buffers) -> list[Work]:
    opts = _opts(c, "ReduceScatterOptions", b.recv, reduceOp=c.op)
    return [c.pg._reduce_scatter_base(b.recv, b.send, opts)]


def _broadcast(c: Call, b: Buffers) -> list[Work]:
    return [c.pg.broadcast([b.recv], _opts(c, "BroadcastOptions", b.recv, rootRank=c.root, rootTensor=0))]


def _reduce(c: Call, b: Buffers) -> list[Work]:
    return [
        c.pg.reduce([b.recv], _opts(c, "ReduceOptions", b.recv, reduceOp=c.op, rootRank=c.root, rootTensor=0))
    ]


def _all_to_all(c: Call, b: Buffers) -> list[Work]:
    return [c.pg.alltoall_base(b.recv, b.send, [], [], _opts(c, "AllToAllOptions", b.recv))]


def _sendrecv(c: Call, b: Buffers) -> list[Work]:
    """Ring exchange: send to rank+1, receive from rank-1, both in flight at once (nccl-tests sendrecv).

    On NCCL the pair is coalesced (ncclGroupStart/End, as nccl-tests issues it): one fused kernel on the
    group's communicator, rather than two launches on per-peer streams and a lazily built 2-rank
    communicator for each peer."""
    if c.nranks == 1:
        b.recv.copy_(b.send)
        return []
    nxt, prv = (c.rank + 1) % c.nranks, (c.rank - 1) % c.nranks
    if b.send.is_cuda and hasattr(c.pg, "_start_coalescing"):
        c.pg._start_coalescing()
        c.pg.send([b.send], nxt, 0)
        c.pg.recv([b.recv], prv, 0)
        return [c.pg._end_coalescing()]
    return [c.pg.send([b.send], nxt, 0), c.pg.recv([b.recv], prv, 0)]


# --- native calls (nccl4py on raw pointers, as nccl-tests issues them) ------------------------------
# Each describes one operation on ``c.stream`` as the NCCL calls it makes: pointers, counts and
# handles are resolved once per point, so a timed iteration is one call into NCCL (the host cost per
# operation is what separates an eager loop from nccl-tests at small sizes). The timed eager loop
# makes those calls from C (``native_loop``); everything else calls the binding (``launcher``).
# Unlike torch, all_reduce out of place really reads ``send`` and writes ``recv`` (nccl-tests' copy).
Launch = Callable[[], object]


@dataclass(frozen=True)
class NativeOp:
    """One operation of the native engine: the calls it makes, in order, each as nccl4py's binding
    function name and its raw arguments (ints: pointers, counts, enums, handles)."""

    calls: tuple[tuple[str, tuple[int, ...]], ...]

    def launcher(self, nccl: object) -> Launch:
        """The operation through the binding: one bound call, or the calls one after another."""
        fns = [functools.partial(getattr(nccl, name), *args) for name, args in self.calls]
        if len(fns) == 1:
            return fns[0]

        def launch() -> None:
            for fn in fns:
                fn()

        return launch


def _n_all_reduce(c: NativeCall, b: Buffers) -> NativeOp:
    args = (b.send.data_ptr(), b.recv.data_ptr(), b.recv.numel(), c.dtype, c.op, c.comm, c.stream)
    return NativeOp((("all_reduce", args),))


def _n_all_gather(c: NativeCall, b: Buffers) -> NativeOp:
    args = (b.send.data_ptr(), b.recv.data_ptr(), b.send.numel(), c.dtype, c.comm, c.stream)
    return NativeOp((("all_gather", args),))


def _n_reduce_scatter(c: NativeCall, b: Buffers) -> NativeOp:
    args = (b.send.data_ptr(), b.recv.data_ptr(), b.recv.numel(), c.dtype, c.op, c.comm, c.stream)
    return NativeOp((("reduce_scatter", args),))


def _n_broadcast(c: NativeCall, b: Buffers) -> NativeOp:
    args = (b.send.data_ptr(), b.recv.data_ptr(), b.recv.numel(), c.dtype, c.root, c.comm, c.stream)
    return NativeOp((("broadcast", args),))


def _n_reduce(c: NativeCall, b: Buffers) -> NativeOp:
    args = (b.send.data_ptr(), b.recv.data_ptr(), b.recv.numel(), c.dtype, c.op, c.root, c.comm, c.stream)
    return NativeOp((("reduce", args),))


def _grouped(calls: list[tuple[str, tuple[int, ...]]]) -> NativeOp:
    """Point-to-point calls inside one NCCL group call, as nccl-tests issues them (one fused launch)."""
    return NativeOp((("group_start", ()), *calls, ("group_end", ())))


def _n_all_to_all(c: NativeCall, b: Buffers) -> NativeOp:
    """One send and one receive per peer in a group (nccl-tests' alltoall)."""
    chunk = b.send.numel() // c.nranks
    step = chunk * b.send.element_size()
    s, r = b.send.data_ptr(), b.recv.data_ptr()
    calls = []
    for peer in range(c.nranks):
        calls.append(("send", (s + peer * step, chunk, c.dtype, peer, c.comm, c.stream)))
        calls.append(("recv", (r + peer * step, chunk, c.dtype, peer, c.comm, c.stream)))
    return _grouped(calls)


def _n_sendrecv(c: NativeCall, b: Buffers) -> NativeOp:
    """Send to rank+1 and receive from rank-1 in one group (nccl-tests sendrecv)."""
    n = b.send.numel()
    nxt, prv = (c.rank + 1) % c.nranks, (c.rank - 1) % c.nranks
    return _grouped([
        ("send", (b.send.data_ptr(), n, c.dtype, nxt, c.comm, c.stream)),
        ("recv", (b.recv.data_ptr(), n, c.dtype, prv, c.comm, c.stream)),
    ])


# --- expected results: value of recv[j] on `rank` ---------------------------------------------------
Expected = Callable[["torch.Tensor", int, int, int, str | None, int], "torch.Tensor | None"]


def _exp_all_reduce(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _reduce_over_ranks(n, j, op)


def _exp_all_gather(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _fill(j // chunk, j % chunk, n, op)


def _exp_reduce_scatter(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _reduce_over_ranks(n, rank * chunk + j, op)


def _exp_broadcast(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _fill(root, j, n, op)


def _exp_reduce(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _reduce_over_ranks(n, j, op) if rank == root else None


def _exp_all_to_all(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _fill(j // chunk, rank * chunk + j % chunk, n, op)


def _exp_sendrecv(j, rank, n, chunk, op, root):  # noqa: ANN001, ANN202
    return _fill((rank - 1) % n, j, n, op)


@dataclass(frozen=True)
class Collective:
    """One collective, declared. ``busbw = algbw * bus_factor(n)`` (nccl-tests PERFORMANCE.md)."""

    name: str
    layout: Callable[[int, int, int], Layout]
    bus_factor: Callable[[int], float]
    issue: Callable[[Call, Buffers], list[Work]]
    expected: Expected
    native: Callable[[NativeCall, Buffers], NativeOp]  # the same operation through NCCL directly
    reduces: bool = False
    rooted: bool = False
    out_of_place: bool = True
    in_place: bool = True
    # in-place views: which part of which buffer the other one is
    in_place_view: str = "same"  # same | send_is_recv_chunk | recv_is_send_chunk
    # True when the call works in place on ``recv``, so out-of-place must start from a copy of send
    seeds_recv: bool = False
    # True when the result is one chunk per rank (expected values restart at every chunk boundary)
    segmented: bool = False
    # NCCL called directly has an out-of-place form where torch has none (broadcast, reduce)
    native_out_of_place: bool = False

    def runs(self, in_place: bool, engine: str = "torch", nranks: int = 2) -> bool:
        """Whether the variant can be measured on that engine in a group of ``nranks`` (the table
        prints N/A where it cannot)."""
        return self.unmeasured(in_place, engine, nranks) is None

    def unmeasured(self, in_place: bool, engine: str = "torch", nranks: int = 2) -> str | None:
        """Why the variant cannot be measured there (a line for the table), else None."""
        if in_place:
            return None if self.in_place else f"{self.name} has no in-place form"
        if engine == "nccl" and self.native_out_of_place:
            return None
        if not self.out_of_place:
            return f"torch has no out-of-place {self.name} (NCCL called directly, --engine nccl, has)"
        if engine == "torch" and self.seeds_recv and nranks == 1:
            # torch reduces ``recv`` in place; on one rank NCCL's in-place all_reduce does no work at
            # all, so the out-of-place column would print a no-op's time (nccl-tests' is a copy)
            return (f"torch has no out-of-place {self.name}, and one rank's in-place one does no work "
                    "(NCCL called directly, --engine nccl, times its out-of-place copy)")
        return None

    def buffers(
        self, lay: Layout, rank: int, dtype: torch.dtype, device: str, in_place: bool, slots: int = 1
    ) -> list[Buffers]:
        """``slots`` buffer sets for one point, laid out as nccl-tests lays its offsets out: one send
        and one receive allocation, slot i at offset i x the slot's size in each (the collective's
        in-place views apply within a slot)."""
        import torch

        def whole(numel: int) -> torch.Tensor:
            return torch.empty(numel * slots, dtype=dtype, device=device)

        def slot(t: torch.Tensor, numel: int, i: int) -> torch.Tensor:
            return t[i * numel : (i + 1) * numel]

        mine = slice(rank * lay.chunk, (rank + 1) * lay.chunk)
        if not in_place:
            send, recv = whole(lay.send_numel), whole(lay.recv_numel)
            return [Buffers(slot(send, lay.send_numel, i), slot(recv, lay.recv_numel, i))
                    for i in range(slots)]
        if self.in_place_view == "send_is_recv_chunk":
            recv = whole(lay.recv_numel)
            return [Buffers(slot(recv, lay.recv_numel, i)[mine], slot(recv, lay.recv_numel, i))
                    for i in range(slots)]
        send = whole(lay.send_numel)
        if self.in_place_view == "recv_is_send_chunk":
            return [Buffers(slot(send, lay.send_numel, i), slot(send, lay.send_numel, i)[mine])
                    for i in range(slots)]
        return [Buffers(slot(send, lay.send_numel, i), slot(send, lay.send_numel, i)) for i in range(slots)]


def _ring(n: int) -> float:
    return 2.0 * (n - 1) / n


def _share(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in [
        Collective(
            "all_reduce",
            _layout_plain,
            _ring,
            _all_reduce,
            _exp_all_reduce,
            _n_all_reduce,
            reduces=True,
            seeds_recv=True,
        ),
        Collective(
            "all_gather",
            _layout_gather,
            _share,
            _all_gather,
            _exp_all_gather,
            _n_all_gather,
            in_place_view="send_is_recv_chunk",
            segmented=True,
        ),
        Collective(
            "reduce_scatter",
            _layout_scatter,
            _share,
            _reduce_scatter,
            _exp_reduce_scatter,
            _n_reduce_scatter,
            reduces=True,
            in_place_view="recv_is_send_chunk",
        ),
        # torch's broadcast/reduce work in place on one tensor: no out-of-place variant through torch.
        Collective(
            "broadcast",
            _layout_plain,
            _one,
            _broadcast,
            _exp_broadcast,
            _n_broadcast,
            rooted=True,
            out_of_place=False,
            native_out_of_place=True,
        ),
        Collective(
            "reduce",
            _layout_plain,
            _one,
            _reduce,
            _exp_reduce,
            _n_reduce,
            reduces=True,
            rooted=True,
            out_of_place=False,
            native_out_of_place=True,
        ),
        # NCCL has no in-place all-to-all (and torch's all_to_all_single needs two buffers).
        Collective(
            "all_to_all",
            _layout_alltoall,
            _share,
            _all_to_all,
            _exp_all_to_all,
            _n_all_to_all,
            in_place=False,
            segmented=True,
        ),
        Collective("sendrecv", _layout_plain, _one, _sendrecv, _exp_sendrecv, _n_sendrecv, in_place=False),
    ]
}
DEFAULT_COLLECTIVES = ("all_reduce", "all_gather")


def get_collective(name: str) -> Collective:
    return COLLECTIVES[measured(name)]


def fill_send(coll: Collective, buf: Buffers, lay: Layout, rank: int, n: int, op: str | None) -> None:
    """Write fill(rank, i) into the send buffer (and the in-place recv where they alias).

    fill() is periodic in i (period 4 * n), so one period is computed and tiled on the device:
    filling a multi-GiB buffer costs a copy, not a host-side arange over every element.
    """
    import torch

    numel = buf.send.numel()
    if numel == 0:
        return
    period = 4 * n
    base = _fill(rank, torch.arange(period, dtype=torch.int64), n, op).to(buf.send.dtype)
    base = base.to(buf.send.device)
    whole = numel - numel % period
    if whole:  # broadcast one period over a (rows x period) view: no full-size temporary
        buf.send[:whole].view(-1, period).copy_(base)
    if numel > whole:
        buf.send[whole:].copy_(base[: numel - whole])


def bandwidth(nbytes: int, time_us: float, n: int, coll: Collective) -> tuple[float, float]:
    """(algbw, busbw) in decimal GB/s, as nccl-tests: algbw = S / 1e9 / t."""
    if time_us <= 0:
        return 0.0, 0.0
    algbw = nbytes / 1e9 / (time_us / 1e6)
    return algbw, algbw * coll.bus_factor(n)
