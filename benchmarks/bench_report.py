"""Benchmark: analysis + HTML for a synthetic 1,024-node fleet (goal: <= 30 s, file <= 25 MB).

The fleet: every one of the 523,776 pairs at one size (1 GiB all_reduce, 8 GPUs per node, per-rank
times included as a real sweep writes them) plus a world ring at 20 sizes, with 4 slow nodes and 8
slow links planted. The timed part runs in a fresh process, as ``netbench report`` would: load the
run directory, run every rule, write findings.json and report.html; then the CLI end to end.

    python benchmarks/bench_report.py [--nodes 1024] [--leaves 32] [--run DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # synthetic.py: test data, not shipped


def generate(nodes: int, leaves: int, out: Path) -> dict:
    from synthetic import host_names, make_fleet, plant_faults, write_run_dir

    hosts = host_names(nodes)
    slow_nodes, slow_links = plant_faults(hosts, 4, 8, seed=1)
    fleet = make_fleet(
        nodes, leaves, pair_sizes=(1 << 30,), slow_nodes=slow_nodes, slow_links=slow_links, noise=0.05, seed=1
    )
    write_run_dir(fleet, out)
    truth = {
        "nodes": sorted(slow_nodes),
        "links": sorted("|".join(k) for k in slow_links),
        "rows": len(fleet.rows),
    }
    (out / "truth.json").write_text(json.dumps(truth))
    return truth


def timed(run: Path) -> dict:
    """In this (fresh) process: the phases of report_run, timed one by one."""
    from netbench.reports.context import gc_paused
    from netbench.reports.engine import load_context, run_rules
    from netbench.reports.html import findings_record, render_html

    from netbench.common.findings import write_findings

    with gc_paused():
        t0 = time.perf_counter()
        ctx = load_context(run)
        t1 = time.perf_counter()
        findings = run_rules(ctx)
        t2 = time.perf_counter()
        write_findings(run, findings_record(findings, ctx))
        (run / "report.html").write_text(render_html(ctx, findings), encoding="utf-8")
        t3 = time.perf_counter()
    return {
        "load": t1 - t0,
        "analysis": t2 - t1,
        "html": t3 - t2,
        "findings": len(findings),
        "slow_nodes": sorted(f.subject for f in findings if f.rule == "slow_node"),
        "slow_links": sorted(
            "|".join(sorted(f.subject.split("|"))) for f in findings if f.rule == "slow_pair"
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--leaves", type=int, default=32)
    ap.add_argument("--run", help="use (or create) the run directory here instead of a temporary one")
    ap.add_argument("--timed", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.timed:
        print(json.dumps(timed(Path(args.timed))))
        return
    run = Path(args.run) if args.run else Path(tempfile.mkdtemp(prefix="nb-bench-")) / "run"
    if (run / "truth.json").exists():
        truth = json.loads((run / "truth.json").read_text())
    else:
        t = time.perf_counter()
        truth = generate(args.nodes, args.leaves, run)
        print(f"generated {truth['rows']} rows in {time.perf_counter() - t:.0f} s")
    print(f"results.jsonl: {(run / 'results.jsonl').stat().st_size / 1e6:.0f} MB, {truth['rows']} rows")
    out = subprocess.run(
        [sys.executable, __file__, "--timed", str(run)], capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    size = os.path.getsize(run / "report.html")
    t = time.perf_counter()
    cli = subprocess.run(
        [sys.executable, "-m", "netbench", "report", str(run), "--format", "json"],
        capture_output=True,
        text=True,
    )
    t_cli = time.perf_counter() - t
    total = r["load"] + r["analysis"] + r["html"]
    print("| nodes | pairs | rows | load s | analysis s | html s | total s | CLI end-to-end s | report MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.nodes} | {args.nodes * (args.nodes - 1) // 2} | {truth['rows']} | {r['load']:.1f} | "
        f"{r['analysis']:.1f} | {r['html']:.1f} | {total:.1f} | {t_cli:.1f} (exit {cli.returncode}) | "
        f"{size / 1e6:.1f} |"
    )
    print(
        f"planted faults found exactly: nodes {r['slow_nodes'] == truth['nodes']}, "
        f"links {r['slow_links'] == truth['links']}; {r['findings']} findings"
    )
    print(
        f"goal <= 30 s: {'met' if t_cli <= 30 else 'MISSED'}; goal <= 25 MB: "
        f"{'met' if size <= 25e6 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
