"""``netbench sweep``: measure collectives on this machine or across a cluster."""

from __future__ import annotations

import click

from netbench.commands._options import _coll, _size, measurement_options
from netbench.params import CsvList


@click.command(
    "sweep",
    short_help="Measure collectives across message sizes (local or --hosts).",
    epilog="""\b
Examples:
  netbench sweep                                  # all local GPUs (NCCL) or CPU ranks (gloo)
  netbench sweep --procs 4 -b 1K -e 16M -f 4      # 4 gloo ranks, 1 KiB..16 MiB
  netbench sweep --collectives all_reduce,sendrecv -n 50 -w 10 --dtype bf16
  netbench sweep --out runs/today --no-check
  netbench sweep --hosts hosts.txt                # ring over all sizes + every pair at 3 large sizes
  netbench sweep --hosts hosts.txt --pattern pairwise --pair-batch 1 --pair-sizes 64M,256M
  netbench sweep --hosts hosts.txt --procs-per-host 2 --python /opt/venv/bin/python
  netbench sweep --launcher mpi -p 4                # mpirun -np 4 ... netbench worker
  salloc -N 4 --ntasks-per-node 8 netbench sweep --launcher slurm --pattern pairwise

Cost with --hosts: the ring sweeps the full size range once; pairwise runs N-1 rounds (N hosts) of
N/2 pairs at once, each pair measuring the pair sizes (3 by default) -- about N-1 times the time of
one pair at those sizes, or N(N-1)/2 times with --pair-batch 1.

Exit codes: 0 ok, 1 a rank failed or results were wrong, 2 bad input.
""",
)
@measurement_options
@click.option(
    "--procs",
    "-p",
    type=click.IntRange(min=1),
    default=None,
    help="CPU ranks on this machine when there is no GPU (default 2-4 by core count).",
)
@click.option(
    "--hosts",
    "hosts_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Hosts file: run on every host over SSH (pairs, ring).",
)
@click.option(
    "--pattern",
    "patterns",
    multiple=True,
    type=click.Choice(["ring", "pairwise", "intra"]),
    help="With --hosts (repeatable; default ring + pairwise).",
)
@click.option(
    "--pair-batch",
    type=click.IntRange(min=1),
    default=None,
    help="At most K pairs at once (default: whole rounds of disjoint pairs).",
)
@click.option(
    "--pair-sizes",
    type=CsvList(_size),
    default=None,
    help="Sizes for pairs (default 1M,4M,16M gloo; 64M,256M,1G NCCL).",
)
@click.option(
    "--pair-collectives",
    type=CsvList(_coll),
    default=None,
    help="Collectives for pairs (default: --collectives).",
)
@click.option(
    "--procs-per-host",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CPU ranks per host with gloo (NCCL: one rank per GPU).",
)
@click.option(
    "--python", default=None, help="Python on the hosts (default: a host's python= label, else python3)."
)
@click.option("--ssh-config", type=click.Path(dir_okay=False), default=None, help="ssh_config to use.")
@click.option("--accept-new-host-keys", is_flag=True, help="Trust unknown host keys on first use.")
@click.option(
    "--topology",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Slurm topology.conf: which leaf switch each host hangs off (else switch= labels).",
)
@click.option(
    "--launcher",
    type=click.Choice(["ssh", "local", "mpi", "slurm"]),
    default="ssh",
    show_default=True,
    help="ssh (with --hosts); local (each host of the file runs on this machine, e.g. a GPU subset "
    "given by its gpus= label); mpi (mpirun starts `netbench worker` ranks, --hosts is its hostfile); "
    "slurm (srun inside the current allocation).",
)
@click.option(
    "--advertise",
    default=None,
    help="Address the hosts use to reach this machine (default: the one routing to the first host).",
)
def command(**kw: object) -> None:
    """Sweep collectives over message sizes and print nccl-tests' table.

    With no arguments it runs on this machine: every local GPU with NCCL when CUDA is available,
    otherwise CPU ranks with gloo. Every row is saved to the run directory as it is measured.
    """
    from netbench.sweep import main_from_cli

    raise SystemExit(main_from_cli(kw, click.echo))
