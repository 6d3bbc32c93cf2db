"""``netbench worker``: run as one rank under torchrun, srun or mpirun."""

from __future__ import annotations

import click

from netbench.commands._options import measurement_options, pair_options
from netbench.commands._params import TOPOLOGY_FILE


@click.command(
    "worker",
    short_help="Be one rank of a sweep started by torchrun, srun or mpirun.",
    epilog="""\b
Examples:
  torchrun --nproc-per-node 8 -m netbench worker -e 1G
  mpirun -np 16 --map-by ppr:8:node netbench worker --pattern pairwise
  srun --ntasks-per-node 8 netbench worker --out /shared/runs/$SLURM_JOB_ID

Rank 0 prints the table and writes the run directory; the others print nothing. Exit status of
rank 0 as `netbench sweep` (docs/exit-status.md); `netbench sweep --launcher mpi|slurm` starts the
ranks itself and adds the inventory and the re-tests.
""",
)
@measurement_options
@click.option(
    "--pattern",
    "patterns",
    multiple=True,
    type=click.Choice(["world", "ring", "pairwise", "rail", "intra"]),
    help="world (default): all ranks; ring/pairwise/rail/intra as in sweep --hosts.",
)
@pair_options
@click.option(
    "--topology",
    type=TOPOLOGY_FILE,  # a FIFO or a device refused at once, as sweep's
    default=None,
    help="Slurm topology.conf, read by rank 0: which leaf switch each host hangs off.",
)
def command(patterns: tuple[str, ...], **kw: object) -> None:
    """One rank of a sweep; the launcher's environment says which one.

    torchrun: RANK/WORLD_SIZE/MASTER_ADDR; mpirun: OMPI_COMM_WORLD_RANK; srun: SLURM_PROCID.
    """
    from netbench.run.external import run_worker
    from netbench.run.options import Options, from_command_line

    pats = list(dict.fromkeys(patterns)) or ["world"]  # a pattern given twice is measured once
    if "world" in pats and len(pats) > 1:
        raise click.BadParameter("world cannot be combined with other patterns", param_hint="--pattern")
    run_worker(from_command_line(Options, {**kw, "patterns": pats}), echo=click.echo)
