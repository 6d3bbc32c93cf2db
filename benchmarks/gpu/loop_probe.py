"""The native engine's eager loop made from C against the same loop through nccl4py's binding, in one
process, on one GPU (issue 28).

    python benchmarks/gpu/loop_probe.py [--rounds 5] [--loops 20] [--sizes 8,64,...]

A rank's setting: a one-rank torch ProcessGroupNCCL and a native communicator beside it. For each
size, all_reduce out of place (and in place at the first size: one rank, NCCL does no work, so the
time is the call's own), netbench's ``harness.measure`` (50 iterations, rotating slots, timed as the
sweep times them), ``--loops`` times with the C loop (``collectives/native_loop``) and as many with
the binding's Python loop, the two interleaved loop by loop, ``--rounds`` rounds; with
``--streams current,side`` each also on a non-blocking stream of its own (nccl-tests' kind of stream)
where the sweep uses torch's current one, the legacy default stream. Prints the median
over all loops, each round's median in brackets.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import types

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--sizes", default="8,64,512,4096,32768,262144,2097152")
    ap.add_argument("--streams", default="current",
                    help="current (torch's, the legacy default stream, as the sweep) and/or side (a "
                         "non-blocking stream of its own, as nccl-tests'), comma-separated")
    ap.add_argument("--no-pg", action="store_true",
                    help="no torch ProcessGroupNCCL in the process (the line-up is a host sync alone)")
    args = ap.parse_args()
    import nccl.bindings.nccl as nccl
    import torch.distributed as dist
    from netbench.collectives import harness, native_loop
    from netbench.collectives.dtypes import reduce_op
    from netbench.collectives.ops import get_collective

    if args.no_pg:  # _line_up's all-reduce on one rank only orders the stream: a no-op will do
        torch.cuda.init()
        pg = types.SimpleNamespace(allreduce=lambda tensors: types.SimpleNamespace(wait=lambda: None))
    else:
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=torch.device("cuda:0"))
        pg = dist.group.WORLD
        pg.allreduce([torch.ones(1, device="cuda")]).wait()
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(bytes(nccl.get_unique_id())), 0)
    native = types.SimpleNamespace(nccl=nccl, comm=comm)
    c_loop = native_loop.choose()
    print(f"C loop: {c_loop.name} ({c_loop.reason or 'built'})")
    if c_loop.loop is None:
        raise SystemExit(1)
    side = torch.cuda.Stream()  # torch's pool streams are cudaStreamNonBlocking, as nccl-tests' stream
    loops = {}
    for where in args.streams.split(","):
        stream = side if where == "side" else None
        loops[f"c/{where}"] = (c_loop, stream)
        loops[f"python/{where}"] = (native_loop.LoopChoice(None, "probe"), stream)
    coll = get_collective("all_reduce")
    sizes = [int(s) for s in args.sizes.split(",")]
    points = [(sizes[0], True)] + [(s, False) for s in sizes]
    reach = max(sizes)
    settings = harness.Settings(iters=args.iters, warmup=10, check=False, device="cuda")
    got: dict[tuple[int, bool, str], list[list[float]]] = {}
    for _ in range(args.rounds):
        for nbytes, in_place in points:
            lay = coll.layout(nbytes, 4, 1)
            spec = harness.PointSpec(coll, lay, torch.float32, in_place, "sum", reduce_op("sum"), 0)
            this = {name: [] for name in loops}
            for _ in range(args.loops):
                for name, (choice, stream) in loops.items():
                    native_loop.choose = lambda choice=choice: choice  # noqa: E731 - the loop under test
                    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                        point = harness.measure(spec, pg, 0, 1, settings, native=native, reach=reach)
                    assert point.loop == choice.name, (point.loop, name)
                    this[name].append(point.time_us)
            for name, vals in this.items():
                got.setdefault((nbytes, in_place, name), []).append(vals)
    print(f"all_reduce, one rank, {args.iters} iterations a loop, {args.loops} loops x {args.rounds} rounds, "
          "us an operation: median of all loops [each round's median]")
    print(f"{'bytes':>9} {'place':>5} {'loop/stream':>14} {'median':>8}  rounds")
    for (nbytes, in_place, name), rounds in got.items():
        flat = [v for r in rounds for v in r]
        per = " ".join(f"{statistics.median(r):.2f}" for r in rounds)
        place = "in" if in_place else "out"
        print(f"{nbytes:>9} {place:>5} {name:>14} {statistics.median(flat):8.3f}  [{per}]")
    if not args.no_pg:
        dist.destroy_process_group()
    nccl.comm_destroy(comm)


if __name__ == "__main__":
    main()
