"""Benchmark (the moonshot of issue 12): preflight on a simulated 1,024-node, 3-tier fabric with 1 to 8
planted faults: the drain list's precision and recall, and the fabric time it took.

Each run is ``netbench simulate --preflight`` (``netbench.sim.preflight.simulate_preflight``): the real
preflight (inventory rules, quick pass of 3 rounds of pairs on each node's own leaf, then leaves and
pods meeting each other whole (3 + 3 rounds here), + the ring at 256M and 1G, re-tests of suspects
against 2 known-good partners, 6 for a node at an end of slow links, drain rule) through the
simulated launcher under the real coordinator, with the CLI's defaults and a 5-minute budget.
Fabric: 3 tiers, 32 nodes a leaf, 8 leaves a pod, 8 GPUs (ranks) a node, 180 GB/s a node, 5% noise;
``--oversubscription`` at both the leaf and the pod uplinks (1 = non-blocking).

Planted, on distinct random nodes, cycling through the node faults a drain list should hold: a slow
node (``node:X=0.5``, a NIC at half rate), a GPU that drops out (``gpu:X``) and an intermittent node
(``intermittent:X=0.5@0.5``, slow in half the pair phases). Precision and recall are pooled over the
runs of a row (drained nodes vs planted ones); "hidden" counts planted nodes that no measurement ever
showed below 90% of healthy (truth.json's ``observable``), which no analysis could name.

``--uplinks 1`` also plants a slow leaf uplink (``uplink:leafNN=0.5``, a random leaf): it belongs on
the "check" list (named when the list holds its switch, or a candidate pair with it), and none of the
32 nodes behind it on the drain list (they would count against precision).

Fabric time: the inventory and each launch at the SSH fan-out and rank start-up measured on the test
network (``netbench.sim.launcher.LaunchCosts``), each phase its simulated time. "Machine s" is this
machine's wall time for the whole run (coordinator, analyses, report; no report.html).

``--sets`` (issue 25) plants named sets instead of ``--faults`` counts, on random nodes: ``node85`` and
``node90`` (8 nodes at 0.85 / 0.9: 15% and 10% slow), ``intermittent`` (4 nodes at 0.5 in 30% of the
rounds), ``gpu`` (4 GPUs that drop out), ``mixed`` (a node at 0.6, a GPU drop, an intermittent node
at 0.5 in 30% of rounds, a slow leaf uplink at 0.5, a node at 0.8) and ``healthy`` (nothing). The
sequential stage then spends what the budget leaves (``netbench.preflight.sequential``).

    python benchmarks/bench_preflight_sim.py [--nodes 1024] [--faults 1,2,4,8] [--seeds 3]
        [--oversubscription 1,2] [--uplinks 0,1] [--json OUT]
    python benchmarks/bench_preflight_sim.py --sets node85,node90,intermittent,gpu,mixed,healthy \
        --seeds 10 --oversubscription 2 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netbench.preflight import PreflightOptions  # noqa: E402
from netbench.sim.fabric import FabricSpec, Fault  # noqa: E402
from netbench.sim.options import SimOptions  # noqa: E402
from netbench.sim.preflight import simulate_preflight  # noqa: E402

KINDS = ("node:{}=0.5", "gpu:{}", "intermittent:{}=0.5@0.5")
SETS = {  # issue 25's named sets: node faults to draw hosts for, and how many slow leaf uplinks
    "node85": (("node:{}=0.85",) * 8, 0),
    "node90": (("node:{}=0.9",) * 8, 0),
    "intermittent": (("intermittent:{}=0.5@0.3",) * 4, 0),
    "gpu": (("gpu:{}",) * 4, 0),
    "mixed": (("node:{}=0.6", "gpu:{}", "intermittent:{}=0.5@0.3", "node:{}=0.8"), 1),
    "healthy": ((), 0),
}


def fabric(nodes: int, over: float) -> FabricSpec:
    leaves = max(1, nodes // 32)
    return FabricSpec(
        nodes=nodes, leaves=leaves, tiers=3, pods=max(1, leaves // 8),
        oversubscription=over, core_oversubscription=over,
    )


def one(nodes: int, over: float, k: int, seed: int, tmp: Path, uplinks: int = 0, fault_set: str = "") -> dict:
    spec = fabric(nodes, over)
    kinds = SETS[fault_set][0] if fault_set else [KINDS[i % len(KINDS)] for i in range(k)]
    uplinks = SETS[fault_set][1] if fault_set else uplinks
    k = len(kinds)
    rng = np.random.default_rng(1000 * k + seed + (sorted(SETS).index(fault_set) << 20 if fault_set else 0))
    width = max(4, len(str(nodes)))
    picked = rng.choice(nodes, size=k, replace=False)
    names = [f"node{h + 1:0{width}d}" for h in picked]
    faults = tuple(Fault.parse(kind.format(name)) for kind, name in zip(kinds, names, strict=True))
    # slow leaf uplinks: drawn after the nodes, so a row's node faults are the same with or without
    slow_leaves = [f"leaf{x + 1:02d}" for x in rng.choice(spec.leaves, size=uplinks, replace=False)]
    faults += tuple(Fault.parse(f"uplink:{leaf}=0.5") for leaf in slow_leaves)
    out = tmp / f"n{nodes}-o{over:g}-k{k}-{fault_set}-s{seed}"
    t0 = time.monotonic()
    res = simulate_preflight(
        SimOptions(spec, faults, seed=seed, out=str(out)),
        PreflightOptions(budget_s=300.0, html=False),
    )
    wall = time.monotonic() - t0
    shutil.rmtree(out, ignore_errors=True)
    s = res.score
    # an uplink is named when the check list holds its switch, or a pair of candidates with it
    named = [leaf for leaf in slow_leaves if any(leaf in c.split("|") for c in res.result.check)]
    seq = res.result.info.get("sequential", {})
    return {
        "nodes": nodes, "oversubscription": over, "faults": k, "seed": seed, "set": fault_set,
        "sequential": {"counts": seq.get("counts"), "stopped": seq.get("stopped"),
                       "rounds": sum(x["run"] for x in seq.get("launches", []))},
        "uplinks": slow_leaves, "uplinks_named": named,
        "planted": s.planted, "drained": s.drained, "tp": len(s.true_positives),
        "kinds": {f.subject: f"{f.kind}={f.factor:g}" if f.kind == "node" else f.kind for f in faults},
        "hidden": sorted(set(s.unobservable) & set(s.planted)),
        "fabric_s": round(res.fabric_s, 1), "machine_s": round(wall, 1),
        "stages_s": res.result.info["stages_s"], "exit": res.result.exit_code,
        "check": len(res.result.check),
    }


def table(results: list[dict]) -> None:
    print("| nodes | oversub. | faults | slow uplinks | runs | planted | drained | TP | hidden | precision "
          "| recall | uplinks named | check list (max) | fabric s (max) | machine s (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    def key_of(r: dict) -> tuple:
        return r["nodes"], r["oversubscription"], r.get("set") or r["faults"], len(r["uplinks"])

    for key in sorted({key_of(r) for r in results}):
        rs = [r for r in results if key_of(r) == key]
        planted = sum(len(r["planted"]) for r in rs)
        drained = sum(len(r["drained"]) for r in rs)
        tp = sum(r["tp"] for r in rs)
        hidden = sum(len(r["hidden"]) for r in rs)
        prec = tp / drained if drained else 1.0
        rec = tp / planted if planted else 1.0
        up = sum(len(r["uplinks"]) for r in rs)
        named = sum(len(r["uplinks_named"]) for r in rs)
        print(f"| {key[0]} | {key[1]:g}:1 | {key[2]} | {key[3]} | {len(rs)} | {planted} | {drained} | {tp} "
              f"| {hidden} | {prec:.2f} | {rec:.2f} | {f'{named} of {up}' if up else '-'} "
              f"| {max(r['check'] for r in rs)} | {max(r['fabric_s'] for r in rs):.1f} "
              f"| {statistics.median(r['machine_s'] for r in rs):.1f} |")


def per_kind(results: list[dict]) -> None:
    """Recall per planted fault kind, over every run of each fabric."""
    print("\n| nodes | oversub. | fault kind | planted | drained | hidden | recall |")
    print("|---|---|---|---|---|---|---|")
    for nodes, over in sorted({(r["nodes"], r["oversubscription"]) for r in results}):
        rs = [r for r in results if (r["nodes"], r["oversubscription"]) == (nodes, over)]
        for kind in sorted({k for r in rs for k in r["kinds"].values()}):
            hosts = [(r, h) for r in rs for h, k in r["kinds"].items() if k == kind]
            if not hosts:
                continue
            hit = sum(h in r["drained"] for r, h in hosts)
            hidden = sum(h in r["hidden"] for r, h in hosts)
            recall = hit / len(hosts)
            print(f"| {nodes} | {over:g}:1 | {kind} | {len(hosts)} | {hit} | {hidden} | {recall:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="1024")
    ap.add_argument("--faults", default="1,2,4,8")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--oversubscription", default="1,2")
    ap.add_argument("--uplinks", default="0", help="slow leaf uplinks planted besides the node faults, "
                    "comma-separated counts (e.g. 0,1)")
    ap.add_argument("--sets", default="", help=f"named fault sets instead of --faults: {', '.join(SETS)}")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (processes)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # fsync'd rows: cheap on tmpfs
    tmp = Path(tempfile.mkdtemp(prefix="bench-pf-sim-", dir=shm))
    results = []
    sets = [x for x in args.sets.split(",") if x]
    unknown = sorted(set(sets) - set(SETS))
    if unknown:
        ap.error(f"--sets: unknown {', '.join(unknown)} (known: {', '.join(SETS)})")
    runs = [  # seed after seed: a grid stopped early has every set of the seeds it finished
        (nodes, over, k, seed, tmp, ups, named)
        for seed in range(args.first_seed, args.first_seed + args.seeds)
        for nodes in (int(x) for x in args.nodes.split(","))
        for over in (float(x) for x in args.oversubscription.split(","))
        for k, ups, named in ([(0, 0, n) for n in sets] or [
            (int(k), int(u), "") for k in args.faults.split(",") for u in args.uplinks.split(",")])
    ]
    try:
        with ProcessPoolExecutor(args.jobs) as pool:
            for done in as_completed([pool.submit(one, *run) for run in runs]):
                results.append(done.result())
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table(results)
    per_kind(results)
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
