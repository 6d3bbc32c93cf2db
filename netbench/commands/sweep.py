"""``netbench sweep``: measure collectives on this machine or across a cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from netbench.commands._options import measurement_options, pair_options

if TYPE_CHECKING:
    from netbench.options import ClusterOptions


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
  netbench sweep --hosts hosts.txt --topology topology.conf --confirm-budget 120
  netbench sweep --hosts hosts.txt --topology topology.conf --pair-schedule circle --confirm-budget 0
  netbench sweep --hosts hosts.txt --procs-per-host 2 --python /opt/venv/bin/python
  netbench sweep --hosts hosts.txt --pattern rail   # GPU k with GPU k of every pair: one NIC each
  netbench sweep --launcher mpi -p 4                # mpirun -np 4 ... netbench worker
  netbench sweep --hosts hosts.txt --launcher mpi --ssh-config ~/.ssh/cluster  # mpirun over ssh
  salloc -N 4 netbench sweep                      # the allocation's nodes, switches, inventory
  salloc -N 4 --ntasks-per-node 8 netbench sweep --launcher slurm --pattern pairwise

Cost with --hosts: the ring sweeps the full size range once; pairwise runs N-1 rounds (N hosts) of
N/2 pairs at once, each pair measuring the pair sizes (3 by default) -- about N-1 times the time of
one pair at those sizes, or N(N-1)/2 times with --pair-batch 1. With a topology the rounds go leaf
against leaf (N-1 rounds for an even number of equal leaves, N for an odd one). Then the suspects of
the analysis are re-tested within --confirm-budget (one more launch on the hosts involved).

--out DIR must not hold a run already; --out 'runs/{id}' makes a fresh directory per run.

Exit codes: 0 ok, 1 a rank or host failed (or sent invalid data) or results were wrong, 2 bad input
(also an existing run directory as --out, or hosts whose torch cannot use their GPUs).
""",
)
@measurement_options
@click.option(
    "--procs",
    "-p",
    type=click.IntRange(1, 1024),  # CPU ranks of one machine; more is a typo, not a benchmark
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
    type=click.Choice(["ring", "pairwise", "rail", "intra", "copy-matrix"]),
    help="Repeatable. With --hosts: ring, pairwise (default both), rail (for each pair of hosts, rank k "
    "with rank k: one group per rail, all at once, so each NIC and cable is measured alone), intra "
    "(the ranks of each host alone). "
    "Without: intra is every local rank as this host's group (world labelled intra); copy-matrix is the "
    "GPU-to-GPU copy bandwidth of this machine (no collectives, no --hosts).",
)
@pair_options
@click.option(
    "--confirm-budget",
    "confirm_budget_s",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="With --hosts (ssh, local): seconds for re-testing the pairwise phase's suspects (slow or "
    "borderline nodes and links) against known-good partners of the same hop class; the report says "
    "confirmed or cleared. 0: off.",
)
@click.option(
    "--policy",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Policy TOML for the report and the re-tests (thresholds, severities), as `netbench report`.",
)
@click.option(
    "--procs-per-host",
    type=click.IntRange(1, 1024),
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
    default=None,
    help="Default: slurm inside a Slurm allocation of several nodes when --hosts is not given, "
    "else ssh. ssh (with --hosts); local (each host of the file runs on this machine, e.g. a GPU subset "
    "given by its gpus= label); mpi (mpirun starts `netbench worker` ranks; with --hosts, Open MPI's ssh "
    "launcher over the hosts, ssh never prompting, stopped if rank 0 has not started within twice "
    "--timeout); "
    "slurm (inside the current allocation: its nodes, `scontrol show topology`, the inventory as a job "
    "step, then srun).",
)
@click.option(
    "--advertise",
    default=None,
    help="Address the hosts use to reach this machine (default: the one routing to the first host).",
)
def command(patterns: tuple[str, ...], **kw: object) -> None:
    """Sweep collectives over message sizes and print nccl-tests' table.

    With no arguments it runs on this machine: every local GPU with NCCL when CUDA is available,
    otherwise CPU ranks with gloo. Every row is saved to the run directory as it is measured.
    """
    from netbench.options import ClusterOptions

    asked = list(patterns)
    if kw["launcher"] is None:
        kw["launcher"] = _default_launcher(kw.get("hosts_file"))
    opts = ClusterOptions(**kw)  # type: ignore[arg-type]
    if asked:
        opts.patterns = asked
    raise SystemExit(dispatch(opts, asked, click.echo))


def _default_launcher(hosts_file: object) -> str:
    """slurm when started by salloc/sbatch on several nodes without --hosts (the allocation is the
    hosts file), else ssh. Inside an srun step netbench is a rank, never the launcher."""
    if hosts_file:
        return "ssh"
    from netbench.common.slurm import Allocation

    alloc = Allocation.from_env()
    return "slurm" if alloc is not None and not alloc.in_step and len(alloc.nodes) > 1 else "ssh"


def dispatch(opts: ClusterOptions, asked: list[str], echo: Callable[[str], None]) -> int:
    """Which path runs the sweep; every path plans with netbench.planner and runs the engine."""
    from netbench.common.errors import UsageError
    from netbench.engine import exit_status, finish_report

    if "copy-matrix" in asked:
        if asked != ["copy-matrix"] or opts.hosts_file or opts.launcher in ("mpi", "slurm"):
            raise UsageError(
                "--pattern copy-matrix measures this machine's GPUs alone: no --hosts, no other pattern"
            )
        from netbench.copy_matrix import run_copy_matrix

        rundir, rows = run_copy_matrix(opts.local(), echo)
        if opts.report:
            finish_report(rundir, echo)
        return 0 if rows and all(r.get("status") == "ok" and not r.get("wrong") for r in rows) else 1
    if opts.launcher == "slurm":  # hosts, switches and inventory from Slurm, then srun
        from netbench.allocation import run_in_allocation

        return run_in_allocation(opts, asked or ["ring", "pairwise"], echo)
    if opts.launcher == "mpi" and opts.hosts_file:  # Open MPI's ssh launcher over the hosts
        from netbench.launch.mpirun import run_mpirun

        return run_mpirun(opts, asked or ["ring", "pairwise"], echo)
    if opts.launcher == "mpi":  # mpirun starts `netbench worker` ranks here; rank 0 leads
        import subprocess

        from netbench.launch.wrap import mpirun_argv
        from netbench.options import default_procs

        argv = mpirun_argv(opts, asked or ["world"], opts.procs or default_procs())
        echo(f"# {' '.join(argv[:4])} ... netbench worker")
        return subprocess.run(argv).returncode
    if opts.policy:  # a broken policy is bad input before anything runs, not a report that failed
        from netbench.reports.policy import PolicyError, load_policy

        try:
            load_policy(opts.policy)
        except PolicyError as exc:
            raise UsageError(str(exc)) from None
    if opts.hosts_file:
        from netbench.cluster import run_cluster

        rundir, outcome = run_cluster(opts, echo=echo)
        topology = opts.topology
    else:
        if set(asked) - {"intra"}:
            raise UsageError("--pattern ring/pairwise/rail need --hosts (one machine runs the world pattern)")
        from netbench.sweep import run_local

        rundir, outcome = run_local(opts.local(), echo=echo, patterns=asked or None)
        topology = None
    if opts.report and outcome.status != "interrupted":
        finish_report(rundir, echo, policy=opts.policy, topology=topology)
    return exit_status(outcome, rundir)
