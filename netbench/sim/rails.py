"""A rail-optimised fabric: every node has R NICs, NIC k of every node on rail k's own switches.

The fabric is R planes, each a ``fabric.Fabric`` of the same shape whose switches carry the rail's
prefix (``r2-leaf01``): plane k holds NIC k of every host (``nic_GBps / R`` each), rail k's leaves
(one per group of nodes, the "scalable unit" a plain fat tree calls a leaf) and their uplinks. A
flow on rail k shares only plane k's resources, so rails share nothing with each other.

Two ways to measure, the data a rail pattern of the planner can use:
- ``rates``: pairs measured all rails at once: each pair is R flows, one per plane. NCCL splits a
  collective's data evenly over its channels and NICs and finishes when the slowest does (the
  channels run in lock-step), so a pair runs at R times its slowest rail's rate, not at the sum of
  its rails' rates (issue 46: the sum read a NIC at 0.7 as 0.96 of a healthy pair, and PASSed);
- ``rail_rates``: flows on one rail only (``rail_of``/``rail_switches`` name the switches).

Faults: ``node:X=F`` caps every NIC of X, ``link:A,B=F`` the pair's path on every rail,
``intermittent:X`` every NIC in the rounds it is slow, ``uplink:r2-leaf01=F`` one rail switch's
uplink, ``nic:X/2=F`` NIC 2 of X alone (rails count from 1). ``uplinks()`` is the unit view (host ->
``leaf01``, leaf -> spine/pod), the same hop classes on every rail, which run.json records.

What a probe of a rail-optimised node shows (``rail_inventory``): NIC k as ``mlx5_{k-1}`` (rails count
from 1, devices from 0, as on real nodes), GPU g beside the NIC of its rail (``nvidia-smi topo -m``
PIX), and NIC k cabled to its rail's leaf (``r{k}-leafNN``): what ``inventory.rails.rail_ports``
reads to name a rail's NIC and switch, as it reads a real node's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from netbench.common.errors import UsageError
from netbench.inventory.model import NIC, SwitchNeighbor, TopoMatrix
from netbench.sim.fabric import Fabric, FabricSpec, Fault


def rail_prefix(rail: int) -> str:
    return f"r{rail}-"


@dataclass
class RailFabric:
    spec: FabricSpec
    planes: list[Fabric]
    """planes[k - 1]: rail k."""
    unit: Fabric
    """The fabric's shape without rails: host and switch names for the report's hop classes."""
    faults: tuple[Fault, ...]

    @classmethod
    def build(cls, spec: FabricSpec, faults: Sequence[Fault] = ()) -> RailFabric:
        rails = spec.rails
        plane_spec = replace(spec, rails=1, nic_GBps=spec.nic_GBps / rails)
        unit = Fabric.build(replace(spec, rails=1))
        per_rail: list[list[Fault]] = [[] for _ in range(rails)]
        for f in faults:
            if f.kind == "nic":
                host, _, rail = f.subject.partition("/")
                if host not in unit.leaf or not rail.isdigit() or not 1 <= int(rail) <= rails:
                    raise UsageError(f"--fault nic:{f.subject}: expected HOST/RAIL, a host of this fabric "
                                     f"and a rail 1..{rails}")
                per_rail[int(rail) - 1].append(replace(f, kind="node", subject=host))
            elif f.kind == "uplink":
                rail = next((k for k in range(1, rails + 1) if f.subject.startswith(rail_prefix(k))), None)
                if rail is None:
                    raise UsageError(f"--fault uplink:{f.subject}: name a rail switch, e.g. "
                                     f"{rail_prefix(1)}leaf01")
                per_rail[rail - 1].append(f)
            else:  # the node, its path or its GPU: every rail
                for lst in per_rail:
                    lst.append(f)
        planes = [Fabric.build(plane_spec, per_rail[k], prefix=rail_prefix(k + 1)) for k in range(rails)]
        return cls(spec, planes, unit, tuple(faults))

    @property
    def hosts(self) -> list[str]:
        return self.unit.hosts

    @property
    def leaf(self) -> dict[str, str]:
        return self.unit.leaf

    @property
    def pos(self) -> dict[str, int]:
        return self.unit.pos

    def uplinks(self) -> dict[str, str]:
        return self.unit.uplinks()

    def positions(self, flows: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        return self.unit.positions(flows)

    def rail_switches(self, host: str) -> list[str]:
        """The leaf of each of ``host``'s NICs, rail 1 first."""
        return [p.leaf[host] for p in self.planes]

    def rail_of(self, local_rank: int, gpus: int) -> int:
        """The rail (1..R) of the NIC GPU ``local_rank`` of ``gpus`` uses: the GPUs split evenly
        over the NICs in order (with 8 GPUs and 2 NICs, GPUs 0-3 on rail 1), one NIC each when
        there are as many NICs as GPUs."""
        return local_rank * len(self.planes) // max(gpus, 1) + 1

    def rail_parts(self, host: str) -> RailParts:
        """What a probe of ``host`` shows of its rails (``rail_inventory``)."""
        return rail_inventory(self, host)

    def switch_rail(self, switch: str) -> int:
        """The rail (1..R) a rail switch is on, from its name (``r2-leaf01``); 0 for none."""
        return next((k for k in range(1, len(self.planes) + 1) if switch.startswith(rail_prefix(k))), 0)

    def crosses(self, a: np.ndarray, b: np.ndarray, switch: str) -> np.ndarray:
        """Which flows cross rail switch ``switch``'s uplink, were they on its rail."""
        rail = self.switch_rail(switch)
        return self.planes[rail - 1].crosses(a, b, switch) if rail else np.zeros(len(a), dtype=bool)

    def rates(
        self, flows: Sequence[tuple[str, str]], slow_now: frozenset[str] = frozenset(), faults: bool = True
    ) -> np.ndarray:
        """Each pair measured on all rails at once: R times its slowest rail's rate."""
        return self.flow_rates(*self.positions(flows), slow_now, faults)

    def rail_rates(
        self, flows: Sequence[tuple[str, str]], rail: int, slow_now: frozenset[str] = frozenset()
    ) -> np.ndarray:
        """Flows on rail ``rail`` alone (1..R), all at once."""
        return self.flow_rates(*self.positions(flows), slow_now, rail=rail)

    def flow_rates(
        self,
        a: np.ndarray,
        b: np.ndarray,
        slow_now: frozenset[str] = frozenset(),
        faults: bool = True,
        rail: int | None = None,
    ) -> np.ndarray:
        """``Fabric.flow_rates`` on rail ``rail`` (1..R) alone, or (None) on every rail at once: R times
        the slowest rail's rate (lock-step channels, module docstring)."""
        if rail is not None:
            return self.planes[rail - 1].flow_rates(a, b, slow_now, faults)
        slowest = np.full(len(a), np.inf)
        for p in self.planes:
            slowest = np.minimum(slowest, p.flow_rates(a, b, slow_now, faults))
        return len(self.planes) * slowest


