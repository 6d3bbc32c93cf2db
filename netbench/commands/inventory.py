"""``netbench inventory``: drivers, firmware, GPUs, NICs and switches of every node (or this one)."""

from __future__ import annotations

import sys

import click

from netbench.params import DURATION, HOSTS_FILE, SSH_CONFIG, TOPOLOGY_FILE, Count


@click.command(
    "inventory",
    short_help="Drivers, firmware, GPUs, NICs and switch of every node.",
    epilog="""\b
Examples:
  netbench inventory                                  # this machine, no SSH
  netbench inventory --hosts hosts.txt --topology /etc/slurm/topology.conf
  netbench inventory --hosts hosts.txt --accept-new-host-keys --json > inv.json
Exit status: 0 every host inventoried, 1 some failed, 2 bad input.""",
)
@click.option("--hosts", "hosts_file", type=HOSTS_FILE, help="Hosts file (one host or hostlist per line).")
@click.option(
    "--ssh-config",
    type=SSH_CONFIG,
    help="ssh_config to use (default ~/.ssh/config).",
)
@click.option("--accept-new-host-keys", is_flag=True, help="Trust unknown host keys and record them.")
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
    default="60s",
    show_default=True,
    help="Time per host for the probe (60, 60s, 2m).",
)
@click.pass_context
def command(
    ctx: click.Context,
    hosts_file: str | None,
    ssh_config: str | None,
    accept_new_host_keys: bool,
    python: str | None,
    topology: str | None,
    out: str | None,
    as_json: bool,
    concurrency: int,
    timeout: float,
) -> None:
    """Collect what netbench knows about each node: GPUs, driver, CUDA, NICs and their firmware,
    OFED, NCCL, python/torch, and the switch each node is cabled to. Writes inventory.jsonl and
    run.json into a run directory and prints a table that marks values differing from the fleet."""
    from netbench.common.hosts import parse_hosts_file
    from netbench.common.rundir import RunDir, utc_now
    from netbench.common.ssh import SSHOptions
    from netbench.common.topology import load_topology
    from netbench.inventory.collect import apply_topology, collect_inventory, progress_printer
    from netbench.inventory.local import probe_local
    from netbench.inventory.table import render_json, render_table

    entries = parse_hosts_file(hosts_file) if hosts_file else None
    topo = load_topology(topology) if topology else None
    unplaced = topo.unplaced_warning([e.name for e in entries]) if topo and entries else None
    for warning in [*(topo.warnings if topo else []), *([unplaced] if unplaced else [])]:
        click.echo(f"netbench: warning: {warning}", err=True)
    opts = SSHOptions(ssh_config=ssh_config, accept_new_host_keys=accept_new_host_keys) if entries else None
    run = RunDir.create(out)
    run.write_run(
        command="inventory",
        started_at=utc_now(),
        status="running",
        launcher="ssh" if entries else "local",
        options={
            "hosts": hosts_file,
            "topology": topology,
            "concurrency": concurrency,
            "timeout_s": timeout,
            "python": python,
        },
    )
    if entries is None:
        nodes = [probe_local(python=python, timeout=timeout)]
    else:
        progress = progress_printer(sys.stderr) if sys.stderr.isatty() else None
        nodes = collect_inventory(
            entries, opts, concurrency=concurrency, probe_timeout=timeout, python=python, progress=progress
        )
    apply_topology(nodes, topo)
    run.write_inventory(nodes)
    failed = [n.host for n in nodes if not n.ok]
    run.write_run(
        finished_at=utc_now(), status="failed" if failed else "ok", hosts=len(nodes), failed_hosts=failed
    )
    click.echo(render_json(nodes) if as_json else render_table(nodes, color=sys.stdout.isatty()))
    click.echo(f"inventory: {run.inventory_path}", err=True)
    ctx.exit(1 if failed else 0)
