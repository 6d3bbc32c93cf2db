"""``netbench sweep``: measure collectives on this machine or across a cluster."""

from __future__ import annotations

import click

from netbench.params import DURATION, SIZE, CsvList


def _coll(name: str) -> str:
    from collectives.ops import get_collective

    return get_collective(name).name


@click.command(
    "sweep",
    short_help="Measure collectives across message sizes (local or --hosts).",
    epilog="""\b
Examples:
  netbench sweep                                  # all local GPUs (NCCL) or CPU ranks (gloo)
  netbench sweep --procs 4 -b 1K -e 16M -f 4      # 4 gloo ranks, 1 KiB..16 MiB
  netbench sweep --collectives all_reduce,sendrecv -n 50 -w 10 --dtype bf16
  netbench sweep --out runs/today --no-check

Exit codes: 0 ok, 1 a rank failed or results were wrong, 2 bad input.
""",
)
@click.option("--collectives", "-c", "collectives", type=CsvList(_coll), default="all_reduce,all_gather",
              show_default=True, help="Comma list: all_reduce, all_gather, reduce_scatter, broadcast, "
              "reduce, all_to_all, sendrecv.")
@click.option("--min-bytes", "-b", type=SIZE, default=None, help="Smallest size (K/M/G binary). "
              "Default 8 B.")
@click.option("--max-bytes", "-e", type=SIZE, default=None, help="Largest size. Default 64M (gloo), "
              "8G capped by free GPU memory (NCCL).")
@click.option("--factor", "-f", type=click.IntRange(min=2), default=2, show_default=True,
              help="Multiply the size by this each step.")
@click.option("--iters", "-n", type=click.IntRange(min=1), default=20, show_default=True,
              help="Timed iterations per size.")
@click.option("--warmup", "-w", type=click.IntRange(min=0), default=5, show_default=True,
              help="Untimed warm-up iterations per size.")
@click.option("--dtype", "-d", default="float", show_default=True,
              help="float, half, bfloat16, double, int8, uint8, int32, int64 (or fp32, bf16, fp16).")
@click.option("--op", "-o", default="sum", show_default=True, help="Reduction: sum, prod, max, min, avg.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Untimed pass that counts wrong result elements.")
@click.option("--in-place", "in_place", type=click.Choice(["both", "out", "in"]), default="both",
              show_default=True, help="Out-of-place, in-place, or both.")
@click.option("--root", type=click.IntRange(min=0), default=0, show_default=True,
              help="Root rank of broadcast and reduce.")
@click.option("--procs", "-p", type=click.IntRange(min=1), default=None,
              help="CPU ranks on this machine when there is no GPU (default 2-4 by core count).")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None,
              help="Force a backend (default: nccl when CUDA GPUs are visible, else gloo).")
@click.option("--cuda-graph", is_flag=True, help="Capture the timed loop in a CUDA graph (nccl-tests -G).")
@click.option("--timeout", "timeout_s", type=DURATION, default="60s", show_default=True,
              help="A collective (or rank) silent this long has failed.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory (default netbench-runs/<UTC time>-<id>).")
@click.option("--report/--no-report", default=True, show_default=True,
              help="Write findings.json and report.html at the end.")
def command(**kw: object) -> None:
    """Sweep collectives over message sizes and print nccl-tests' table.

    With no arguments it runs on this machine: every local GPU with NCCL when CUDA is available,
    otherwise CPU ranks with gloo. Every row is saved to the run directory as it is measured.
    """
    from netbench.sweep import SweepOptions, finish_report, run_local

    opts = SweepOptions(**kw)  # type: ignore[arg-type]
    rundir, outcome = run_local(opts, echo=click.echo)
    if opts.report:
        finish_report(rundir, click.echo)
    wrong = any((r.get("wrong") or 0) > 0 for r in rundir.read_rows())
    if outcome.status != "completed" or wrong:
        raise SystemExit(1)
