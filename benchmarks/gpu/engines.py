"""Side by side: the two engines of one run (``netbench sweep --engine both``), per size.

    python benchmarks/gpu/engines.py RUN_DIR [--collective all_reduce]

Prints, for every (collective, in-place) and size, the time per operation through NCCL directly
(nccl4py) and through torch's process group, and torch / nccl: the torch overhead users see.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--collective", default=None)
    args = ap.parse_args()
    times: dict[tuple, dict[str, float]] = defaultdict(dict)
    for line in (args.run_dir / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("status") != "ok" or (args.collective and r["collective"] != args.collective):
            continue
        key = (r["collective"], r["in_place"], r["bytes"], r.get("cuda_graph", False))
        times[key][r.get("engine", "torch")] = r["time_us"]
    head = ("collective", "place", "graph", "bytes", "nccl us", "torch us", "torch/nccl")
    print("{:<15} {:<5} {:<5} {:>12} {:>9} {:>9} {:>10}".format(*head))
    for (coll, ip, nbytes, graph), t in sorted(times.items()):
        n, tt = t.get("nccl"), t.get("torch")
        cells = [f"{v:.2f}" if v else "-" for v in (n, tt, tt / n if n and tt else None)]
        place, graphed = "in" if ip else "out", "yes" if graph else "no"
        print(f"{coll:<15} {place:<5} {graphed:<5} {nbytes:>12} {cells[0]:>9} {cells[1]:>9} {cells[2]:>10}")


if __name__ == "__main__":
    main()
