"""Copy-bandwidth matrix between the local GPUs (``netbench.intra.run_intra``) into a run directory.

Stands in for ``netbench sweep --pattern intra`` until the CLI routes that pattern (with no --hosts)
to ``run_intra``. Run: python benchmarks/gpu/intra_matrix.py --out DIR [--iters 20] [--warmup 5]
"""

from __future__ import annotations

import argparse

from netbench.common.rundir import RunDir, utc_now
from netbench.intra import run_intra
from netbench.sweep import SweepOptions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    opts = SweepOptions(iters=args.iters, warmup=args.warmup)
    rundir = RunDir.create(args.out)
    rundir.write_run(status="running", started=utc_now(), launcher="local", backend="cuda", device="cuda",
                     pattern="intra")
    rows = run_intra(opts, rundir, print)
    rundir.write_run(status="completed", ended=utc_now(), rows=len(rows))


if __name__ == "__main__":
    main()
