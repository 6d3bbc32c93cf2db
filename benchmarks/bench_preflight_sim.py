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

    python benchmarks/bench_preflight_sim.py [--nodes 1024] [--faults 1,2,4,8] [--seeds 3]
        [--oversubscription 1,2] [--uplinks 0,1] [--json OUT]
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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netbench.preflight import PreflightOptions  # noqa: E402
from netbench.sim.fabric import FabricSpec, Fault  # noqa: E402
from netbench.sim.preflight import simulate_preflight  # noqa: E402
from netbench.sim.run import SimOptions  # noqa: E402

KINDS = ("node:{}=0.5", "gpu:{}", "intermittent:{}=0.5@0.5")


def fabric(nodes: int, over: float) -> FabricSpec:
    leaves = max(1, nodes // 32)
    return FabricSpec(
        nodes=nodes, leaves=leaves, tiers=3, pods=max(1, leaves // 8),
        oversubscription=over, core_oversubscription=over,
    )


def one(nodes: int, over: float, k: int, seed: int, tmp: Path, uplinks: int = 0) -> dict:
    spec = fabric(nodes, over)
    rng = np.random.default_rng(1000 * k + seed)
    width = max(4, len(str(nodes)))
    picked = rng.choice(nodes, size=k, replace=False)
    names = [f"node{h + 1:0{width}d}" for h in picked]
    faults = tuple(Fault.parse(KINDS[i % len(KINDS)].format(name)) for i, name in enumerate(names))
    # slow leaf uplinks: drawn after the nodes, so a row's node faults are the same with or without
    slow_leaves = [f"leaf{x + 1:02d}" for x in rng.choice(spec.leaves, size=uplinks, replace=False)]
    faults += tuple(Fault.parse(f"uplink:{leaf}=0.5") for leaf in slow_leaves)
    out = tmp / f"n{nodes}-o{over:g}-k{k}-s{seed}"
    t0 = time.monotonic()
    res = simulate_preflight(
        SimOptions(spec, faults, seed=seed, out=str(out)),
        PreflightOptions(hosts_file=None, budget_s=300.0, html=False),
    )
    wall = time.monotonic() - t0
    shutil.rmtree(out, ignore_errors=True)
    s = res.score
    # an uplink is named when the check list holds its switch, or a pair of candidates with it
    named = [leaf for leaf in slow_leaves if any(leaf in c.split("|") for c in res.result.check)]
    return {
        "nodes": nodes, "oversubscription": over, "faults": k, "seed": seed,
        "uplinks": slow_leaves, "uplinks_named": named,
        "planted": s.planted, "drained": s.drained, "tp": len(s.true_positives),
        "kinds": {f.subject: f.kind for f in faults},
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
        return r["nodes"], r["oversubscription"], r["faults"], len(r["uplinks"])

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
        for kind in ("node", "gpu", "intermittent"):
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
    ap.add_argument("--oversubscription", default="1,2")
    ap.add_argument("--uplinks", default="0", help="slow leaf uplinks planted besides the node faults, "
                    "comma-separated counts (e.g. 0,1)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # fsync'd rows: cheap on tmpfs
    tmp = Path(tempfile.mkdtemp(prefix="bench-pf-sim-", dir=shm))
    results = []
    try:
        for nodes in (int(x) for x in args.nodes.split(",")):
            for over in (float(x) for x in args.oversubscription.split(",")):
                for k in (int(x) for x in args.faults.split(",")):
                    for ups in (int(x) for x in args.uplinks.split(",")):
                        for seed in range(1, args.seeds + 1):
                            r = one(nodes, over, k, seed, tmp, ups)
                            results.append(r)
                            print(json.dumps(r), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table(results)
    per_kind(results)
    print(f"\npeak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
