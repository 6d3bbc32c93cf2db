"""Benchmark: where a planted slow link's one sample ranks among the fleet's pairs.

A candidate link (``netbench.confirm.candidate_links``) is re-run only if its one sample in the sweep
put it among the fleet's worst: practically slow (at most ``slow_pair_factor`` of its prediction and
``mad_k`` sigmas below), else near slow (0.9 or below, beyond the noise). For each seed this plants
``bench_diagnosis``'s link class (two nodes of one leaf) on a simulated fabric, sweeps it (no re-test)
and prints what the link read, its rank among all pairs, and how many pairs were practically slow.

    python benchmarks/bench_link_rank.py [--nodes 256] [--noise-shape t3] [--seeds 30] [--link link-0.7]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from netbench.reports.analyses import link_tests
from netbench.reports.engine import load_context

from netbench.run.options import PairOptions
from netbench.sim.fabric import Fabric, FabricSpec, Fault
from netbench.sim.measure import NOISE_SHAPES
from netbench.sim.options import SimOptions
from netbench.sim.run import simulate

sys.path.insert(0, str(Path(__file__).parent))
from bench_diagnosis import plant  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--noise-shape", default="t3", choices=NOISE_SHAPES)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--link", default="link-0.7", help="bench_diagnosis's link class, link-FACTOR")
    args = ap.parse_args()
    if not args.link.startswith("link-"):
        ap.error(f"--link {args.link!r}: expected link-FACTOR, for example link-0.7")
    n = args.nodes
    print("| seed | link | one sample | rank of all pairs | practically slow pairs | beyond the noise |")
    print("|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        spec = FabricSpec(nodes=n, leaves=max(2, n // 16), oversubscription=2.0, physics="bottleneck")
        rng = np.random.default_rng(1000 * seed + n)  # bench_diagnosis's: the same link a seed
        faults = tuple(Fault.parse(f) for f in plant(args.link, Fabric.build(spec), rng))
        out = tempfile.mkdtemp(prefix="bench_link_rank-")
        try:
            opts = SimOptions(spec, faults, noise=0.05, noise_shape=args.noise_shape, seed=seed,
                              pairs=PairOptions(pair_sizes=[1 << 30]), out=f"{out}/run")
            ctx = load_context(simulate(opts).rundir.path)
            m, t = ctx.pair_model, ctx.policy.thresholds
            a, b = faults[0].subject.split("|")
            i, j = sorted((m.hosts.index(a), m.hosts.index(b)))
            up = np.triu(np.isfinite(m.resid), 1)
            r, z = m.resid[i, j], m.resid[i, j] / m.class_sigma()[i, j]
            slow = int(np.isfinite(link_tests(m, t).p).sum())
            beyond = "yes" if z <= -t.mad_k else "no"
            rank = int((m.resid[up] < r).sum()) + 1
            print(f"| {seed} | {a}-{b} | {np.exp(r):.3f} ({z:.1f} sigmas) | {rank} of {int(up.sum())} "
                  f"| {slow} | {beyond} |", flush=True)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
