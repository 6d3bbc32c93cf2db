"""Benchmark: does the report name what was planted on a simulated fabric, and only that?

Per fault class (capped node hidden behind an oversubscribed uplink, slow node, slow link, slow
uplink, intermittent node), fabrics of each size are simulated (``netbench simulate``'s model: a
two-tier fat tree, 16 nodes a leaf, leaf uplinks 2:1 oversubscribed, 5% noise, 1G pairs) with one
fault of that class planted at random, under bottleneck and multiplicative physics, and the real
report is scored against truth.json: a true positive is a warn/fail finding of the fault's kind
(node / pair / switch) naming its subject; every other warn/fail slow_node, slow_pair or slow_switch
finding is a false positive. One exception, at 16 nodes (two leaves, the only two under the spine):
a slow uplink there slows every pair between the leaves alike, so which leaf's uplink it is cannot
be told from pairs; the report then names both switches as the candidates (subject "leaf01|leaf02",
evidence ``candidate_switches``), and that finding counts as a true positive for the planted uplink
(at most two candidates: it halves the search, it does not name the part; ``claim``). Faults
truth.json marks unobservable (no measurement slowed below 90%
of healthy) are left out of recall and counted apart. A healthy fabric of each size is scored too
(any warn/fail node/link/switch finding is a false positive).

What is scored is the verdict a user of ``sweep --hosts`` gets: the sweep's suspects re-tested
against known-good partners within ``--confirm-budget`` seconds of fabric time (``netbench
simulate``'s confirm step, default 60 s as the sweep's), so a finding the re-test cleared is info,
not a warn/fail; ``--confirm-budget 0`` scores the analysis of the sweep alone.

    python benchmarks/bench_diagnosis.py [--sizes 16,64,256] [--seeds 5] [--physics bottleneck,multiplicative]
        [--pair-schedule auto|circle|topology]
        [--classes capped-hidden,slow-node,slow-link,slow-uplink,intermittent,healthy]
        [--healthy-seeds 20] [--confirm-budget 60] [--jobs 16]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from netbench.reports.engine import analyze

from netbench.common.findings import Finding
from netbench.sim.confirm import confirm_on_fabric
from netbench.sim.fabric import Fabric, FabricSpec, Fault
from netbench.sim.run import SimOptions, simulate

RULES = {"slow_node": "node", "slow_pair": "pair", "slow_switch": "switch"}
CLASSES = ("capped-hidden", "slow-node", "slow-link", "slow-uplink", "intermittent", "healthy")


def plant(cls: str, fab: Fabric, rng: np.random.Generator) -> tuple[str, ...]:
    hosts = fab.hosts
    pick = lambda: hosts[int(rng.integers(len(hosts)))]  # noqa: E731
    if cls == "capped-hidden":  # 20% below: cross-leaf pairs under load are narrower still
        return (f"node:{pick()}=0.8",)
    if cls == "slow-node":
        return (f"node:{pick()}=0.6",)
    if cls == "slow-link":
        a, b = rng.choice(len(hosts), size=2, replace=False)
        return (f"link:{hosts[a]},{hosts[b]}=0.5",)
    if cls == "slow-uplink":
        leaves = sorted(set(fab.leaf.values()))
        return (f"uplink:{leaves[int(rng.integers(len(leaves)))]}=0.5",)
    if cls == "intermittent":
        return (f"intermittent:{pick()}=0.5@0.3",)
    return ()


def claim(finding: Finding, truth: set[tuple[str, str]]) -> tuple[str, str]:
    """What a finding names, as (kind, subject). A finding naming two candidate switches (one of two
    uplinks is slow and pairs cannot tell which: the only two leaves under the spine) claims the
    planted one when it is among them: at most two candidates, so it halves the search, no more."""
    cands = finding.evidence.get("candidate_switches") or []
    hit = [("switch", c) for c in cands if ("switch", c) in truth]
    return hit[0] if hit and len(cands) <= 2 else (RULES[finding.rule], finding.subject)


def score(
    physics: str, n: int, cls: str, seed: int, noise: float, schedule: str, confirm_s: float, tmp: str
) -> tuple[int, ...]:
    """One simulated fabric with one fault of ``cls``, its suspects re-tested within ``confirm_s``:
    (TP, FP, FN, unobservable, milliseconds)."""
    t0 = time.perf_counter()
    spec = FabricSpec(nodes=n, leaves=max(2, n // 16), oversubscription=2.0, physics=physics)
    rng = np.random.default_rng(1000 * seed + n)
    faults = tuple(Fault.parse(f) for f in plant(cls, Fabric.build(spec), rng))
    out = Path(tmp) / f"{physics}-{n}-{cls}-{seed}"
    opts = SimOptions(
        spec, faults, noise=noise, seed=seed, pair_sizes=(1 << 30,), out=str(out), pair_schedule=schedule
    )
    res = simulate(opts)
    if confirm_s > 0:
        confirm_on_fabric(opts, res, confirm_s)
    truth, hidden = set(), 0
    for f in res.truth["faults"]:
        if f["observable"]:
            truth.add((f["finding_kind"], f["subject"]))
        else:
            hidden += 1
    findings = analyze(res.rundir.path)
    found = {claim(f, truth) for f in findings if f.rule in RULES and f.severity in ("warn", "fail")}
    shutil.rmtree(out)
    ms = int(1000 * (time.perf_counter() - t0))
    return len(found & truth), len(found - truth), len(truth - found), hidden, ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,64,256")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--healthy-seeds", type=int, help="seeds of the healthy class (default: --seeds)")
    ap.add_argument("--physics", default="bottleneck,multiplicative")
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--classes", default=",".join(CLASSES), help="fault classes to run, comma-separated")
    ap.add_argument("--pair-schedule", default="auto", choices=("auto", "circle", "topology"))
    ap.add_argument("--confirm-budget", type=float, default=60.0,
                    help="seconds of fabric time for re-testing the suspects, as sweep --hosts; 0: off")
    ap.add_argument("--jobs", type=int, default=1, help="fabrics simulated at once (processes)")
    args = ap.parse_args()
    unknown = set(args.classes.split(",")) - set(CLASSES)
    if unknown:
        ap.error(f"unknown --classes {', '.join(sorted(unknown))}; known: {', '.join(CLASSES)}")
    healthy_seeds = args.healthy_seeds if args.healthy_seeds is not None else args.seeds
    retests = f"within {args.confirm_budget:g} s" if args.confirm_budget > 0 else "off"
    print(f"noise {args.noise:.0%}, 16 nodes a leaf, leaf uplinks 2:1, pairs at 1G, {args.seeds} seeds each "
          f"({healthy_seeds} healthy), pair schedule {args.pair_schedule}, re-tests {retests}, "
          f"{args.jobs} job(s)")
    print("| physics | nodes | fault class | seeds | TP | FP | FN | unobservable | precision | recall "
          "| s/run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cells = [
        (physics, int(n), cls)
        for physics in args.physics.split(",")
        for n in args.sizes.split(",")
        for cls in args.classes.split(",")
    ]
    tmp = tempfile.mkdtemp(prefix="bench_diag-")
    try:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {
                cell: [
                    pool.submit(score, *cell, seed, args.noise, args.pair_schedule, args.confirm_budget, tmp)
                    for seed in range(healthy_seeds if cell[2] == "healthy" else args.seeds)
                ]
                for cell in cells
            }
            for (physics, n, cls), runs in futures.items():  # in order, as each cell completes
                tp, fp, fn, hidden, ms = (sum(col) for col in zip(*(f.result() for f in runs), strict=True))
                prec = tp / (tp + fp) if tp + fp else 1.0
                rec = tp / (tp + fn) if tp + fn else 1.0
                print(
                    f"| {physics} | {n} | {cls} | {len(runs)} | {tp} | {fp} | {fn} | {hidden} | {prec:.2f} "
                    f"| {rec:.2f} | {ms / 1000 / len(runs):.1f} |",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
