"""``netbench inventory``: drivers, firmware, GPUs, NICs and switches of every node (or this one)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from netbench.commands._options import k8s_pod_options
from netbench.commands._params import DURATION, HOSTS_FILE, SSH_CONFIG, TOPOLOGY_FILE, Count
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.sites import INVENTORY

if TYPE_CHECKING:
    from netbench.common.rundir import RunDir
    from netbench.inventory.model import NodeInventory
    from netbench.run.options import Options

Found = tuple["RunDir", "list[NodeInventory]"]


@click.command(
    "inventory",
    short_help="Drivers, firmware, GPUs, NICs and switch of every node.",
    epilog="""\b
Examples:
  netbench inventory                                  # this machine, no SSH
  netbench inventory --hosts hosts.txt --topology /etc/slurm/topology.conf
  netbench inventory --hosts hosts.txt --accept-new-host-keys --json > inv.json
  netbench inventory --launcher k8s --k8s-image registry/netbench:0.1 --k8s-nodes pool=h200
Exit status: 0 every host inventoried, 1 some failed, 2 bad input.""",
)
@click.option("--hosts", "hosts_file", type=HOSTS_FILE, help="Hosts file (one host or hostlist per line).")
@click.option(
    "--ssh-config",
    type=SSH_CONFIG,
    help="ssh_config to use (default ~/.ssh/config).",
)
@click.option("--accept-new-host-keys", is_flag=True, help="Trust unknown host keys and record them.")
@click.option(
    "--launcher",
    type=click.Choice(list(INVENTORY)),
    default="ssh",
    show_default=True,
    help="ssh: the hosts of --hosts (without it, this machine); k8s: the probe as a pod on each node of "
    "a Kubernetes cluster (the --k8s-* options, as sweep's).",
)
@k8s_pod_options
@click.option("--python", help="Python on the nodes to ask for torch/NCCL (a host's python= label wins).")
@click.option("--topology", type=TOPOLOGY_FILE, help="Slurm topology.conf naming each node's switch.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    help="Run directory (default netbench-runs/<id>); refused if it holds a run already; {id} in it "
    "becomes the run id.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON instead of the table.")
@click.option("--concurrency", type=Count(1, 1024), default=64, show_default=True,
              help="Hosts probed at once.")
@click.option(
    "--timeout",
    "-T",
    type=DURATION,
    default=INVENTORY_TIMEOUT_S,
    show_default=f"{INVENTORY_TIMEOUT_S:g}s",
    help="Time per host for the probe (60, 60s, 2m); on k8s, for its pod to start and again for the "
    "probe to run.",
)
@click.pass_context
def command(ctx: click.Context, out: str | None, as_json: bool, timeout: float, **kw: object) -> None:
    """Collect what netbench knows about each node: GPUs, driver, CUDA, NICs and their firmware,
    OFED, NCCL, python/torch, and the switch each node is cabled to. Writes inventory.jsonl and
    run.json into a run directory and prints a table that marks values differing from the fleet."""
    from netbench.common.rundir import utc_now
    from netbench.inventory.table import render_json, render_table
    from netbench.run.options import Options, from_command_line

    # --timeout bounds a host's probe and, on k8s, its pod's start as well
    where = from_command_line(Options, {**kw, "inventory_timeout_s": timeout, "start_timeout_s": timeout})
    asked = where.site
    options = {"hosts": asked.hosts_file, "topology": asked.topology, "concurrency": asked.concurrency,
               "timeout_s": timeout, "python": asked.python}
    if asked.launcher == "k8s":
        options.update(k8s_nodes=asked.k8s.k8s_nodes, k8s_namespace=asked.k8s.k8s_namespace)
    run, nodes = _probe(where, out, options)
    run.write_inventory(nodes)
    failed = [n.host for n in nodes if not n.ok]
    run.write_run(
        finished_at=utc_now(), status="failed" if failed else "ok", hosts=len(nodes), failed_hosts=failed
    )
    click.echo(render_json(nodes) if as_json else render_table(nodes, color=sys.stdout.isatty()))
    click.echo(f"inventory: {run.inventory_path}", err=True)
    from netbench.reports.verdict import PASS, WARN, exit_code

    ctx.exit(exit_code("inventory", WARN if failed else PASS))  # a host not inventoried: a warning


def _probe(where: Options, out: str | None, options: dict[str, object]) -> Found:
    """The site of ``--launcher`` (``netbench.sites.INVENTORY``, through the registry sweep chooses
    with): its hosts, its switches (a bad ``--topology`` is bad input before the run directory), the
    run directory, the probe, and each node's leaf; whatever the site made is gone at the end
    (Kubernetes' pods), as after a sweep."""
    from netbench.common.errors import UsageError
    from netbench.common.rundir import RunDir, utc_now
    from netbench.inventory.fleet import apply_leaves
    from netbench.run.options import K8sOptions, flat
    from netbench.sites import INVENTORY
    from netbench.sites.base import finished
    from netbench.sites.registry import choose_site

    def echo(line: str) -> None:
        click.echo(line, err=True)

    # given, never dropped: refused by name, in words that name the launcher they need (the site's
    # own check would name the ssh site's, or "local" for this machine alone)
    if where.site.launcher != "k8s":
        asked = flat(where.site.k8s)
        for name, default in flat(K8sOptions()).items():
            if asked[name] != default:
                raise UsageError(f"--{name.replace('_', '-')} is for --launcher k8s")
    site = choose_site(where, INVENTORY)  # the options the site cannot honour are refused here, by name
    with finished(site):
        entries = site.hosts()
        switches = site.switches(entries, echo)
        run = RunDir.create(out, run_id=getattr(site, "run_id", None))  # a site may label what it makes
        run.write_run(command="inventory", started_at=utc_now(), status="running", launcher=site.name,
                      options=options)
        nodes = site.inventory(entries, echo, timeout_s=where.site.inventory_timeout_s)
        apply_leaves(nodes, switches.uplinks)
    return run, nodes
