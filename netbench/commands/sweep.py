"""``netbench sweep``: measure collectives on this machine or across a cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from netbench.commands._history import history_options
from netbench.commands._options import k8s_options, measurement_options, pair_options
from netbench.commands._params import (
    BUDGET,
    DURATION,
    HOSTS_FILE,
    POLICY_FILE,
    SSH_CONFIG,
    TOPOLOGY_FILE,
    Count,
)
from netbench.defaults import INVENTORY_TIMEOUT_S, START_TIMEOUT_S
from netbench.sites import SITES

if TYPE_CHECKING:
    from netbench.run.options import Options


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
  netbench sweep --hosts hosts.txt --topology topology.conf --confirm-budget 5m
  netbench sweep --hosts hosts.txt --topology topology.conf --pair-schedule circle --confirm-budget 0
  netbench sweep --hosts hosts.txt --procs-per-host 2 --python /opt/venv/bin/python
  netbench sweep --hosts hosts.txt --pattern rail   # GPU k with GPU k of every pair: one NIC each
  netbench sweep --launcher mpi -p 4                # mpirun starts this machine's 4 ranks
  netbench sweep --hosts hosts.txt --launcher mpi --ssh-config ~/.ssh/cluster  # mpirun over ssh
  salloc -N 4 netbench sweep                      # the allocation's nodes, switches, inventory
  salloc -N 4 --ntasks-per-node 8 netbench sweep --launcher slurm --pattern pairwise
  netbench sweep --launcher k8s --k8s-image registry/netbench:0.1 --k8s-resource rdma/ib=1
  netbench sweep --launcher k8s --k8s-nodes pool=h100 --k8s-namespace nb --k8s-label

Cost with --hosts: the ring sweeps the full size range once; pairwise runs N-1 rounds (N hosts) of
N/2 pairs at once, each pair measuring the pair sizes (3 by default) -- about N-1 times the time of
one pair at those sizes, or N(N-1)/2 times with --pair-batch 1. With a topology the rounds go leaf
against leaf (N-1 rounds for an even number of equal leaves, N for an odd one). Then the suspects of
the analysis are re-tested within --confirm-budget (one more launch on the hosts involved; auto: 60 s
up to 256 hosts, 120 s at 1,024, growing as the square root of the host count).

--out DIR must not hold a run already; --out 'runs/{id}' makes a fresh directory per run.

Exit status, the same on every --launcher (docs/exit-status.md): 0 pass; 1 warnings only; 2 failures
(a node or link to drain, a host or rank that failed, wrong results) or bad input (one error line: an
existing run directory as --out, an option the launcher cannot honour, hosts whose torch cannot use
their GPUs); 3 no verdict (nothing measured, the report could not be made, or the run directory's
disk is full); interrupted: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP (run.json says so; a second signal
ends at once).
""",
)
@measurement_options
@click.option(
    "--procs",
    "-p",
    type=Count(1, 1024),  # CPU ranks of one machine; more is a typo, not a benchmark
    default=None,
    help="CPU ranks on this machine when there is no GPU (default 2-4 by core count).",
)
@click.option(
    "--hosts",
    "hosts_file",
    type=HOSTS_FILE,
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
    type=BUDGET,
    default="auto",
    show_default=True,
    help="Time (90, 90s, 2m) for re-testing the pairwise phase's suspects (slow or borderline nodes and "
    "links) against known-good partners of the same hop class, one more launch on every --launcher; the "
    "report says confirmed or cleared. auto: 60 s up to 256 hosts, growing with the square root of the "
    "host count beyond (120 s at 1,024). 0: off.",
)
@click.option(
    "--start-timeout",
    "start_timeout_s",
    type=DURATION,
    default=START_TIMEOUT_S,
    show_default=True,
    help="Every host's agent and ranks must have started within this (ssh, srun or mpirun, the python "
    "import, the rendezvous), else that host is down and the others go on.",
)
@click.option(
    "--policy",
    type=POLICY_FILE,
    default=None,
    help="Policy TOML for the report and the re-tests (thresholds, severities), as `netbench report`.",
)
@click.option(
    "--inventory/--no-inventory",
    default=True,
    show_default=True,
    help="Probe every host first (drivers, firmware, NICs, switches' neighbours, port counters before and "
    "after); unreachable hosts are recorded and left out. --no-inventory starts the ranks at once.",
)
@click.option(
    "--inventory-timeout",
    "inventory_timeout_s",
    type=DURATION,
    default=INVENTORY_TIMEOUT_S,
    show_default=f"{INVENTORY_TIMEOUT_S:g}s",
    help="How long a host's inventory probe may take (30, 2m) before the host is left out of the "
    "sweep as unreachable: on a large fleet one hung host holds the start up this long.",
)
@click.option(
    "--procs-per-host",
    type=Count(1, 1024),
    default=1,
    show_default=True,
    help="CPU ranks per host with gloo (NCCL: one rank per GPU).",
)
@click.option(
    "--python", default=None, help="Python on the hosts (default: a host's python= label, else python3)."
)
@click.option("--ssh-config", type=SSH_CONFIG, default=None, help="ssh_config to use.")
@click.option("--accept-new-host-keys", is_flag=True, help="Trust unknown host keys on first use.")
@click.option(
    "--topology",
    type=TOPOLOGY_FILE,
    default=None,
    help="Slurm topology.conf: which leaf switch each host hangs off (else switch= labels).",
)
@click.option(
    "--launcher",
    type=click.Choice(list(SITES)),
    default=None,
    help="Where the ranks start; every launcher runs the same sweep, re-tests and report "
    "(docs/architecture.md, sites). Default: slurm inside a Slurm allocation of several nodes when "
    "--hosts is not given, else ssh (this machine alone without --hosts). ssh: the hosts over SSH; "
    "local: each host of the file runs on this machine (e.g. a GPU subset given by its gpus= label); "
    "mpi: Open MPI's mpirun starts each host's agent (with --hosts over its ssh launcher, ssh never "
    "prompting; else on this machine); slurm: inside the current allocation (its nodes, `scontrol "
    "show topology`, the inventory as a job step, an srun step per node); k8s: a pod per Kubernetes "
    "node (--k8s-* options; the nodes' topology labels; docs/recipes.md has the RBAC).",
)
@k8s_options
@click.option(
    "--advertise",
    default=None,
    help="Address the hosts use to reach this machine (default: the one routing to the first host).",
)
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="Only the verdict, its findings and the report's path on stdout: no table, no '#' lines "
    "(every row is still in the run directory; errors and warnings still go to stderr).",
)
@history_options
def command(patterns: tuple[str, ...], **kw: object) -> None:
    """Sweep collectives over message sizes and print nccl-tests' table.

    With no arguments it runs on this machine: every local GPU with NCCL when CUDA is available,
    otherwise CPU ranks with gloo. Every row is saved to the run directory as it is measured.
    """
    from netbench.run.options import Options, from_command_line
    from netbench.sites.registry import default_launcher

    asked = list(dict.fromkeys(patterns))  # a pattern given twice is measured once
    if kw["launcher"] is None:
        kw["launcher"] = default_launcher(kw.get("hosts_file"))  # type: ignore[arg-type]
    if asked:
        kw["patterns"] = asked
    # the one tree, built once; the policy is parsed here (ReportOptions), so a broken one is bad input
    raise SystemExit(dispatch(from_command_line(Options, kw), asked, click.echo))


