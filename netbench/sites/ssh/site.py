"""Hosts of a hosts file reached over SSH (paramiko): the inventory probe, one agent per host over
one channel, port counters before and after; switches from ``--topology`` or ``switch=`` labels.
Without --hosts, this machine alone (``here``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from netbench.agents.launchers import Launcher
from netbench.common.errors import UsageError
from netbench.common.rundir import RunDir
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry, parse_hosts_file
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Site, Switches
from netbench.sites.ssh.transport import SSHOptions


def file_hosts(opts: Options) -> list[HostEntry]:
    """The hosts file's hosts, each once."""
    assert opts.site.hosts_file is not None
    entries = parse_hosts_file(opts.site.hosts_file)
    if len({e.name for e in entries}) != len(entries):
        raise UsageError("a host appears twice in the hosts file")
    return entries


def file_switches(entries: list[HostEntry], topology_file: str | None, echo: Echo) -> Switches:
    """Uplinks (host -> leaf, switch -> parent; netbench.inventory.topology): a topology file wins over
    ``switch=`` labels of the hosts file."""
    out = {e.name: e.labels["switch"] for e in entries if e.labels.get("switch")}
    if topology_file:
        from netbench.inventory.topology import load_topology, require_placed

        topo = load_topology(topology_file)
        require_placed(topo.uplinks(), [e.name for e in entries], topology_file)
        unplaced = topo.unplaced_warning([e.name for e in entries])
        for w in [*topo.warnings, *([unplaced] if unplaced else [])]:
            echo(f"# topology warning: {w}")
        out.update(topo.uplinks(e.name for e in entries))
    return Switches(uplinks=out)


@dataclass
class SshSite:
    opts: Options
    name: str = "ssh"
    uses: frozenset[str] = frozenset({"hosts_file", "procs_per_host", "python", "ssh_config",
                                      "accept_new_host_keys", "advertise", "topology", "launcher"})
    one_machine: bool = False
    job_id: str | None = None
    probe_python: bool = True
    """The inventory asks the ranks' python (``--python``) what its torch can do, which the backend is
    chosen from; False: the hosts' python3 (preflight: a torch import a host costs its budget, and
    the ranks' hello names a torch that cannot do the run anyway)."""
    ssh: SSHOptions = field(init=False)
    entries: list[HostEntry] = field(init=False)

    def __post_init__(self) -> None:
        self.ssh = SSHOptions(ssh_config=self.opts.site.ssh_config,
                              accept_new_host_keys=self.opts.site.accept_new_host_keys)
        self.entries = file_hosts(self.opts)  # read once: bad input fails as the site is chosen

    def hosts(self) -> list[HostEntry]:
        return self.entries

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        from netbench.inventory.model import leave_out_unusable
        from netbench.sites.ssh.inventory import collect_inventory

        python = self.opts.site.python if self.probe_python else None
        # what the probe asks (told nothing: python3) is what the ranks run, or its answer cannot
        # say that a rank cannot run there (a host's python= label is both: collect.probe_host)
        ranks_python = (python or "python3") == (self.opts.site.python or self.ranks_default_python())
        records = collect_inventory(entries, self.ssh, concurrency=self.opts.site.concurrency,
                                    probe_timeout=timeout_s, python=python, ranks_python=ranks_python)
        leave_out_unusable(records, self.opts.measure.backend)
        return records

    def ranks_default_python(self) -> str:
        """The python the ranks run without --python or a python= label (the launcher's)."""
        return "python3"

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        return file_switches(entries, self.opts.site.topology, echo)

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [HostCaps.of(e.name, nodes.get(e.name)) for e in entries]

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.ssh.launcher import SSHLauncher

        chosen = {e.name: e for e in self.entries if e.name in hosts}
        return SSHLauncher(chosen, self.ssh, python=self.opts.site.python, advertise=self.opts.site.advertise)

    def counters(self, phase: str, entries: list[HostEntry], rundir: RunDir) -> None:
        """A second, counters-only probe pass into counters.jsonl, so the report can show what the
        links did during the run."""
        from netbench.sites.ssh.inventory import snapshot_counters

        concurrency = self.opts.site.concurrency
        rundir.write_counters(phase, snapshot_counters(entries, self.ssh, concurrency=concurrency))


def make(opts: Options) -> Site:
    from netbench.sites.local.here import HereSite

    return SshSite(opts) if opts.site.hosts_file else HereSite(opts)
