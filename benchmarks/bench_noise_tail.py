"""Benchmark: the learned noise tail on synthetic residuals (issue 46), fast enough for many fleets.

Per noise law of the simulator: ``--fleets`` fleets of ``--pairs`` residuals, each a pair's log busbw
around the median as ``sim.measure.noise_factor`` draws it (as tests/test_noise.py does), two of them
slowed to links at 0.75 and 0.7 of their prediction. Counted: fleets where a healthy pair passes the
family-wise bar (Holm's first step, fwer / pairs, past ``mad_k``: a false alarm), the links past it
(found), and the bar (log busbw below the median) against the ideal detector's, which knows the law
(``bench_one_sample.ideal_bar``). Without the pair model's fit around them (cells, node effects), so a
quick check of the tail alone; ``bench_one_sample.py`` is the whole report on simulated fleets.

    python benchmarks/bench_noise_tail.py [--pairs 32640] [--fleets 100] [--laws normal,t3,...]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from bench_one_sample import ideal_bar
from netbench.reports.noise import learn
from netbench.reports.stats import residual_sigma

from netbench.sim.measure import NOISE_SHAPES, noise_factor

FWER, MAD_K = 0.05, 4.0
LINKS = (0.75, 0.7)


def law_row(law: str, pairs: int, fleets: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    alarms, found, bars = 0, dict.fromkeys(LINKS, 0), []
    for _ in range(fleets):
        r = -np.log(noise_factor(law, 0.05, rng.standard_normal(pairs), rng))
        r -= np.median(r)
        for k, f in enumerate(LINKS):
            r[k] += math.log(f)
        tail = learn(r, np.zeros(r.size, dtype=int), ["spine"], residual_sigma(r)).tail("spine")
        x = -r / tail.sigma
        bar = max(MAD_K, tail.bar(FWER / pairs))
        alarms += bool((x[len(LINKS):] >= bar).any())
        for k, f in enumerate(LINKS):
            found[f] += bool(x[k] >= bar)
        bars.append(bar * tail.sigma)
    ideal = ideal_bar(law, 0.05, FWER / pairs)
    med = float(np.median(bars))
    links = "; ".join(f"{f}: {n}/{fleets}" for f, n in found.items())
    return (f"| {law} | {pairs:,} | {fleets} | {alarms} | {links} | {math.exp(-med):.3f} "
            f"| {math.exp(-ideal):.3f} | {med / ideal:.2f} [{max(bars) / ideal:.2f}] |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=32_640)
    ap.add_argument("--fleets", type=int, default=100)
    ap.add_argument("--laws", default=",".join(NOISE_SHAPES))
    ap.add_argument("--seed", type=int, default=46)
    args = ap.parse_args()
    print("| law | pairs | fleets | fleets with a false alarm | links found | bar (busbw ratio), median "
          "| ideal | bar / ideal (log), median [max] |")
    print("|---|---|---|---|---|---|---|---|")
    for law in args.laws.split(","):
        print(law_row(law, args.pairs, args.fleets, args.seed), flush=True)


if __name__ == "__main__":
    main()
