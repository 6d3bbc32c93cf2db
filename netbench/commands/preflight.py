"""``netbench preflight``: yes/no before a large job, and the nodes to drain (stdout, one per line)."""

from __future__ import annotations

import sys

import click

from netbench.commands._history import history_options
from netbench.commands._options import FAIL_ON, k8s_options
from netbench.commands._params import (
    DURATION,
    HOSTS_FILE,
    PAIR_SIZE_LIST,
    POLICY_FILE,
    SSH_CONFIG,
    TOPOLOGY_FILE,
    Count,
)
from netbench.defaults import MAX_COUNT
from netbench.sites import PREFLIGHT


class _Command(click.Command):
    """A bad option said as preflight's other could-not-run errors are, one ``netbench: error:`` line
    (what scheduler scripts read); its exit status is the one table's (``reports.verdict``: bad input
    is 3 here, never 2, which means "nodes to drain")."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            from netbench.common.errors import UsageError

            raise UsageError(f"preflight: {exc.format_message()} (see --help)") from None


@click.command(
    "preflight",
    cls=_Command,
    short_help="Yes/no before a large job, and the nodes to drain.",
    epilog="""\b
Examples:
  netbench preflight --hosts hosts.txt                      # stdout: nodes to drain, one per line
  netbench preflight --hosts hosts.txt --policy policy.toml --budget 5m --drain-list drain.txt
  netbench preflight --hosts hosts.txt --baseline last-good --json pf.json --junit pf.xml
  netbench preflight --hosts hosts.txt --drain              # and drain them in Slurm (scontrol)
  netbench preflight --hosts hosts.txt --drain --dry-run    # print those scontrol commands only
  salloc -N 16 netbench preflight --drain                   # the allocation's nodes, over srun
  netbench preflight --launcher k8s --k8s-image registry/netbench:0.1 --k8s-taint  # taint the nodes to drain
