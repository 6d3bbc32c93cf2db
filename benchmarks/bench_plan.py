"""Benchmark: building the plan of a pairwise sweep of N hosts (``planner.build_plan``) and writing it
as plan.json is written (``WorkerPlan.json_chunks``), for each pair schedule.

Hosts are a simulated fat tree's (``netbench simulate``'s names and leaves, 8 ranks a host); CPU
seconds of this process, so other jobs on the machine inflate them less than wall time.

    python benchmarks/bench_plan.py [--hosts 1024:64,4096:128]
"""

from __future__ import annotations

import argparse
import resource
import time

from netbench.agents.launchers import HostSlot
from netbench.run.options import MeasureOptions
from netbench.run.planner import PlanRequest, build_plan
from netbench.sim.fabric import Fabric, FabricSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="1024:64,4096:128", help="HOSTS:LEAVES, comma-separated")
    args = ap.parse_args()
    print("| hosts | leaves | schedule | groups | build_plan s | plan JSON s | JSON GB | peak RSS GB |")
    print("|---|---|---|---|---|---|---|---|")
    for item in args.hosts.split(","):
        n, leaves = (int(x) for x in item.split(":"))
        fab = Fabric.build(FabricSpec(nodes=n, leaves=leaves))
        slots = [HostSlot(host=h, nprocs=8, rank_base=8 * i) for i, h in enumerate(fab.hosts)]
        for schedule in ("circle", "topology"):
            req = PlanRequest(measure=MeasureOptions(collectives=["all_reduce"]), patterns=["pairwise"],
                              pair_schedule=schedule, switches=fab.uplinks())
            t0 = time.process_time()
            plan = build_plan(req, "bench", slots, "nccl")
            t1 = time.process_time()
            size = sum(len(piece) for piece in plan.json_chunks())
            t2 = time.process_time()
            groups = sum(len(p.groups) for p in plan.phases)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            print(f"| {n} | {leaves} | {schedule} | {groups} | {t1 - t0:.2f} | {t2 - t1:.1f} "
                  f"| {size / 1e9:.2f} | {rss:.2f} |")


if __name__ == "__main__":
    main()
