"""``--launcher local --hosts FILE``: every host of the file is a process group on this machine (a
GPU subset given by its ``gpus=`` label, or CPU ranks), so one machine can play a cluster. No SSH:
no inventory or counters; switches from the file's labels or --topology."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from netbench.agents.launchers import Launcher
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Site, Switches
from netbench.sites.ssh.site import file_hosts, file_switches


@dataclass
class LocalHostsSite:
    opts: Options
    name: str = "local"
    uses: frozenset[str] = frozenset({"hosts_file", "procs_per_host", "python", "topology", "launcher"})
    one_machine: bool = False
    job_id: str | None = None

    def hosts(self) -> list[HostEntry]:
        return file_hosts(self.opts)

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        return []

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        return file_switches(entries, self.opts.site.topology, echo)

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [HostCaps.here("this machine")]  # its GPUs are what counts; host_slots reads gpus= labels

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.local.launcher import LocalLauncher

        return LocalLauncher(python=self.opts.site.python)

    def counters(self, phase: str, entries: list[HostEntry], rundir: object) -> None:
        return None


def make(opts: Options) -> Site:
    from netbench.sites.local.here import HereSite

    return LocalHostsSite(opts) if opts.site.hosts_file else HereSite(opts)
