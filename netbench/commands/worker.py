"""``netbench worker``: run as one rank under torchrun, srun or mpirun."""

from __future__ import annotations

import click

from netbench.commands.sweep import _coll, _size
from netbench.params import DURATION, SIZE, CsvList


@click.command(
    "worker",
    short_help="Be one rank of a sweep started by torchrun, srun or mpirun.",
    epilog="""\b
Examples:
  torchrun --nproc-per-node 8 -m netbench worker -e 1G
  mpirun -np 16 --map-by ppr:8:node netbench worker --pattern pairwise
  srun --ntasks-per-node 8 netbench worker --out /shared/runs/$SLURM_JOB_ID

Rank 0 prints the table and writes the run directory; the others print nothing.
""",
)
@click.option("--collectives", "-c", type=CsvList(_coll), default="all_reduce,all_gather", show_default=True)
@click.option("--min-bytes", "-b", type=SIZE, default=None)
@click.option("--max-bytes", "-e", type=SIZE, default=None)
@click.option("--factor", "-f", type=click.IntRange(min=2), default=2, show_default=True)
@click.option("--iters", "-n", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--warmup", "-w", type=click.IntRange(min=0), default=5, show_default=True)
@click.option("--dtype", "-d", default="float", show_default=True)
@click.option("--op", "-o", default="sum", show_default=True)
@click.option("--check/--no-check", default=True, show_default=True)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default=None)
@click.option(
    "--pattern",
    "patterns",
    multiple=True,
    type=click.Choice(["world", "ring", "pairwise", "intra"]),
    help="world (default): all ranks; ring/pairwise/intra as in sweep --hosts.",
)
@click.option("--pair-sizes", type=CsvList(_size), default=None)
@click.option("--pair-batch", type=click.IntRange(min=1), default=None)
@click.option("--timeout", "timeout_s", type=DURATION, default="60s", show_default=True)
@click.option("--out", type=click.Path(file_okay=False), default=None)
@click.option("--report/--no-report", default=True, show_default=True)
def command(patterns: tuple[str, ...], **kw: object) -> None:
    """One rank of a sweep; the launcher's environment says which one.

    torchrun: RANK/WORLD_SIZE/MASTER_ADDR; mpirun: OMPI_COMM_WORLD_RANK; srun: SLURM_PROCID.
    """
    from netbench.external_run import WorkerOptions, run_worker

    pats = list(patterns) or ["world"]
    if "world" in pats and len(pats) > 1:
        raise click.BadParameter("world cannot be combined with other patterns", param_hint="--pattern")
    run_worker(WorkerOptions(patterns=pats, **kw), echo=click.echo)  # type: ignore[arg-type]
