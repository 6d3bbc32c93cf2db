"""``netbench inventory --launcher ssh``: sweep's ssh site (a hosts file over SSH, or this machine
without one) for an inventory that no run follows.

The hosts, the SSH settings and the switches are the sweep site's own (``sites.ssh``, ``sites.here``);
only the probe differs, because nothing is judged for a rank that will not run: the probe asks
``--python`` (a host's ``python=`` label wins) and no host is marked ``cannot_run`` for a torch that
cannot run a rank (``collect.probe_host``'s ``ranks_python`` None, no ``leave_out_unusable``). This
machine is probed whether or not it has a GPU (a sweep of CPU ranks skips it), and its ``--python``
and ``--topology`` are honoured."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.sites.base import Echo, Site, Switches
from netbench.sites.local.here import HereSite
from netbench.sites.ssh.site import SshSite, file_switches


@dataclass
class ProbedHosts(SshSite):
    """The hosts of ``--hosts`` over SSH, inventoried alone."""

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        from netbench.inventory.fleet import progress_printer
        from netbench.sites.ssh.inventory import collect_inventory

        progress = progress_printer(sys.stderr) if sys.stderr.isatty() else None
        return collect_inventory(entries, self.ssh, concurrency=self.opts.site.concurrency,
                                 probe_timeout=timeout_s, python=self.opts.site.python, progress=progress)


@dataclass
class ProbedHere(HereSite):
    """This machine alone, inventoried alone: its probe, whatever its devices."""

    uses: frozenset[str] = frozenset({"python", "topology", "launcher"})

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        from netbench.inventory.local import probe_local

        return [probe_local(python=self.opts.site.python, timeout=timeout_s, host=entries[0].name)]

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        return file_switches(entries, self.opts.site.topology, echo)


def make(opts: Options) -> Site:
    return ProbedHosts(opts) if opts.site.hosts_file else ProbedHere(opts)
