"""Issue 29 on one GPU: what making groups ahead (collectives/ahead.py) costs the measurement beside
it, and how well makings overlap one another.

1. **Interference.** The rank's own thread measures all_reduce (the real harness and native engine,
   a 1-rank NCCL communicator, out-of-place, 20 iterations + 5 warm-up) at 8 B, 1 MiB, 64 MiB and
   1 GiB, ``ROUNDS`` times each, first alone, then while ``LANES`` other threads keep making and
   releasing 1-rank NCCL groups (``groups.make`` and ``shutdown``, as a lane and a release do).
   Medians and spreads of both.
2. **Overlap.** k groups made at once on k threads (k = 1, 2, 4, 7): the wall time against k times
   one group made alone, so the simulator's charge for concurrent makings rests on a measurement.

python benchmarks/gpu/ahead_probe.py  (on a GPU machine, from the repo root; prints one table each)
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
from netbench.collectives import groups
from netbench.collectives.dtypes import get_dtype, reduce_op
from netbench.collectives.harness import PointSpec, Settings, measure
from netbench.collectives.ops import get_collective

SIZES = [8, 1 << 20, 64 << 20, 1 << 30]
NATIVE: list[object] = []  # the measured group's native communicator (collectives.native.NativeComm)
ROUNDS = 15
LANES = 3
_n = iter(range(1 << 30))


def make_one(store: dist.Store) -> object:
    return groups.make("nccl", dist.PrefixStore(f"g{next(_n)}/", store), 0, 1, 60.0, None)


def point_us(pg: object, size: int) -> float:
    """The native engine's out-of-place all_reduce (torch's, on one rank, does nothing to time)."""
    coll = get_collective("all_reduce")
    dt_ = get_dtype("float")
    lay = coll.layout(size, dt_.size, 1)
    spec = PointSpec(coll, lay, dt_.torch_dtype, False, "sum", reduce_op("sum"), 0)
    settings = Settings(iters=20, warmup=5, check=False, device="cuda")
    return measure(spec, pg, 0, 1, settings, native=NATIVE[0]).time_us


def churn(store: dist.Store, stop: threading.Event, made: list[int]) -> None:
    torch.cuda.set_device(0)
    while not stop.is_set():
        pg = make_one(store)
        made.append(1)
        groups.release(pg, 60.0)


def interference(store: dist.Store) -> None:
    from netbench.collectives.native import NativeComm

    pg = make_one(store)
    NATIVE.append(NativeComm(dist.PrefixStore("native/", store), 0, 1, 60.0))
    for size in SIZES:  # warm every size once
        point_us(pg, size)
    alone = {s: [point_us(pg, s) for _ in range(ROUNDS)] for s in SIZES}
    stop, made = threading.Event(), []
    lanes = [threading.Thread(target=churn, args=(store, stop, made), daemon=True) for _ in range(LANES)]
    for t in lanes:
        t.start()
    while len(made) < LANES:  # every lane past its first making: they are all busy from here on
        time.sleep(0.01)
    busy = {s: [point_us(pg, s) for _ in range(ROUNDS)] for s in SIZES}
    stop.set()
    for t in lanes:
        t.join()
    print(f"## interference: {ROUNDS} points a size, alone vs beside {LANES} lanes making groups "
          f"({len(made)} made meanwhile)")
    print("| size | alone median us | alone min-max | beside lanes median us | beside min-max | change |")
    print("|---:|---:|---:|---:|---:|---:|")
    for s in SIZES:
        a, b = alone[s], busy[s]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {s} | {ma:.2f} | {min(a):.2f}-{max(a):.2f} | {mb:.2f} | {min(b):.2f}-{max(b):.2f} "
              f"| {100 * (mb / ma - 1):+.1f}% |")


def overlap(store: dist.Store) -> None:
    print("## overlap: k groups made at once on k threads (wall), against k x one made alone")
    print("| k | wall s | one alone s | k x alone s | overlap (k x alone / wall) |")
    print("|---:|---:|---:|---:|---:|")
    for k in (1, 2, 4, 7):
        t0 = time.perf_counter()
        groups.release(make_one(store), 60.0)
        one = time.perf_counter() - t0
        out: list[object] = []

        def lane(out: list[object] = out) -> None:
            torch.cuda.set_device(0)
            out.append(make_one(store))

        threads = [threading.Thread(target=lane) for _ in range(k)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        for pg in out:
            groups.abandon(pg)
        print(f"| {k} | {wall:.3f} | {one:.3f} | {k * one:.3f} | {k * one / wall:.2f} |")


def main() -> None:
    torch.cuda.set_device(0)
    store = dist.HashStore()
    store.set_timeout(dt.timedelta(seconds=60))
    print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), torch.cuda.get_device_name(0))
    interference(store)
    overlap(store)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
