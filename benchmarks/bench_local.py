"""Issue-2 benchmarks: fidelity against a minimal torch.distributed loop, and sweep efficiency.

Fidelity: 2 gloo ranks. For every size, the time netbench reports for all_reduce (in-place, avg over
ranks) next to the time of the smallest honest hand-written loop (init_process_group, barrier,
``iters`` x dist.all_reduce, perf_counter). Goal: within 10 % at 8 B and 3 % at >= 1 MiB.
Each side is measured ``--repeats`` times, interleaved, and the median is compared so that the noise of
a shared machine hits both alike.

Efficiency: a default local ``netbench sweep``: share of its wall time spent inside timed and warm-up
collectives (sum over rows of time_us x (iters + warmup)), with start-up (imports, rendezvous)
reported separately. Goal >= 70 %.

Run: python benchmarks/bench_local.py [--repeats 5] [--max 64M]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from netbench.collectives.sizes import parse_size

MINIMAL = r"""
import os, sys, time, json, torch, torch.distributed as dist
rank, port = int(sys.argv[1]), int(sys.argv[2])
sizes = json.loads(sys.argv[3]); iters, warm = int(sys.argv[4]), int(sys.argv[5])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
out = {}
for s in sizes:
    t = torch.ones(s // 4)
    for _ in range(warm): dist.all_reduce(t)
    dist.barrier()
    t0 = time.perf_counter_ns()
    for _ in range(iters): dist.all_reduce(t)
    us = (time.perf_counter_ns() - t0) / 1e3 / iters
    v = torch.tensor([us], dtype=torch.float64); dist.all_reduce(v); out[s] = v.item() / 2
if rank == 0: print(json.dumps(out))
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def minimal(sizes: list[int], iters: int, warm: int) -> dict[int, float]:
    port = free_port()
    # netbench's ranks talk over the interface that routes to their store (loopback here); gloo's default
    # picks the one the hostname resolves to (eth0: MTU 1500, not 65536), so name it for a fair race
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MINIMAL, str(r), str(port), json.dumps(sizes), str(iters), str(warm)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in range(2)
    ]
    out = procs[0].communicate()[0]
    procs[1].wait()
    return {int(k): v for k, v in json.loads(out).items()}


def netbench_times(sizes: list[int], iters: int, warm: int) -> dict[int, float]:
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "netbench",
                "sweep",
                "-p",
                "2",
                "-k",
                "all_reduce",
                "-b",
                str(sizes[0]),
                "-e",
                str(sizes[-1]),
                "-n",
                str(iters),
                "-w",
                str(warm),
                "--in-place",
                "in",
                "--no-check",
                "--no-report",
                "--out",
                d,
            ],
            check=True,
            capture_output=True,
        )
        rows = [json.loads(x) for x in Path(d, "results.jsonl").read_text().splitlines()]
    return {r["bytes"]: r["time_us"] for r in rows}


def fidelity(args: argparse.Namespace) -> None:
    sizes = [8 << i for i in range(0, 24) if (8 << i) <= args.max]
    a: dict[int, list[float]] = {s: [] for s in sizes}
    b: dict[int, list[float]] = {s: [] for s in sizes}
    for _ in range(args.repeats):
        for s, v in netbench_times(sizes, args.iters, args.warmup).items():
            a[s].append(v)
        for s, v in minimal(sizes, args.iters, args.warmup).items():
            b[s].append(v)
    print(f"{'size':>10} {'netbench us':>12} {'minimal us':>12} {'ratio':>7}")
    for s in sizes:
        na, nb = statistics.median(a[s]), statistics.median(b[s])
        print(f"{s:>10} {na:12.2f} {nb:12.2f} {na / nb:7.3f}")


def efficiency() -> None:
    """Share of a default sweep's wall time inside timed + warm-up collectives, start-up apart.

    Start-up = this CLI's own imports (timed alone, ``import_s``) + the ranks' start and rendezvous
    (run.json ``startup_s``). The share is inside / (wall - start-up); the share of the measuring
    phase alone is given too.
    """
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import netbench.run.pipeline, torch; torch.cuda.is_available()"], check=True
    )
    import_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "netbench", "sweep", "--no-report", "--out", d],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - t0
        rows = [json.loads(x) for x in Path(d, "results.jsonl").read_text().splitlines()]
        run = json.loads(Path(d, "run.json").read_text())
    inside = sum(r["time_us"] * (r["iters"] + r["warmup"]) for r in rows) / 1e6
    startup = import_s + (run.get("startup_s") or 0)
    phase = sum(p["seconds"] for p in run.get("phases", []))
    print(
        f"default sweep ({run['world_size']} ranks, {len(rows)} rows): wall {wall:.2f} s; start-up "
        f"{startup:.2f} s (CLI imports {import_s:.2f} s + ranks start/rendezvous {run.get('startup_s')} s); "
        f"in timed+warm-up collectives {inside:.2f} s"
    )
    print(
        f"share of wall after start-up: {100 * inside / (wall - startup):.1f} %  "
        f"(of the whole wall {100 * inside / wall:.1f} %, "
        f"of the measuring phase {100 * inside / phase:.1f} %)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--max", type=parse_size, default=64 << 20)
    args = ap.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    fidelity(args)
    efficiency()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "netbench", "--help"], check=True, capture_output=True)
    print(f"netbench --help: {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
