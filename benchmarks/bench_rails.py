"""Benchmark (issue 46, item 3): one bad NIC on a rail-optimised fabric, named by the rail-by-rail
re-test.

Each run is ``netbench simulate`` with the default patterns (ring, pairwise) and the default
``--confirm-budget`` (auto): the sweep, its analysis, the re-tests of its suspects against known-good
partners, then, for a node they confirmed slow, the rail-by-rail re-test (``netbench.confirm.rails``)
through the same launch path (``run.launch.Launch`` with ``rails=True``, the simulated launcher, the
real coordinator). Fabric: 2 tiers, 32 nodes a leaf, 8 GPUs a node, ``--rails`` NICs a node, 5%
Gaussian noise unless ``--noise-shape`` says otherwise.

A fault run plants ``nic:HOST/RAIL=F`` on a random host and rail (the seed's). It counts as named
when findings.json holds a ``slow_rail`` finding on that host whose evidence names that NIC (the
simulator's ``mlx5_{RAIL-1}``, ``sim.rails.nic_name``); any other NIC named counts as a false one.
A healthy run (``--factors`` 1) plants nothing: any NIC named is a false one. ``--whole-node``
plants ``node:HOST=F`` instead (every NIC of the node at F: the node, not one NIC): any NIC named is
a false one there too. "Fabric s" is the
sweep's simulated time, "rail s" the rail re-test launch's (start-up and phases), "machine s" this
machine's wall time for the whole run.

    python benchmarks/bench_rails.py --nodes 256 --rails 4,8 --factors 0.7,0.5 --seeds 10
    python benchmarks/bench_rails.py --nodes 256 --rails 4,8 --factors 1 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netbench.sim.rails import nic_name  # noqa: E402


def one(nodes: int, rails: int, factor: float, seed: int, shape: str, whole: bool = False) -> dict:
    rng = np.random.default_rng([seed, rails])
    host, rail = f"node{int(rng.integers(1, nodes + 1)):04d}", int(rng.integers(1, rails + 1))
    out = Path(tempfile.mkdtemp(prefix="bench-rails-")) / "run"
    planted = f"node:{host}={factor:g}" if whole else f"nic:{host}/{rail}={factor:g}"
    fault = [] if factor >= 1 else ["--fault", planted]
    cmd = [sys.executable, "-m", "netbench", "simulate", "--nodes", str(nodes), "--leaves", str(nodes // 32),
           "--rails", str(rails), "--seed", str(seed), "--noise-shape", shape, "--out", str(out), *fault]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    try:
        findings = json.loads((out / "findings.json").read_text())["findings"]
        run = json.loads((out / "run.json").read_text())
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    named = [(f["subject"], (f.get("evidence") or {}).get("nic"))
             for f in findings if f["rule"] == "slow_rail"]
    want = (host, f"{nic_name(rail)}/1") if factor < 1 and not whole else None
    rail_launch = [ln for ln in (run.get("confirm") or {}).get("launches", []) if "rails_of" in ln]
    return {
        "rails": rails, "factor": factor, "seed": seed, "fault": fault[1] if fault else None,
        "exit": done.returncode,
        "named": want in named if want else None, "false": [n for n in named if n != want],
        "fabric_s": run.get("fabric_s"), "confirm_s": (run.get("confirm") or {}).get("seconds"),
        "rail_s": rail_launch[0].get("launch_s") if rail_launch else None, "machine_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--rails", default="4,8")
    ap.add_argument("--factors", default="0.7,0.5", help="the NIC's rate; 1: healthy, nothing planted")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--noise-shape", default="normal")
    ap.add_argument("--whole-node", action="store_true", help="plant node:HOST=F (every NIC), not one NIC")
    ap.add_argument("--json", help="write every run's record here")
    args = ap.parse_args()
    runs = []
    for rails in (int(x) for x in args.rails.split(",")):
        for factor in (float(x) for x in args.factors.split(",")):
            got = [one(args.nodes, rails, factor, s, args.noise_shape, args.whole_node)
                   for s in range(args.first_seed, args.first_seed + args.seeds)]
            runs += got
            named = sum(bool(r["named"]) for r in got)
            false = sum(len(r["false"]) for r in got)
            rail_s = [r["rail_s"] for r in got if r["rail_s"] is not None]
            what = "healthy" if factor >= 1 else f"{'node' if args.whole_node else 'NIC'} at {factor:g}"
            recall = f"named {named}/{len(got)}" if factor < 1 and not args.whole_node else "named -"
            print(f"rails {rails}, {what}: {recall}, false NICs {false}, "
                  f"confirm {np.median([r['confirm_s'] or 0 for r in got]):.1f} s (median), rail re-test "
                  f"{np.median(rail_s) if rail_s else 0:.1f} s (median), machine "
                  f"{np.median([r['machine_s'] for r in got]):.0f} s a run", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
