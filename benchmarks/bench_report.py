"""Benchmark: analysis + HTML for a synthetic 1,024-node fleet (goal: <= 30 s, file <= 25 MB).

The fleet: every one of the 523,776 pairs at one size (1 GiB all_reduce, 8 GPUs per node, per-rank
times included as a real sweep writes them) plus a world ring at 20 sizes, a few planted faults.
Times loading the run directory, the analysis (all rules), and rendering + writing the HTML.

    python benchmarks/bench_report.py [--nodes 1024] [--leaves 32] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.analysis import load_context, run_rules  # noqa: E402
from reports.html import findings_doc, render_html  # noqa: E402
from reports.synthetic import host_names, make_fleet, plant_faults, write_run_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--leaves", type=int, default=32)
    ap.add_argument("--keep", help="write the run directory here and keep it")
    args = ap.parse_args()

    t0 = time.perf_counter()
    hosts = host_names(args.nodes)
    slow_nodes, slow_links = plant_faults(hosts, 4, 8, seed=1)
    fleet = make_fleet(args.nodes, args.leaves, pair_sizes=(1 << 30,), slow_nodes=slow_nodes,
                       slow_links=slow_links, noise=0.05, seed=1)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nb-bench-"))
    run = write_run_dir(fleet, root / "run")
    n_rows = len(fleet.rows)
    del fleet
    t_gen = time.perf_counter() - t0
    print(f"generated {n_rows} rows in {t_gen:.1f} s; results.jsonl "
          f"{(run / 'results.jsonl').stat().st_size / 1e6:.0f} MB")

    t = time.perf_counter()
    ctx = load_context(run)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    findings = run_rules(ctx)
    t_rules = time.perf_counter() - t
    t = time.perf_counter()
    import json

    (run / "findings.json").write_text(json.dumps(findings_doc(findings, ctx), indent=2, default=str))
    html = render_html(ctx, findings)
    (run / "report.html").write_text(html, encoding="utf-8")
    t_html = time.perf_counter() - t
    size = os.path.getsize(run / "report.html")
    total = t_load + t_rules + t_html
    print(f"| nodes | pairs | rows | load s | analysis s | html s | total s | report MB | findings |")
    print(f"|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.nodes} | {args.nodes * (args.nodes - 1) // 2} | {n_rows} | {t_load:.1f} | {t_rules:.1f} | "
          f"{t_html:.1f} | {total:.1f} | {size / 1e6:.1f} | {len(findings)} |")
    found_nodes = sorted(f.subject for f in findings if f.rule == "slow_node")
    found_links = sorted(tuple(f.subject.split("|")) for f in findings if f.rule == "slow_pair")
    print("planted nodes found:", found_nodes == sorted(slow_nodes),
          "links found:", sorted(tuple(sorted(k)) for k in found_links) == sorted(slow_links))
    print("goal <= 30 s:", "met" if total <= 30 else "MISSED", "| goal <= 25 MB:", "met" if size <= 25e6 else "MISSED")


if __name__ == "__main__":
    main()
