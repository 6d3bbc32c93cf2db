"""Benchmark (issue 29): a full pairwise sweep of N nodes (8 GPUs a node, the planner's 3 pair sizes
64M, 256M, 1G, all_reduce, 20 iterations + 5 warm-up + the check) with communicator set-up charged,
for groups made fresh when their turn comes, split from a world communicator, and made fresh 7
groups ahead on lanes (collectives/ahead.py, the default for NCCL groups across nodes), with makings
at once taking as long as one alone (slowdown 1) or twice as long (2: not measured across nodes).

Each row is ``netbench simulate --pattern pairwise`` (``netbench.sim.run.simulate``, the real planner:
N-1 rounds of N/2 pairs, every pair a fresh 16-rank group) on a healthy non-blocking 2-tier fabric
(180 GB/s a node, 5% noise) whose clock charges each group's set-up from ``netbench.sim.setup``
(gloo and the H200 measured, multi-node NCCL from NVIDIA/nccl issues #1646 and #534; the sources are
in that module). "fabric s" is the sweep's simulated time, "set-up s" the part of it the rounds
waited for communicators (each round's ``setup_wait_s``: all of a group's set-up when made at its
turn, what is left of it when made ahead), "share" their ratio.
Sizes past ``--simulate-max`` nodes are projected from the largest simulated one, per round (every
round of a healthy non-blocking fabric takes the same time), which the simulated rows check.

    python benchmarks/bench_group_setup.py [--nodes 256,1024,4096] [--simulate-max 256] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from netbench.run.options import from_command_line
from netbench.sim.fabric import FabricSpec
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate
from netbench.sim.setup import GroupSetup

GPUS = 8
#: (label, how groups are made, groups made ahead, slowdown of makings at once)
WAYS = [("fresh", "fresh", 0, 1.0), ("split", "split", 0, 1.0), ("ahead 7", "fresh", 7, 1.0),
        ("ahead 7, x2", "fresh", 7, 2.0)]


def simulated(nodes: int, made: str, ahead: int, slowdown: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        opts = from_command_line(SimOptions, dict(
            fabric=FabricSpec(nodes=nodes, leaves=max(1, nodes // 32), gpus=GPUS), patterns=["pairwise"],
            group_made=made, groups_ahead=ahead, ahead_slowdown=slowdown, out=f"{out}/run"))
        res = simulate(opts)
        waits: dict[int, float] = {}
        with open(f"{out}/run/results.jsonl") as fh:
            for line in fh:
                row = json.loads(line)
                waits[row["round"]] = row["setup_wait_s"]
        return {"fabric_s": res.fabric_s, "wait_s": sum(waits.values()), "rounds": len(waits),
                "machine_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="256,1024,4096")
    ap.add_argument("--simulate-max", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.nodes.split(",")]
    rows = []
    for label, made, ahead, slowdown in WAYS:
        base = None
        for n in sizes:
            rounds = n - 1
            if n <= args.simulate_max or base is None:
                got = simulated(min(n, args.simulate_max), made, ahead, slowdown)
                # per round after the first (whose set-up is waited for whichever way), and the first
                first = GroupSetup(made).seconds("nccl", 2 * GPUS, 2)
                later = got["rounds"] - 1
                per = ((got["fabric_s"] - first) / later, (got["wait_s"] - first) / later)
                base = (per, min(n, args.simulate_max), got)
            (round_s, wait_s), simulated_n, got = base
            if n == simulated_n:
                fabric_s, setup_s = got["fabric_s"], got["wait_s"]
                how = f"simulated ({got['machine_s']:.0f} s here)"
            else:
                first = GroupSetup(made).seconds("nccl", 2 * GPUS, 2)
                fabric_s, setup_s = first + round_s * (rounds - 1), first + wait_s * (rounds - 1)
                how = f"projected from {simulated_n} nodes"
            rows.append({"nodes": n, "made": label, "rounds": rounds, "setup_s": setup_s,
                         "fabric_s": fabric_s, "share": setup_s / fabric_s, "how": how})
            print(f"{n:>5} nodes  {label:<12} {rounds:>4} rounds  fabric {fabric_s / 60:7.1f} min  "
                  f"waited for set-up {setup_s / 60:7.1f} min ({100 * setup_s / fabric_s:4.1f}%)  {how}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
