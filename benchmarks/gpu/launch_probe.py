"""Where a small eager NCCL operation's microseconds go, on one GPU (issue 28).

    python benchmarks/gpu/launch_probe.py [--rounds 5] [--iters 1000]

One 1-rank NCCL communicator made through nccl4py, as netbench's nccl engine makes it, and loops of
``all_reduce`` on raw pointers timed by one pair of CUDA events (as netbench and nccl-tests time a
loop), for these variants, interleaved ``--rounds`` times (medians printed, min-max beside):
  hot        one send/receive pair reused by every operation (netbench before issue 28, --hot-buffers)
  rot50      operations rotate over 50 pairs (the default: nccl-tests' offsets, 50 iterations)
  rot1000    over 1,000 pairs
  inplace    send == receive (NCCL does nothing on one rank: the call's own cost)
  stamps     hot, plus an event recorded before and after each operation (--per-iter)
  bare       the binding called directly, no functools.partial / itertools.cycle wrapper
  hot50      hot, timed in loops of 50 operations (the sweep's -n 50), the median of 20 loops
  nonblock   hot on a non-blocking stream of its own (nccl-tests' cudaStreamNonBlocking stream)
For each: GPU time per operation, and the host's time per call (perf_counter around the issuing loop).

``--harness`` then makes a torch ProcessGroupNCCL in the same process (a 1-rank world, as a rank
has beside its native communicator) and times the same size through netbench's own
``collectives.harness.measure`` (the sweep's code path, native engine, 50 and 1,000 iterations;
timed three ways, interleaved: the host clock as nccl-tests (the harness), CUDA events around the
loop, and the host clock with the end event made before the clock starts), beside the bare
loops again: what the harness adds, in one process, and what the process group changes.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--sizes", default="8,16777216")
    ap.add_argument("--harness", action="store_true", help="also time netbench's harness (see above)")
    args = ap.parse_args()
    import nccl.bindings.nccl as nccl

    torch.cuda.init()
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    stream = torch.cuda.current_stream().cuda_stream
    keep: list = []

    def pairs(k: int, nbytes: int) -> list[tuple[int, int]]:
        out = []
        for _ in range(k):
            s, r = torch.ones(nbytes // 4, device="cuda"), torch.empty(nbytes // 4, device="cuda")
            keep.append((s, r))
            out.append((s.data_ptr(), r.data_ptr()))
        return out

    def calls(ptrs: list[tuple[int, int]], count: int) -> list:
        return [functools.partial(nccl.all_reduce, s, r, count, 7, 0, comm, stream) for s, r in ptrs]

    def timed(run, n: int, stamps: bool = False) -> tuple[float, float]:
        for _ in range(20):
            run()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(n if stamps else 0)]
        t0 = time.perf_counter()
        start.record()
        if stamps:
            for a, d in marks:
                a.record()
                run()
                d.record()
        else:
            for _ in range(n):
                run()
        host = (time.perf_counter() - t0) / n * 1e6
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000 / n, host

    def probe(nbytes: int) -> None:
        count = nbytes // 4
        hot = calls(pairs(1, nbytes), count)
        rot50 = calls(pairs(50, nbytes), count)
        rot1000 = calls(pairs(1000, nbytes), count) if nbytes <= 1 << 20 else None
        s0, r0 = keep[0][0].data_ptr(), keep[0][1].data_ptr()

        def cycling(fns: list):  # noqa: ANN202
            it = itertools.cycle(fns)
            return lambda: next(it)()

        side = torch.cuda.Stream()  # torch's pool streams are cudaStreamNonBlocking
        nonblock = functools.partial(nccl.all_reduce, s0, r0, count, 7, 0, comm, side.cuda_stream)
        variants = {
            "hot": hot[0],
            "hot50": ("n50", hot[0]),
            "nonblock": ("side", nonblock),
            "rot50": cycling(rot50),
            "inplace": functools.partial(nccl.all_reduce, r0, r0, count, 7, 0, comm, stream),
            "stamps": None,
            "bare": lambda: nccl.all_reduce(s0, r0, count, 7, 0, comm, stream),
        }
        if rot1000:
            variants["rot1000"] = cycling(rot1000)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        for _ in range(args.rounds):
            for name, run in variants.items():
                if isinstance(run, tuple) and run[0] == "n50":
                    loops = [timed(run[1], 50) for _ in range(20)]
                    got[name].append((statistics.median(v[0] for v in loops),
                                      statistics.median(v[1] for v in loops)))
                    continue
                if isinstance(run, tuple):  # on the side stream: its events there too
                    with torch.cuda.stream(side):
                        got[name].append(timed(run[1], args.iters))
                    continue
                stamped = run is None
                got[name].append(timed(hot[0] if stamped else run, args.iters, stamps=stamped))
        print(f"\n{nbytes} B, {args.iters} operations x {args.rounds} rounds: median [min-max]")
        print(f"{'variant':<9} {'GPU us/op':>22} {'host us/call':>22}")
        for name, vals in got.items():
            g, h = [v[0] for v in vals], [v[1] for v in vals]
            print(f"{name:<9} {statistics.median(g):9.3f} [{min(g):.2f}-{max(g):.2f}]"
                  f" {statistics.median(h):9.3f} [{min(h):.2f}-{max(h):.2f}]")
        keep.clear()

    for nbytes in (int(s) for s in args.sizes.split(",")):
        probe(nbytes)
    if args.harness:
        harness(nccl, comm, args.rounds, [int(s) for s in args.sizes.split(",")], probe)
    nccl.comm_destroy(comm)


def harness(nccl, comm, rounds: int, sizes: list[int], probe) -> None:  # noqa: ANN001
    """netbench's ``measure`` (native engine, out of place, rotating as the sweep does) in this
    process, after a torch ProcessGroupNCCL of one rank exists beside the native communicator."""
    import os
    import tempfile
    import types

    import torch.distributed as dist
    from netbench.collectives.dtypes import reduce_op
    from netbench.collectives.harness import PointSpec, Settings, measure
    from netbench.collectives.ops import get_collective

    store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda:0"))
    pg = dist.group.WORLD
    pg.allreduce([torch.ones(1, device="cuda")]).wait()  # its communicator made, as a rank's is
    native = types.SimpleNamespace(nccl=nccl, comm=comm)
    coll = get_collective("all_reduce")
    print("\nwith a ProcessGroupNCCL beside the native communicator:")
    for nbytes in sizes:
        probe(nbytes)  # the bare loops again, the process group alive
    from netbench.collectives import harness as h

    def events(run_once, iters, graph, launches):  # noqa: ANN001, ANN202 - the loop timed by events
        todo = run_once.sequence(iters)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for launch in todo:
            launch()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / iters

    def primed(run_once, iters, graph, launches):  # noqa: ANN001, ANN202 - host clock, event made first
        todo = run_once.sequence(iters)
        end = torch.cuda.Event()
        end.record()  # torch makes the CUDA event at its first record: outside the clock
        end.synchronize()
        t0 = time.perf_counter()
        for launch in todo:
            launch()
        end.record()
        end.synchronize()
        return (time.perf_counter() - t0) * 1e6 / iters

    timers = {"host": h._around, "events": events, "primed": primed}
    for nbytes in sizes:
        lay = coll.layout(nbytes, 4, 1)
        spec = PointSpec(coll, lay, torch.float32, False, "sum", reduce_op("sum"), 0)
        for iters in (50, 1000):
            st = Settings(iters=iters, warmup=10, check=False, device="cuda")
            got: dict[str, list[float]] = {k: [] for k in timers}
            for _ in range(rounds * (20 if iters == 50 else 1)):
                for name, fn in timers.items():  # interleaved, so drift hits each alike
                    h._around = fn
                    got[name].append(measure(spec, pg, 0, 1, st, native=native, reach=1 << 30).time_us)
            h._around = timers["host"]
            for name, vals in got.items():
                print(f"harness.measure {nbytes} B, {iters} iterations x {len(vals)}, timer {name}: median "
                      f"{statistics.median(vals):.3f} us [{min(vals):.2f}-{max(vals):.2f}]")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
