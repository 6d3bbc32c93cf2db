"""Ranks a user's own torchrun, srun or mpirun started (``netbench worker``): the site where nothing is
started. Its hosts are where the ranks said they run (``launch.external.gather_slots``), its launcher
only reads their lines from the run's store (``launch.external.ExternalLauncher``), its switches come
from ``--topology``; it has no inventory and no port counters (no probe reaches the hosts: the user's
launcher owns them).

It is not in ``netbench.sites.SITES``: no ``--launcher`` chooses it, the environment does
(``launch.external.detect``), and it exists only once the ranks have met at the store. The stages after
it are the sweep's own (``pipeline.plan_run``, ``run.execute.execute``, ``run.execute.finish_report``,
``run.execute.exit_status``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from netbench.agents.launchers import HostSlot, Launcher
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Switches
from netbench.sites.ssh.site import file_switches


@dataclass
class ExternalSite:
    opts: Options
    name: str
    """The launcher that started the ranks (torchrun | slurm | mpi): run.json's ``launcher``."""
    gathered: list[HostSlot]
    """Each host's ranks, as the ranks posted them (contiguous, in rank order)."""
    here: HostCaps
    """Rank 0's torch: the one this process can ask (the other hosts' ranks report a capability
    fault if theirs differs)."""
    store: Any
    """The coordinator's own client of the run's store."""
    uses: frozenset[str] = frozenset({"topology", "launcher"})
    one_machine: bool = False
    job_id: str | None = None

    def hosts(self) -> list[HostEntry]:
        return [HostEntry(name=s.host, slots=s.nprocs) for s in self.gathered]

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        return []

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        return file_switches(entries, self.opts.site.topology, echo)

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        """Rank 0's host, whose GPUs for the run are the ranks the launcher started there (one GPU a
        rank, by local rank): the slots follow the ranks that exist, not the GPUs torch sees."""
        mine = next(s for s in self.gathered if s.host == self.here.host)
        return [replace(self.here, torch_gpus=mine.nprocs) if self.here.cuda_available else self.here]

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.external.store import ExternalLauncher

        return ExternalLauncher(self.store, self.name)

    def counters(self, phase: str, entries: list[HostEntry], rundir: object) -> None:
        return None