def build_fabric(spec: FabricSpec, faults: Sequence[Fault] = ()) -> Fabric | RailFabric:
    """The fabric ``spec`` describes: a fat tree, or its rail-optimised variant when it has rails."""
    return RailFabric.build(spec, faults) if spec.rails > 1 else Fabric.build(spec, faults)


def nic_name(rail: int) -> str:
    """The device name of a node's NIC on rail ``rail`` (1..R): ``mlx5_{rail - 1}``."""
    return f"mlx5_{rail - 1}"


@dataclass(frozen=True)
class RailParts:
    """What a probe of one rail-optimised node reports of its rails (``rail_inventory``)."""

    nics: list[NIC]
    topo: TopoMatrix
    neighbors: list[SwitchNeighbor]


def rail_inventory(fab: RailFabric, host: str) -> RailParts:  # RailFabric.rail_parts
    """``host``'s NICs (one a rail, active InfiniBand ports), its GPUs' affinity to them (GPU g PIX to
    the NIC of its rail, ``RailFabric.rail_of``; the rest across the CPU interconnect, SYS) and the
    rail switch each NIC is cabled to. No link rate: the simulated NIC's Gb/s is a share of
    ``--nic-gbps``, not a port speed a reference or a ceiling could be matched against."""
    rails, gpus = len(fab.planes), fab.spec.gpus
    nics = [NIC(name=nic_name(k), port=1, netdev=f"ib{k - 1}", link_layer="InfiniBand", state="Active")
            for k in range(1, rails + 1)]
    labels = {f"NIC{k - 1}": nic_name(k) for k in range(1, rails + 1)}
    relations = {
        f"GPU{g}": {f"NIC{k - 1}": "PIX" if fab.rail_of(g, gpus) == k else "SYS" for k in range(1, rails + 1)}
        for g in range(gpus)
    }
    topo = TopoMatrix(devices=[*relations, *labels], relations=relations, nic_names=labels)
    switches = fab.rail_switches(host)
    neighbors = [SwitchNeighbor(local_port=f"ib{k - 1}", switch=switches[k - 1], source="topology")
                 for k in range(1, rails + 1)]
    return RailParts(nics, topo, neighbors)
