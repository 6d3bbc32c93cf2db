"""Benchmark: does the analysis find planted faults, and only them? (goal: precision, recall >= 0.95)

Synthetic fleets of 16 to 1,024 nodes (32 nodes per leaf), every pair measured at the large sizes a
sweep measures (64M, 256M, 1G; ``--pair-sizes 1``: 1G only, the hardest case with no averaging over
sizes), 5% noise on every measurement independently (coefficient of variation),
with ~3% of nodes 20% slow and as many links 30% slow, planted at random. A slow node must come out
as slow_node (not as its pairs), a slow link as slow_pair (not as its nodes). Prints a table.

    python benchmarks/bench_detection.py [--sizes 16,32,...] [--seeds 3] [--noise 0.05] [--pair-sizes 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # synthetic.py

from netbench.collectives.sizes import format_size  # noqa: E402
from netbench.reports.context import AnalysisContext, gc_paused  # noqa: E402
from netbench.reports.engine import run_rules  # noqa: E402
from synthetic import host_names, make_fleet, plant_faults  # noqa: E402


def score(found: set, truth: set) -> tuple[int, int, int]:
    return len(found & truth), len(found - truth), len(truth - found)


def pr(tp: int, fp: int, fn: int) -> tuple[float, float]:
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,32,64,128,256,512,1024")
    ap.add_argument("--seeds", type=int, default=3, help="fleets per size (1 above 256 nodes)")
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--node-factor", type=float, default=0.8)
    ap.add_argument("--link-factor", type=float, default=0.7)
    ap.add_argument("--pair-sizes", type=int, choices=(1, 2, 3), default=3, help="large sizes per pair")
    args = ap.parse_args()
    sizes = (64 << 20, 256 << 20, 1 << 30)[-args.pair_sizes:]
    print(
        f"noise {args.noise:.0%}, slow nodes at {args.node_factor}x, slow links at {args.link_factor}x, "
        f"pair sizes {', '.join(format_size(x) for x in sizes)}"
    )
    print(
        "| nodes | leaves | fleets | planted nodes | node TP/FP/FN | node P | node R | planted links "
        "| link TP/FP/FN | link P | link R | s/fleet |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals = {"node": [0, 0, 0], "link": [0, 0, 0]}
    for n in (int(x) for x in args.sizes.split(",")):
        leaves = max(1, n // 32) if n >= 64 else 2
        seeds = args.seeds if n <= 256 else 1
        k = max(1, round(0.03 * n))
        acc = {"node": [0, 0, 0], "link": [0, 0, 0]}
        planted = [0, 0]
        t = time.perf_counter()
        for seed in range(seeds):
            hosts = host_names(n)
            slow_nodes, slow_links = plant_faults(
                hosts, k, k, seed=100 + seed, node_factor=args.node_factor, link_factor=args.link_factor
            )
            with gc_paused():
                fleet = make_fleet(
                    n,
                    leaves,
                    pair_sizes=sizes,
                    ring_sizes=(),
                    slow_nodes=slow_nodes,
                    slow_links=slow_links,
                    noise=args.noise,
                    pair_rank_times=False,
                    seed=seed,
                )
                findings = run_rules(
                    AnalysisContext.from_data(fleet.rows, fleet.inventory, fleet.env, fleet.run)
                )
            nodes = {f.subject for f in findings if f.rule == "slow_node"}
            links = {tuple(sorted(f.subject.split("|"))) for f in findings if f.rule == "slow_pair"}
            for kind, found, truth in (("node", nodes, set(slow_nodes)), ("link", links, set(slow_links))):
                for i, v in enumerate(score(found, truth)):
                    acc[kind][i] += v
                    totals[kind][i] += v
            planted[0] += len(slow_nodes)
            planted[1] += len(slow_links)
        dt = (time.perf_counter() - t) / seeds
        np_, nr = pr(*acc["node"])
        lp, lr = pr(*acc["link"])
        print(
            f"| {n} | {leaves} | {seeds} | {planted[0]} | {'/'.join(map(str, acc['node']))} "
            f"| {np_:.3f} | {nr:.3f} | {planted[1]} | {'/'.join(map(str, acc['link']))} "
            f"| {lp:.3f} | {lr:.3f} | {dt:.1f} |",
            flush=True,
        )
    np_, nr = pr(*totals["node"])
    lp, lr = pr(*totals["link"])
    print(
        f"| all | | | | {'/'.join(map(str, totals['node']))} | {np_:.3f} | {nr:.3f} | | "
        f"{'/'.join(map(str, totals['link']))} | {lp:.3f} | {lr:.3f} | |"
    )
    ok = min(np_, nr, lp, lr) >= 0.95
    print(f"goal precision and recall >= 0.95 for nodes and links: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