def dispatch(opts: Options, asked: list[str], echo: Callable[[str], None]) -> int:
    """The site (``netbench.sites.choose_site``), then the one pipeline (``netbench.run.pipeline``)."""
    from netbench.common.errors import UsageError

    if "copy-matrix" in asked:
        return copy_matrix(opts, asked, echo)
    from netbench.run.pipeline import run_pipeline
    from netbench.sites.base import finished
    from netbench.sites.registry import choose_site

    site = choose_site(opts)
    if site.one_machine:
        if set(asked) - {"intra"}:
            raise UsageError("--pattern ring/pairwise/rail need --hosts (one machine runs the world pattern)")
        opts.pairs.patterns = asked or ["world"]
    with finished(site):  # what the site made (Kubernetes' pods) goes, however the run ends
        return run_pipeline(opts, site, echo)


def copy_matrix(opts: Options, asked: list[str], echo: Callable[[str], None]) -> int:
    """``--pattern copy-matrix``: this machine's GPU-to-GPU copies as a run (``netbench.run.copy_matrix``),
    then the report and the exit status every run gets, from what the run did (its ``Outcome``)."""
    from netbench.common.errors import UsageError
    from netbench.run.copy_matrix import run_copy_matrix
    from netbench.run.execute import exit_status, finish_report
    from netbench.run.pipeline import verdict_only

    if asked != ["copy-matrix"] or opts.site.hosts_file or opts.site.launcher in ("mpi", "slurm"):
        raise UsageError(
            "--pattern copy-matrix measures this machine's GPUs alone: no --hosts, no other pattern"
        )
    report = opts.report
    echo = verdict_only(echo) if report.quiet else echo
    rundir, outcome = run_copy_matrix(opts.measure, report, echo)
    findings = finish_report(rundir, echo, policy=report.rules) if report.report else None
    return exit_status(outcome, rundir, findings, judged=report.report, fail_on=report.fail_on)