\b
Inventory and policy first (nodes that fail there are not measured; --fail-fast stops there), then a
quick pass (--rounds perfect matchings of pairs + the ring, at 2 sizes; with the topology known, each
node's partners are on its own leaf first, then whole leaves meet other leaves so a slow uplink
shows), then each suspect re-tested against known-good partners
while the budget lasts (a node several slow links share, as the node), then rounds of pairs within
each leaf, every node at once, until every node is decided or the budget ends (sequential tests:
a node 10% slow, or slow now and then, is drained; the summary says what was decided, and how
certainly). A node is drained only for a failure of its own, and a slow node only once its re-tests
confirm it; slow links are listed to check, not drained.
Exit codes: 0 pass, 1 warnings, 2 failures (drain; --fail-on warn: warnings too, never: no
verdict exits non-zero, the drain list still prints), 3 could not run (bad input, nothing reachable,
budget too small for the quick pass, --out holding a run already, hosts whose torch cannot use their
GPUs, a full run directory, an internal error); interrupted: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP,
with the drain list of what the inventory had established only (docs/exit-status.md). Progress and
the verdict go to stderr.""",
)
@click.option(
    "--hosts",
    "hosts_file",
    type=HOSTS_FILE,
    help="Hosts file. Inside salloc/sbatch without it: the allocation's nodes, over srun (no SSH).",
)
@click.option("--policy", type=POLICY_FILE, help="Policy TOML (docs/policy.example.toml).")
@click.option("--baseline", help="Saved baseline name or run directory to compare against.")
@click.option(
    "--budget",
    "budget_s",
    type=DURATION,
    default="120s",
    show_default=True,
    help="Wall time for everything, inventory and report included.",
)
@click.option("--rounds", type=Count(1, MAX_COUNT), help="Pair matchings in the quick pass (default 3).")
@click.option(
    "--confirm",
    type=Count(0, MAX_COUNT),
    default=2,
    show_default=True,
    help="Known-good partners each suspect is re-tested against.",
)
@click.option(
    "--sequential/--no-sequential",
    default=True,
    show_default=True,
    help="After the re-tests, test every undecided node in rounds of pairs until all are decided or "
    "the budget ends; --no-sequential stops after the re-tests (the budget is then a bound only).",
)
@click.option("--pair-sizes", type=PAIR_SIZE_LIST, help="Sizes (default 1M,4M gloo; 256M,1G NCCL).")
@click.option(
    "--collective",
    "--collectives",
    "-k",
    "collective",
    default="all_reduce",
    show_default=True,
    help="The one collective of the pairs and the ring (sweep's -k/--collectives takes a list).",
)
@click.option("--iters", "-n", type=Count(1, MAX_COUNT), default=10, show_default=True,
              help="Timed iterations per size.")
@click.option("--warmup", "-w", type=Count(0, MAX_COUNT), default=2, show_default=True,
              help="Untimed warm-up iterations per size.")
@click.option(
    "--timeout",
    "-T",
    "timeout_s",
    type=DURATION,
    default="15s",
    show_default=True,
    help="A collective silent this long has failed.",
)
@click.option("--ring/--no-ring", default=True, show_default=True, help="The ring over all nodes too.")
@click.option("--fail-fast", is_flag=True, help="Stop after the inventory if it already fails.")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]),
              help="Force a backend (default: nccl when every host has GPUs, else gloo).")
@click.option("--procs-per-host", type=Count(1, 1024), default=1, show_default=True,
              help="CPU ranks per host with gloo (NCCL: one rank per GPU).")
@click.option("--python", help="Python on the hosts (default: a python= label, else python3).")
@click.option("--ssh-config", type=SSH_CONFIG, help="ssh_config to use.")
@click.option("--accept-new-host-keys", is_flag=True, help="Trust unknown host keys on first use.")
@click.option("--topology", type=TOPOLOGY_FILE, help="Slurm topology.conf.")
@click.option("--advertise", help="Address the hosts use to reach this machine.")
@click.option(
    "--launcher",
    type=click.Choice(PREFLIGHT),
    default=None,
    help="ssh (default with --hosts), slurm (default inside an allocation), or k8s: a pod per Kubernetes "
    "node (the --k8s-* options, as sweep's).",
)
@k8s_options
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Run directory; refused (exit 3) if it holds a run already; {id} in it becomes the run id "
    "(a prolog's fixed path: --out /var/netbench/{id}).",
)
@click.option("--drain-list", type=click.Path(dir_okay=False), help="Write the nodes to drain here.")
@click.option(
    "--drain",
    "drain_in_slurm",
    is_flag=True,
    help="Also drain each node of the drain list in Slurm: scontrol update NodeName=N State=DRAIN "
    "Reason='netbench: RULE: FINDING [run ID report PATH]' (one stderr line per node). Never done "
    "without this flag.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="With --drain: print the scontrol commands (stderr) instead of running them.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="JSON report (docs/output-json.md)."
)
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="JUnit XML for CI.")
@click.option("--junit-warn-as-failure", is_flag=True, help="Warnings fail the JUnit test cases too.")
@click.option("--prometheus", "prometheus_path", type=click.Path(dir_okay=False), help="Prometheus textfile.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Result rows as CSV.")
@FAIL_ON
@history_options
def command(
    drain_list: str | None,
    drain_in_slurm: bool,
    dry_run: bool,
    json_path: str | None,
    junit_path: str | None,
    junit_warn_as_failure: bool,
    prometheus_path: str | None,
    csv_path: str | None,
    fail_on: str,
    **kw: object,
) -> None:
    """Check a set of nodes before a large job: inventory, policy, pairs, ring, re-tests of suspects."""
    from netbench.common.errors import UsageError
    from netbench.preflight import (
        PreflightError,
        PreflightOptions,
        format_summary,
        run_preflight,
        write_error_outputs,
        write_outputs,
    )
    from netbench.preflight.outputs import check_output_paths
    from netbench.run.options import from_command_line

    if dry_run and not drain_in_slurm:
        raise PreflightError("--dry-run shows what --drain would run: give both")

    check_output_paths({
        "--drain-list": drain_list, "--json": json_path, "--junit": junit_path,
        "--prometheus": prometheus_path, "--csv": csv_path,
    })
    try:
        try:  # the one tree, built once (the policy parsed in it): bad input is preflight's exit 3
            opts = from_command_line(PreflightOptions, kw)
        except UsageError as exc:
            raise PreflightError(str(exc)) from None
        result = run_preflight(opts)
    except (PreflightError, UsageError) as exc:  # bad input found on the way (a topology file) too
        write_error_outputs(str(exc), json_path=json_path, junit_path=junit_path, drain_list=drain_list)
        raise
    write_outputs(
        result,
        json_path=json_path,
        junit_path=junit_path,
        junit_warn_as_failure=junit_warn_as_failure,
        prometheus_path=prometheus_path,
        csv_path=csv_path,
        drain_list=drain_list,
    )
    click.echo(format_summary(result, sys.stderr), err=True)
    if drain_in_slurm:
        from netbench.preflight.outputs import drain_in_slurm as drain

        for line in drain(result, dry_run=dry_run):
            click.echo(line, err=True)
    for host in result.drain:
        click.echo(host)
    from netbench.preflight.outputs import situation
    from netbench.reports.verdict import exit_code

    raise SystemExit(exit_code("preflight", situation(result), fail_on))
