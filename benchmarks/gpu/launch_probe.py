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
For each: GPU time per operation, and the host's time per call (perf_counter around the issuing loop).
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

        variants = {
            "hot": hot[0],
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
    nccl.comm_destroy(comm)


if __name__ == "__main__":
    main()
