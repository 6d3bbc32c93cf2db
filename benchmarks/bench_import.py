"""Benchmark: `netbench import nccl-tests` on big logs made from a real one (issue 24: a 50 MB log had
written 584k of 896k rows after 400 s, at 3.9 GB).

The log is the public 2 x 8 H100 all_reduce log (shared fixtures, nccl-tests-public/SOURCES.md), in
two shapes: ``runs``, its whole run (rank lines, table, summary) repeated until the file has the size
asked, each copy with its own pids (one imported run each, as a log of many jobs concatenated);
``table``, one run whose table has that many rows (its rows repeated with sizes stepping by 8 B, as
``-i 8`` prints). ``netbench import
nccl-tests LOG --no-report`` runs in a child process, measured from outside: wall, CPU (user + sys)
and peak RSS from ``wait4``, with the load average beside them (the machine is shared).

    python benchmarks/bench_import.py --mb 5 50 [--shape runs table]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from child_cost import measured  # noqa: E402 - beside this file
from fixtures_path import fixture  # noqa: E402

LOG = "nccl-tests-public/lessizzmore-create-a3mega-ztan-fork__ztan-NCCL-test-result.txt"


def the_run() -> list[str]:
    """The log's run as nccl-tests printed it: the lines between the markdown fences."""
    lines = fixture(LOG).read_text().splitlines()
    start = lines.index("```") + 1
    return lines[start : lines.index("```", start)]


def make_log(path: Path, mb: int, shape: str) -> int:
    """Write a log of about ``mb`` MB; returns the table lines in it."""
    run, target = the_run(), mb << 20
    rows = [line for line in run if line.strip()[:1].isdigit()]
    if shape == "runs":
        # each job its own pids, as real jobs have (one run copied is imported once: issue 44)
        text = "\n".join(run) + "\n"
        copies = target // len(text) + 1
        path.write_text("".join(re.sub(r"Pid +(\d+)", lambda m, k=k: f"Pid {int(m[1]) + 100 * k:>6}", text)
                                for k in range(copies)))
        return copies * len(rows)
    first = run.index(rows[0])
    out, size, k = run[:first], 0, 0
    while size < target:
        cells = rows[k % len(rows)].split()
        k += 1
        cells[0], cells[1] = str(8 * k), str(2 * k)  # float: 4 B an element
        line = f"{cells[0]:>12}  {cells[1]:>12}  " + "  ".join(f"{c:>7}" for c in cells[2:])
        out.append(line)
        size += len(line) + 1
    out += [line for line in run[first:] if line.startswith("#")]
    path.write_text("\n".join(out) + "\n")
    return k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, nargs="+", default=[5, 50])
    ap.add_argument("--shape", nargs="+", choices=("runs", "table"), default=["runs", "table"])
    args = ap.parse_args()
    print("| log | MB | table lines | rows | wall s | CPU s | peak RSS MB | load avg | rc |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shape:
            for mb in args.mb:
                log = Path(tmp) / f"{shape}{mb}.log"
                lines = make_log(log, mb, shape)
                out = Path(tmp) / f"run-{shape}{mb}"
                got = measured([sys.executable, "-m", "netbench", "import", "nccl-tests", str(log),
                                "--no-report", "--out", str(out)])
                load, mib = os.getloadavg()[0], log.stat().st_size / 2**20
                print(f"| {shape} | {mib:.0f} | {lines:,} | {2 * lines:,} | {got['wall']:.1f} "
                      f"| {got['cpu']:.1f} | {got['rss_mb']:.0f} | {load:.1f} | {got['rc']} |", flush=True)


if __name__ == "__main__":
    main()
