"""This machine alone (``netbench sweep`` with no --hosts): its GPUs with NCCL, else a few CPU ranks
with gloo, one agent started as a child process. The inventory is this machine's probe, taken when
torch sees a GPU (the headline's NVLink/PCIe ceiling); CPU ranks skip it: gloo on one host crosses
no link the inventory describes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from netbench.agents.launchers import Launcher
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options, default_procs
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Switches


@dataclass
class HereSite:
    opts: Options
    name: str = "local"
    uses: frozenset[str] = frozenset({"procs", "launcher"})
    one_machine: bool = True
    job_id: str | None = None

    def hosts(self) -> list[HostEntry]:
        return [HostEntry(name=os.uname().nodename, slots=self.opts.site.procs or default_procs())]

    @cached_property
    def here(self) -> HostCaps:
        """This process's torch (and nccl4py), asked once: the inventory's decision and the caps'."""
        return HostCaps.here(os.uname().nodename)

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        from netbench.inventory.local import probe_local

        if not self.here.cuda_available:
            return []
        node = probe_local(host=entries[0].name, timeout=timeout_s)
        if not node.ok:
            echo(f"# inventory of this host: {node.status}: {node.error}")
        return [node]

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        return Switches()

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [self.here]

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.local.launcher import LocalLauncher

        return LocalLauncher()

    def counters(self, phase: str, entries: list[HostEntry], rundir: object) -> None:
        return None

