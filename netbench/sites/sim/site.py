"""A simulated fabric as a ``Site`` (``netbench.sim``): the hosts of the fabric, the switches of its
tree, the inventory records a healthy node gives, a ``sim.launcher.SimLauncher`` for each launch (its
ranks run on the modelled fabric, on the fabric's clock), no port counters.

``netbench simulate`` plans its sweep through the sweep's own stage with it (``pipeline.plan_run``:
backend, engine, slots, plan) and then measures the plan's phases on the fabric directly, the fast
path (``sim.run``); ``simulate --preflight`` hands it to preflight, which launches through it
(``sim.preflight``). It is not in ``netbench.sites.SITES``: no ``--launcher`` reaches a simulated
fabric; ``netbench simulate`` makes it from its own options."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from netbench.defaults import INVENTORY_TIMEOUT_S
from netbench.inventory.hosts import HostEntry, parse_hosts_file
from netbench.inventory.model import GPU, NodeInventory
from netbench.run.planner import HostCaps
from netbench.sites.base import Echo, Switches
from netbench.sites.ssh.site import file_switches

if TYPE_CHECKING:
    from netbench.sim.fabric import Fabric
    from netbench.sim.launcher import SimHosts, SimLauncher
    from netbench.sim.rails import RailFabric


class SimSite:
    """``inputs``: the hosts file and Slurm topology.conf written for the fabric
    (``sim.preflight.write_inputs``), which preflight reads as it reads an operator's; None: the
    fabric's own hosts (each with its GPUs as slots) and tree."""

    name = "simulated"
    uses = frozenset({"hosts_file", "topology"})
    one_machine = False
    job_id = None

    def __init__(self, sim: SimHosts, inputs: tuple[Path, Path] | None = None) -> None:
        self.sim = sim
        self.inputs = inputs

    def hosts(self) -> list[HostEntry]:
        if self.inputs is not None:
            return parse_hosts_file(str(self.inputs[0]))
        return [HostEntry(name=h, slots=self.sim.fabric.spec.gpus) for h in self.sim.fabric.hosts]

    def inventory(

        self, entries: list[HostEntry], echo: Echo, timeout_s: float = INVENTORY_TIMEOUT_S

    ) -> list[NodeInventory]:
        """What a probe of a healthy node gives, after the probe's time (a GPU that will drop out
        is still there: it fails later, under load)."""
        self.sim.clock.advance(self.sim.costs.inventory_s(len(entries)))
        return [node_inventory(self.sim.fabric, e.name) for e in entries]

    def switches(self, entries: list[HostEntry], echo: Echo) -> Switches:
        if self.inputs is not None:
            return file_switches(entries, str(self.inputs[1]), echo)
        return Switches(uplinks=self.sim.fabric.uplinks())

    def caps(self, entries: list[HostEntry], nodes: Mapping[str, NodeInventory]) -> list[HostCaps]:
        return [HostCaps.of(e.name, nodes.get(e.name)) for e in entries]

    def launcher(self, hosts: list[str]) -> SimLauncher:
        return self.sim.launcher(hosts)

    def counters(self, phase: str, entries: list[HostEntry], rundir: object) -> None:
        return None  # a simulated fabric has no port counters


def node_inventory(fabric: Fabric | RailFabric, host: str) -> NodeInventory:
    """What a probe of a healthy node of ``fabric`` gives: its GPUs, the NCCL engine, and on a
    rail-optimised fabric its rails' NICs, GPU affinity and rail switches (``RailFabric.rail_parts``)."""
    gpus = fabric.spec.gpus
    inv = NodeInventory(
        host=host,
        hostname=host,
        gpus=[GPU(index=i, name="Simulated GPU") for i in range(gpus)],
        torch_version="simulated",
        torch_cuda_build="simulated",
        torch_cuda_available=True,
        torch_gpus=gpus,
        nccl4py=True,  # a healthy node has the NCCL engine: the plan's engine is nccl
        nccl4py_version="simulated",
    )
    parts = fabric.rail_parts(host)
    if parts is not None:
        inv.nics, inv.topo, inv.neighbors = parts.nics, parts.topo, parts.neighbors
    return inv
