"""Inside a Slurm allocation (``salloc``/``sbatch``, no --hosts): the allocation's nodes, its switches
from ``scontrol show topology`` (saved beside the run as Slurm said them), the inventory probe as one
job step with a task per node (no SSH), and one agent per node as a one-task ``srun`` step
(``netbench.sites.slurm.launcher``) for the run and for each re-test launch."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from netbench.agents.launchers import Launcher
from netbench.common.errors import UsageError
from netbench.common.rundir import SLURM_TOPOLOGY
from netbench.common.text import terminal_safe
from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry
from netbench.inventory.model import NodeInventory
from netbench.run.options import Options
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Site, Switches
from netbench.sites.slurm.scontrol import Allocation, SlurmError, show_topology


def current_allocation() -> Allocation:
    """The allocation to run in; a UsageError (exit 2) outside one or from inside a step."""
    alloc = Allocation.from_env()
    if alloc is None:
        raise UsageError(
            "--launcher slurm runs inside a Slurm allocation (salloc/sbatch): SLURM_JOB_ID is unset"
        )
    if alloc.in_step:
        raise UsageError("netbench --launcher slurm starts its own srun steps: run it from the "
                         "allocation's shell or batch script, not under srun")
    return alloc


def allocation_switches(entries: list[HostEntry], echo: Echo) -> Switches:
    """What ``scontrol show topology`` says of ``entries`` (as ``--topology`` would: the hosts' leaves
    and every switch's parent); no switches is a poorer report, not a reason to stop."""
    try:
        text, topo = show_topology()
    except SlurmError as exc:
        echo(f"# switches: {exc}; pairs will not be judged by hop class")
        return Switches()
    if topo is None:
        echo("# switches: Slurm has no topology (TopologyPlugin=topology/none); pairs not judged by hop "
             "class")
        return Switches()
    unplaced = topo.unplaced_warning([e.name for e in entries])
    for w in [*topo.warnings, *([unplaced] if unplaced else [])]:
        echo(f"# topology warning: {terminal_safe(w, keep_newlines=False)}")
    echo(f"# switches from scontrol show topology: {len(topo.leaves)} leaf switch(es), "
         f"saved as {SLURM_TOPOLOGY}")
    return Switches(uplinks=topo.uplinks(e.name for e in entries), saved={SLURM_TOPOLOGY: text})


def tasks_per_node() -> int | None:
    """The allocation's ``--ntasks-per-node``: gloo ranks per node when given (NCCL: one per GPU)."""
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "")
    return int(per_node) if per_node.isdigit() and int(per_node) > 0 else None


@dataclass
class SlurmSite:
    opts: Options
    name: str = "slurm"
    uses: frozenset[str] = frozenset({"procs_per_host", "python", "topology", "advertise", "launcher"})
    one_machine: bool = False
    job_id: str | None = None

    def __post_init__(self) -> None:  # --hosts is refused by sites.base.check: the allocation's hosts
        self.alloc = current_allocation()
        self.job_id = self.alloc.job_id

    def hosts(self) -> list[HostEntry]:
        return [HostEntry(name=n, slots=tasks_per_node()) for n in self.alloc.nodes]

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        from netbench.inventory.model import leave_out_unusable
        from netbench.sites.slurm.step import collect_inventory_srun

        # the probe asks the python the ranks will run (srun starts them with this one)
        python = self.opts.site.python or sys.executable
        records = collect_inventory_srun([e.name for e in entries], python, timeout_s=timeout_s)
        leave_out_unusable(records, self.opts.measure.backend)
        return records

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        if self.opts.site.topology:  # --topology wins, as over SSH
            from netbench.sites.ssh.site import file_switches

            return file_switches(entries, self.opts.site.topology, echo)
        return allocation_switches(entries, echo)

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [HostCaps.of(e.name, nodes.get(e.name)) for e in entries]

    def launcher(self, hosts: list[str]) -> Launcher:
        from netbench.sites.slurm.launcher import SrunLauncher

        return SrunLauncher(hosts, python=self.opts.site.python, advertise=self.opts.site.advertise)

    def counters(self, phase: str, entries: list[HostEntry], rundir: object) -> None:
        return None  # no SSH to read them with; the inventory step has the links' state


def make(opts: Options) -> Site:
    return SlurmSite(opts)
