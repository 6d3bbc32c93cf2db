"""Why a CUDA-graph all_reduce at 2 and 16 MiB reads 0.26-0.28 us longer in netbench than in
nccl-tests -G 20 on the H200 (issue 28; benchmarks/README.md "Buffer rotation").

    python benchmarks/gpu/graph_probe.py [--rounds 7] [--sizes 2097152,16777216]

One process, one GPU: a torch ProcessGroupNCCL of one rank (as a rank has) and a 1-rank NCCL
communicator through nccl4py (netbench's native engine). Every variant captures 50 out-of-place
all_reduce operations over 50 buffer slots into one graph (both tools' -n 50), replays it 20 times
back to back (nccl-tests -G 20) and is timed by the host clock to the stream's end, divided by the
1,000 operations. Variants change one thing at a time from netbench's way to nccl-tests' way, and
run interleaved ``--rounds`` times (medians, min-max beside):

  harness       netbench's own ``measure()`` (--cuda-graph, rotation reach 1 GiB): the sweep's path
  nb            its layout by hand: two allocations of 50 slots; captured on a pool stream,
                replayed on torch's current stream after one warm replay (what ``_capture`` does)
  nt            the slots at the front of two allocations of the largest size (1 GiB), as
                nccl-tests' AllocateBuffs; otherwise as nb
  nt+stream     ... replayed on the capture's non-blocking stream (nccl-tests' own stream)
  nt+stream-warm ... and no warm replay before the timed ones (nccl-tests times the first)
  gap:D         one allocation, receive slots at send + D MiB: does the distance between the
                read and the written buffers decide the copy's speed?
  eager:nb / eager:nt  the same 1,000 operations launched one by one, not captured
  ncclmem       nccl-tests' allocation itself: two ncclMemAlloc of 1 GiB (nccl-tests 2.19 AllocateBuffs
                on NCCL >= 2.19: cuMem* physical memory, not cudaMalloc), slots at their front
  eager:ncclmem ... launched one by one
  cfg           nt, through a communicator made with nccl-tests' config (ncclCommInitRankConfig with
                nvlinkCentricSched = 1, nccl-tests 2.19 initComms on NCCL >= 2.28), not NCCL's defaults
  eager:cfg     ... launched one by one

Each variant's buffers' addresses are printed (offset receive - send, and modulo 2 MiB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import types
from collections.abc import Callable

import torch

OPS, LAUNCHES = 50, 20
MiB = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sizes", default=f"{2 * MiB},{16 * MiB}")
    ap.add_argument("--harness-only", action="store_true",
                    help="only netbench's measure(): nothing else allocated in the process")
    ap.add_argument("--eager", action="store_true",
                    help="--harness-only: measure() without graphs (the eager loop a sweep times)")
    ap.add_argument("--empty-cache", action="store_true",
                    help="torch.cuda.empty_cache() after each measure(): no cached segments between points")
    ap.add_argument("--bare-only", action="store_true",
                    help="only the nt variant (no measure()), round by round, with seconds since start")
    ap.add_argument("--no-pg", action="store_true",
                    help="no torch process group in the process (--bare-only)")
    ap.add_argument("--one-stream", action="store_true",
                    help="--bare-only: capture on one stream for every graph (else a new pool stream each)")
    ap.add_argument("--reset", action="store_true", help="--bare-only: graph.reset() right after timing")
    ap.add_argument("--sleep-first", type=float, default=0.0, help="seconds to sleep before the first round")
    ap.add_argument("--fork", action="store_true",
                    help="run everything in a fork of this process, made after importing torch and "
                         "before any CUDA call (as netbench's ranks are forks of the agent's zygote)")
    ap.add_argument("--rank-like", default="",
                    help="--harness-only: do what a sweep's rank does beside measure(), comma-separated: "
                         "caps (envinfo.capabilities with nccl4py), env (envinfo.collect_env), setdev "
                         "(torch.cuda.set_device), gather (rank._gather's all-gather after each point)")
    ap.add_argument("--gather-how", default="torch", choices=["torch", "torch-sync", "cpu-only", "native",
                                                               "allreduce", "barrier"],
                    help="--rank-like gather: torch (rank._gather: _allgather_base on the torch group, then "
                         ".cpu()), torch-sync (the same, synchronize instead of .cpu()), cpu-only (the "
                         "tensors and .cpu(), no collective), native (all_gather on the nccl4py "
                         "communicator, then .cpu()), allreduce (torch group's allreduce, then .cpu()), "
                         "barrier")
    ap.add_argument("--gaps", default="0,64,100,256,1024,1026",
                    help="MiB between send and receive (0: adjacent)")
    args = ap.parse_args()
    import torch.distributed as dist

    if args.fork:
        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            raise SystemExit(os.waitstatus_to_exitcode(status))
        print("(in a fork of a process that imported torch)")
    import nccl.bindings.nccl as nccl

    t_start = time.perf_counter()
    like = set(filter(None, args.rank_like.split(",")))
    if "caps" in like:
        from netbench.collectives.envinfo import capabilities
        print("caps:", capabilities(nccl4py=True))
    torch.cuda.init()
    if "setdev" in like:
        torch.cuda.set_device(0)
    if "env" in like:
        from netbench.collectives.envinfo import collect_env
        print("env:", {k: v for k, v in collect_env("cuda").items() if k != "env"})
    pg = None
    if not args.no_pg:
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda:0"))
        pg = dist.group.WORLD
        pg.allreduce([torch.ones(1, device="cuda")]).wait()
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    time.sleep(args.sleep_first)
    if args.bare_only:
        for nbytes in (int(s) for s in args.sizes.split(",")):
            s, r = torch.ones((1 << 30) // 4, device="cuda"), torch.empty((1 << 30) // 4, device="cuda")
            v = Variant([s.data_ptr() + i * nbytes for i in range(OPS)],
                        [r.data_ptr() + i * nbytes for i in range(OPS)])
            side = torch.cuda.Stream() if args.one_stream else None
            got = [(run(nccl, comm, v, nbytes // 4, side=side, reset=args.reset),
                    time.perf_counter() - t_start) for _ in range(args.rounds)]
            how = [w for w, on in (("no process group", pg is None), ("one stream", side is not None),
                                   ("reset", args.reset), ("forked", args.fork)) if on]
            print(f"{nbytes} B nt variant{' (' + ', '.join(how) + ')' if how else ''}, round by round "
                  f"(us @ s since start): {' '.join(f'{u:.3f}@{t:.2f}' for u, t in got)}")
        nccl.comm_destroy(comm)
        return
    cfg_comm = None
    try:
        cfg = nccl.Config()
        cfg.nvlink_centric_sched = 1
        cfg_comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), cfg.ptr)
    except Exception as e:  # noqa: BLE001 - an nccl4py or NCCL without the field: said, not fatal
        print(f"no communicator with nvlinkCentricSched: {type(e).__name__}: {e}")
    for nbytes in (int(s) for s in args.sizes.split(",")):
        gaps = [] if args.harness_only else [int(g) for g in args.gaps.split(",")]
        probe(nccl, comm, pg, nbytes, args.rounds, gaps, None if args.harness_only else cfg_comm,
              only=args.harness_only, empty=args.empty_cache,
              gather=args.gather_how if "gather" in like else "", eager=args.eager)
    nccl.comm_destroy(comm)
    if pg is not None:
        dist.destroy_process_group()


class Variant:
    """One way of laying out, capturing and replaying the 50 operations."""

    def __init__(self, sends: list[int], recvs: list[int], *, nt_stream: bool = False, warm: bool = True,
                 eager: bool = False, keep: tuple = (), comm: int | None = None):
        self.sends, self.recvs, self.nt_stream, self.warm, self.eager = sends, recvs, nt_stream, warm, eager
        self.comm = comm  # None: the probe's communicator (NCCL's default config)
        self.keep = keep  # the tensors the pointers point into

    def where(self) -> str:
        s, r = self.sends[0], self.recvs[0]
        return f"recv-send {(r - s) / MiB:+.1f} MiB, send%2MiB {s % (2 * MiB)}, recv%2MiB {r % (2 * MiB)}"


def probe(nccl, comm, pg, nbytes: int, rounds: int, gaps: list[int], cfg_comm: int | None,  # noqa: ANN001
          only: bool = False, empty: bool = False, gather: str = "", eager: bool = False) -> None:
    count = fl = nbytes // 4
    if only:
        vals = []
        for _ in range(rounds):
            vals.append(harness(nccl, comm, pg, nbytes, graphs=not eager))
            if gather:  # what collectives/rank.py does after every point: one all-gather of its figures
                _gather(nccl, comm, pg, vals[-1], gather)
            if empty:
                torch.cuda.empty_cache()
        print(f"{nbytes} B harness only{' eager' if eager else ''}"
              f"{' (empty_cache after each)' if empty else ''}"
              f"{f' (gather {gather} after each)' if gather else ''}, "
              f"round by round: {' '.join(f'{v:.3f}' for v in vals)}")
        return

    def two(numel: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(numel, device="cuda"), torch.empty(numel, device="cuda")

    def at_front(s: torch.Tensor, r: torch.Tensor) -> tuple[list[int], list[int]]:
        return ([s.data_ptr() + i * nbytes for i in range(OPS)],
                [r.data_ptr() + i * nbytes for i in range(OPS)])

    variants: dict[str, Variant | str] = {"harness": "harness"}
    s, r = two(fl * OPS)
    variants["nb"] = Variant(*at_front(s, r), keep=(s, r))
    variants["eager:nb"] = Variant(*at_front(s, r), eager=True, keep=(s, r))
    s, r = two((1 << 30) // 4)
    variants["nt"] = Variant(*at_front(s, r), keep=(s, r))
    variants["nt+stream"] = Variant(*at_front(s, r), nt_stream=True, keep=(s, r))
    variants["nt+stream-warm"] = Variant(*at_front(s, r), nt_stream=True, warm=False, keep=(s, r))
    variants["eager:nt"] = Variant(*at_front(s, r), eager=True, keep=(s, r))
    if cfg_comm is not None:
        variants["cfg"] = Variant(*at_front(s, r), keep=(s, r), comm=cfg_comm)
        variants["eager:cfg"] = Variant(*at_front(s, r), eager=True, keep=(s, r), comm=cfg_comm)
    ns, nr = nccl.mem_alloc(1 << 30), nccl.mem_alloc(1 << 30)
    front = ([ns + i * nbytes for i in range(OPS)], [nr + i * nbytes for i in range(OPS)])
    torch.cuda.synchronize()
    fill = torch.ones(OPS * nbytes // 4, device="cuda")
    _copy_to(nccl, ns, fill)
    variants["ncclmem"] = Variant(*front)
    variants["eager:ncclmem"] = Variant(*front, eager=True)
    for gap in gaps:
        d = gap * MiB if gap else OPS * nbytes
        if d < OPS * nbytes:
            continue  # the slots would overlap
        big = torch.ones((d + OPS * nbytes) // 4, device="cuda")
        b = big.data_ptr()
        variants[f"gap:{gap}"] = Variant([b + i * nbytes for i in range(OPS)],
                                         [b + d + i * nbytes for i in range(OPS)], keep=(big,))
    got: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, v in variants.items():  # interleaved, so drift hits each alike
            if isinstance(v, str):
                try:
                    got[name].append(harness(nccl, comm, pg, nbytes))
                except Exception as e:  # noqa: BLE001 - a variant this torch cannot run is named, not fatal
                    print(f"{name}: {type(e).__name__}: {e}")
                    got[name].append(float("nan"))
            else:
                got[name].append(run(nccl, v.comm if v.comm is not None else comm, v, count))
    print(f"\n{nbytes} B all_reduce, {OPS} ops x {LAUNCHES} launches, {rounds} rounds: "
          "us/op median [min-max]")
    for name, vals in got.items():
        v = variants[name]
        where = v.where() if isinstance(v, Variant) else "netbench's own buffers, the sweep's code"
        print(f"{name:<15} {statistics.median(vals):8.3f} [{min(vals):.3f}-{max(vals):.3f}]  {where}")
    variants.clear()
    torch.cuda.synchronize()
    nccl.mem_free(ns)
    nccl.mem_free(nr)


def _gather(nccl, comm, pg, value: float, how: str) -> None:  # noqa: ANN001
    stats = torch.tensor([value] + [0.0] * 105, dtype=torch.float64, device="cuda")
    gathered = torch.empty(106, dtype=torch.float64, device="cuda")
    if how in ("torch", "torch-sync"):
        pg._allgather_base(gathered, stats).wait()
    elif how == "allreduce":
        pg.allreduce([stats]).wait()
    elif how == "barrier":
        pg.barrier().wait()
    elif how == "native":
        stream = torch.cuda.current_stream().cuda_stream
        nccl.all_gather(stats.data_ptr(), gathered.data_ptr(), 106, 8, comm, stream)  # 8: ncclFloat64
    if how == "torch-sync":
        torch.cuda.synchronize()
    else:
        gathered.cpu().numpy()


def _copy_to(nccl, ptr: int, src: torch.Tensor) -> None:  # noqa: ANN001
    """Fill NCCL-allocated memory from a tensor (a 1-rank out-of-place all_reduce is a copy)."""
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    nccl.all_reduce(src.data_ptr(), ptr, src.numel(), 7, 0, comm, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    nccl.comm_destroy(comm)


def run(nccl, comm, v: Variant, count: int, side: torch.cuda.Stream | None = None,  # noqa: ANN001
        reset: bool = False) -> float:
    """Capture, replay and time one variant (a fresh graph each time, as each sweep point makes one),
    on ``side`` or a new pool stream (cudaStreamNonBlocking); ``reset``: free the graph right away."""
    side = side or torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())

    def issue(stream: int) -> list[Callable[[], object]]:
        return [lambda s=s, r=r: nccl.all_reduce(s, r, count, 7, 0, comm, stream)
                for s, r in zip(v.sends, v.recvs, strict=True)]

    if v.eager:
        cur = torch.cuda.current_stream()
        todo = issue(cur.cuda_stream)
        for f in todo[:10]:
            f()  # warm-up
        torch.cuda.synchronize()
        plan = todo * LAUNCHES
        end = torch.cuda.Event()
        end.record()
        end.synchronize()
        t0 = time.perf_counter()
        for f in plan:
            f()
        end.record()
        end.synchronize()
        return (time.perf_counter() - t0) * 1e6 / len(plan)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
        for f in issue(side.cuda_stream):
            f()
    torch.cuda.current_stream().wait_stream(side)
    on = side if v.nt_stream else torch.cuda.current_stream()
    with torch.cuda.stream(on):
        if v.warm:
            graph.replay()
        end = torch.cuda.Event()
        end.record()
        end.synchronize()
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            graph.replay()
        end.record()
        end.synchronize()
        took = (time.perf_counter() - t0) * 1e6 / (OPS * LAUNCHES)
    torch.cuda.synchronize()
    if reset:
        graph.reset()
    return took


def harness(nccl, comm, pg, nbytes: int, graphs: bool = True) -> float:  # noqa: ANN001
    from netbench.collectives.dtypes import reduce_op
    from netbench.collectives.harness import PointSpec, Settings, measure
    from netbench.collectives.ops import get_collective

    coll = get_collective("all_reduce")
    spec = PointSpec(coll, coll.layout(nbytes, 4, 1), torch.float32, False, "sum", reduce_op("sum"), 0)
    st = Settings(iters=OPS, warmup=10, check=False, device="cuda", cuda_graph=graphs)
    native = types.SimpleNamespace(nccl=nccl, comm=comm)
    return measure(spec, pg, 0, 1, st, native=native, reach=1 << 30).time_us


if __name__ == "__main__":
    main()
