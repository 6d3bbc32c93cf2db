"""Benchmark: one sample a pair, read by the report alone (issue 46).

Fleets simulated as ``netbench simulate --pair-sizes 1G --confirm-budget 0`` makes them (a two-tier
fat tree, 16 nodes a leaf, uplinks 1:1 so that every pair can show a slow link, one 1 GiB sample a
pair, no re-test), read by the report's engine (``reports.engine``: what ``netbench report`` runs):

- ``--links``: fleets under ``--law`` noise with slow links planted between random nodes (no node in
  two), e.g. ``0.75x3,0.7x1``: three at 0.75 and one at 0.7 a fleet. A link is *found* when a
  ``slow_pair`` finding names it at warn or fail (the family-wise bar), *suspect* at info, *listed*
  when the ``retest_pairs`` finding names it among the pairs most worth re-testing;
- ``--healthy``: fleets with nothing planted under each noise law of ``--laws``; a fleet *alarms*
  when it has a warn/fail slow_node, slow_pair or slow_switch finding (other rules' warn/fail
  findings are counted apart: ``other_warn_fail``).

Every fleet also gives its bar against the ideal's: the bar its widest hop class used (Holm's first
step, fwer / pairs, through the learned noise tail, times its sigma: log busbw below the cell) and
the bar of a detector that knows the noise law (the law's own quantile at that chance, below its
median; ``ideal_bar``), and their ratio. One JSON line a fleet, then a table.

    python benchmarks/bench_one_sample.py --healthy --laws normal,lognormal,skewed,t3,t4,t5,congestion \\
        --fleets 20 [--nodes 256] [--jobs 2] [--seed0 0]
    python benchmarks/bench_one_sample.py --links 0.75x3,0.7x1 --law normal --fleets 20
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from statistics import NormalDist

import numpy as np
from netbench.reports.engine import load_context, run_rules

from netbench.run.options import PairOptions
from netbench.sim.fabric import FabricSpec, Fault
from netbench.sim.measure import CONGESTED_SHARE, CONGESTED_SLOWDOWN, NOISE_SHAPES, SKEW
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate

DIAGNOSIS = ("slow_node", "slow_pair", "slow_switch")
_N = NormalDist()


def _normal_sf(v: np.ndarray) -> np.ndarray:
    return np.array([_N.cdf(-float(x)) for x in np.ravel(v)]).reshape(np.shape(v))


def _t_sf(t: float, nu: int) -> float:
    """P(T > t), Student-t with ``nu`` degrees of freedom, t >= 0: the density integrated over
    x = t / w, w in (0, 1] (no scipy)."""
    w = np.linspace(1e-9, 1.0, 200_001)
    c = math.exp(math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2)) / math.sqrt(nu * math.pi)
    x = t / w
    return float(np.trapezoid(c * (1 + x * x / nu) ** (-(nu + 1) / 2) * t / (w * w), w))


def _skew_sf(x: float) -> float:
    """P(X > x), X skew-normal of shape SKEW: 2 phi(v) Phi(SKEW v) integrated from x."""
    v = np.linspace(x, x + 12.0, 40_001)
    dens = 2 * np.exp(-v * v / 2) / math.sqrt(2 * math.pi) * (1 - _normal_sf(SKEW * v))
    return float(np.trapezoid(dens, v))


def law_sf(law: str, cv: float, y: float) -> float:
    """P(log(time factor) > y): the chance the simulator's ``law`` slows a measurement's log busbw
    by more than ``y`` (``sim.measure.noise_factor``'s laws, their tails exactly)."""
    grow = math.expm1(y) / cv  # the factor 1 + cv v past e^y: v past this
    if law == "lognormal":
        return float(_normal_sf(np.array(y / cv)))
    if law in ("t3", "t4", "t5"):
        nu = int(law[1])
        v = grow / math.sqrt((nu - 2) / nu)
        return _t_sf(v, nu) if v > 0 else 1 - _t_sf(-v, nu)
    if law == "skewed":
        d = SKEW / math.sqrt(1 + SKEW**2)
        mean, sd = d * math.sqrt(2 / math.pi), math.sqrt(1 - 2 * d**2 / math.pi)
        return _skew_sf(mean + sd * grow)
    plain = float(_normal_sf(np.array(grow)))
    if law != "congestion":
        return plain
    s = np.linspace(*CONGESTED_SLOWDOWN, 201)
    hit = float(np.mean(_normal_sf((math.exp(y) / s - 1) / cv)))
    return (1 - CONGESTED_SHARE) * plain + CONGESTED_SHARE * hit


def _solve(law: str, cv: float, p: float) -> float:
    lo, hi = -1.0, 5.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if law_sf(law, cv, mid) > p else (lo, mid)
    return (lo + hi) / 2


@functools.lru_cache(maxsize=64)
def ideal_bar(law: str, cv: float, p: float) -> float:
    """The bar (log busbw below the noise's median) at which ``law`` alone puts a pair with chance
    ``p``: what a detector knowing the law would use."""
    return _solve(law, cv, p) - _solve(law, cv, 0.5)


def fleet(kind: str, law: str, nodes: int, links: list[float], seed: int, tmp: str) -> dict:
    t0 = time.perf_counter()
    spec = FabricSpec(nodes=nodes, leaves=max(2, nodes // 16), oversubscription=1.0)
    rng = np.random.default_rng(4600 + seed)
    picked = rng.choice(nodes, size=2 * len(links), replace=False) + 1
    width = max(4, len(str(nodes)))
    planted = {tuple(sorted((f"node{picked[2 * k]:0{width}d}", f"node{picked[2 * k + 1]:0{width}d}"))): f
               for k, f in enumerate(links)}
    faults = tuple(Fault.parse(f"link:{a},{b}={f}") for (a, b), f in planted.items())
    out = Path(tmp) / f"{kind}-{law}-{nodes}-{seed}"
    opts = SimOptions(spec, faults, noise=0.05, noise_shape=law, seed=seed, out=str(out),
                      pairs=PairOptions(pair_sizes=[1 << 30]))
    res = simulate(opts)
    ctx = load_context(res.rundir.path)
    findings = run_rules(ctx)
    m = ctx.pair_model
    t = ctx.policy.thresholds
    widest = max(m.class_pairs, key=m.class_pairs.get)
    tail = m.noise.tail(widest)
    n_tests = int(np.triu(np.isfinite(m.resid), 1).sum())
    bar = max(t.mad_k, tail.bar(t.fwer / n_tests)) * tail.sigma
    ideal = ideal_bar(law, 0.05, t.fwer / n_tests)
    listed = set(next((f.evidence["pairs"] for f in findings if f.rule == "retest_pairs"), []))
    by_pair = {f.subject: f.severity for f in findings if f.rule == "slow_pair"}
    alarms = sorted(f"{f.rule}:{f.subject}" for f in findings
                    if f.rule in DIAGNOSIS and f.severity in ("warn", "fail")
                    and tuple(sorted(f.hosts)) not in planted)
    others = sorted({f.rule for f in findings if f.severity in ("warn", "fail") and f.rule not in DIAGNOSIS})
    shutil.rmtree(out)
    return {
        "kind": kind, "law": law, "nodes": nodes, "seed": seed,
        "links": [{"pair": f"{a}|{b}", "factor": f,
                   "severity": by_pair.get(f"{a}|{b}") or by_pair.get(f"{b}|{a}"),
                   "listed": f"{a}|{b}" in listed or f"{b}|{a}" in listed} for (a, b), f in planted.items()],
        "false_alarms": alarms, "other_warn_fail": others, "retest_listed": len(listed),
        "bar_log": round(bar, 4), "ideal_log": round(ideal, 4), "bar_ratio": round(bar / ideal, 3),
        "busbw_bar": round(math.exp(-bar), 3), "busbw_ideal": round(math.exp(-ideal), 3),
        "shape": round(tail.shape, 3), "fitted_shape": round(tail.fitted_shape, 3),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def summary(done: list[dict]) -> None:
    print("| kind | law | nodes | fleets | fleets alarming | links found (warn) | + suspect "
          "| listed to re-test | bar (busbw ratio), median | ideal "
          "| bar / ideal (log), median [max] | s a fleet |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted({(d["kind"], d["law"], d["nodes"]) for d in done}):
        ds = [d for d in done if (d["kind"], d["law"], d["nodes"]) == key]
        found = {}
        for d in ds:
            for link in d["links"]:
                f = found.setdefault(link["factor"], [0, 0, 0, 0])
                f[0] += link["severity"] in ("warn", "fail")
                f[1] += link["severity"] is not None
                f[2] += link["listed"] or link["severity"] is not None
                f[3] += 1
        cell = lambda k, found=found: (  # noqa: E731
            "; ".join(f"{fac}: {v[k]}/{v[3]}" for fac, v in sorted(found.items())) or "-")
        ratios = [d["bar_ratio"] for d in ds]
        others = sum(bool(d.get("other_warn_fail")) for d in ds)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(ds)} | {sum(bool(d['false_alarms']) for d in ds)} "
              f"({others} with another rule's warn/fail) "
              f"| {cell(0)} | {cell(1)} | {cell(2)} | {np.median([d['busbw_bar'] for d in ds]):.3f} "
              f"| {ds[0]['busbw_ideal']:.3f} | {np.median(ratios):.2f} [{max(ratios):.2f}] "
              f"| {np.mean([d['seconds'] for d in ds]):.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--healthy", action="store_true", help="healthy fleets under each of --laws")
    ap.add_argument("--laws", default=",".join(NOISE_SHAPES))
    ap.add_argument("--links", help="planted links a fleet, FACTORxCOUNT,... (e.g. 0.75x3,0.7x1)")
    ap.add_argument("--law", default="normal", help="the noise law of the --links fleets")
    ap.add_argument("--fleets", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed0", type=int, default=0)
    args = ap.parse_args()
    jobs = []
    seeds = range(args.seed0, args.seed0 + args.fleets)
    if args.healthy:
        jobs += [("healthy", law, []) for law in args.laws.split(",") for _ in seeds]
    if args.links:
        links = [float(f) for part in args.links.split(",") for f, n in [part.split("x")]
                 for _ in range(int(n))]
        jobs += [("links", args.law, links) for _ in seeds]
    tmp = tempfile.mkdtemp(prefix="bench-one-sample-")
    done = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futs = [pool.submit(fleet, kind, law, args.nodes, links, args.seed0 + k % args.fleets, tmp)
                for k, (kind, law, links) in enumerate(jobs)]
        for fut in as_completed(futs):
            d = fut.result()
            done.append(d)
            print(json.dumps(d), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    summary(done)


if __name__ == "__main__":
    main()
