"""Benchmark (issue 29): a full pairwise sweep of N nodes (8 GPUs a node, the planner's 3 pair sizes
64M, 256M, 1G, all_reduce, 20 iterations + 5 warm-up + the check) with communicator set-up charged,
for groups made fresh (what collectives/groups.py does) and split from a world communicator.

Each row is ``netbench simulate --pattern pairwise`` (``netbench.sim.run.simulate``, the real planner:
N-1 rounds of N/2 pairs, every pair a fresh 16-rank group) on a healthy non-blocking 2-tier fabric
(180 GB/s a node, 5% noise) whose clock charges each group's set-up from ``netbench.sim.setup``
(gloo and the H200 measured, multi-node NCCL from NVIDIA/nccl issues #1646 and #534; the sources are
in that module). "fabric s" is the sweep's simulated time, "set-up s" the part of it spent making
communicators (rounds x one group's set-up: a round's pairs are made at once), "share" their ratio.
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

from netbench.sim.fabric import FabricSpec
from netbench.sim.run import SimOptions, simulate
from netbench.sim.setup import WAYS, GroupSetup

GPUS = 8


def simulated(nodes: int, made: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        opts = SimOptions(fabric=FabricSpec(nodes=nodes, leaves=max(1, nodes // 32), gpus=GPUS),
                          patterns=("pairwise",), group_made=made, out=f"{out}/run")
        res = simulate(opts)
        return {"fabric_s": res.fabric_s, "machine_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="256,1024,4096")
    ap.add_argument("--simulate-max", type=int, default=256)
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = [int(x) for x in args.nodes.split(",")]
    rows = []
    for made in WAYS:
        setup = GroupSetup(made).seconds("nccl", 2 * GPUS, 2)
        base = None
        for n in sizes:
            rounds = n - 1
            if n <= args.simulate_max:
                got = simulated(n, made)
                base = (got["fabric_s"] / rounds, n)
                how = f"simulated ({got['machine_s']:.0f} s here)"
                fabric_s = got["fabric_s"]
            else:
                if base is None:
                    base = (simulated(args.simulate_max, made)["fabric_s"] / (args.simulate_max - 1),
                            args.simulate_max)
                fabric_s = base[0] * rounds
                how = f"projected from {base[1]} nodes"
            rows.append({"nodes": n, "made": made, "rounds": rounds, "setup_per_round_s": setup,
                         "setup_s": setup * rounds, "fabric_s": fabric_s,
                         "share": setup * rounds / fabric_s, "how": how})
            print(f"{n:>5} nodes  {made:<5}  {rounds:>4} rounds  set-up {setup:.2f} s/round  "
                  f"fabric {fabric_s / 60:7.1f} min  set-up {setup * rounds / 60:7.1f} min "
                  f"({100 * setup * rounds / fabric_s:4.1f}%)  {how}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
